package server

import (
	"strings"
	"testing"
)

// An open invitation is revoked: its link then answers as an unknown one,
// it leaves the list, and a second revocation, an accepted one or another
// workspace's is the ordinary 404. An admin cannot revoke an invitation as
// owner (it could not have made it), a viewer none.
func TestRevokeInvitation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	h.setupTenant("other", "elsewhere")
	h.addUser("owner@example.com", "owner", "acme")
	h.addUser("admin@example.com", "admin", "acme")
	h.addUser("viewer@example.com", "viewer", "acme")
	as := map[string]*signedClient{}
	for _, who := range []string{"owner", "admin", "viewer"} {
		as[who] = h.client()
		as[who].signin(who+"@example.com", testPassword)
	}
	invite := func(slug, email, role string) (id, token string) {
		r := h.q("POST", "/v1/workspaces/"+slug+"/invitations", testAdminToken, map[string]any{"email": email, "role": role})
		mustStatus(t, r, 201, "")
		m := r.json(t)
		return m["id"].(string), m["token"].(string)
	}
	viewerInv, viewerToken := invite("acme", "bo@example.com", "viewer")
	ownerInv, _ := invite("acme", "cy@example.com", "owner")
	otherInv, _ := invite("other", "di@example.com", "viewer")
	acceptedInv, acceptedToken := invite("acme", "ed@example.com", "viewer")
	mustStatus(t, h.client().do("POST", "/v1/auth/invitations/accept", map[string]any{"token": acceptedToken, "password": testPassword}), 200, "")

	for _, tc := range []struct {
		who, id string
		status  int
		code    string
	}{
		{"viewer", viewerInv, 403, "forbidden"},
		{"admin", ownerInv, 403, "forbidden"},
		{"admin", otherInv, 404, "not_found"},
		{"owner", otherInv, 404, "not_found"},
		{"owner", acceptedInv, 404, "not_found"},
		{"owner", "no-such-id", 404, "not_found"},
		{"admin", viewerInv, 204, ""},
		{"admin", viewerInv, 404, "not_found"},
		{"owner", ownerInv, 204, ""},
	} {
		r := as[tc.who].do("DELETE", "/v1/workspaces/acme/invitations/"+tc.id, nil)
		if r.status != tc.status || r.code() != tc.code {
			t.Errorf("%s revoking %s: got %d %q, want %d %q; body %s", tc.who, tc.id, r.status, r.code(), tc.status, tc.code, r.body)
		}
	}
	mustStatus(t, h.client().do("POST", "/v1/auth/invitations/accept", map[string]any{"token": viewerToken, "password": testPassword}), 400, "invalid_token")
	r := h.q("GET", "/v1/workspaces/acme/invitations", testAdminToken, nil)
	mustStatus(t, r, 200, "")
	if list := r.json(t)["invitations"].([]any); len(list) != 0 {
		t.Errorf("got open invitations %s, want none", r.body)
	}
	// The admin token and an admin key revoke too.
	id, _ := invite("acme", "fi@example.com", "owner")
	mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/invitations/"+id, testAdminToken, nil), 204, "")
	audit := h.q("GET", "/v1/workspaces/acme/audit", testAdminToken, nil)
	if n := strings.Count(string(audit.body), `"action":"invitation.revoke"`); n != 3 {
		t.Errorf("got %d invitation.revoke entries, want 3: %s", n, audit.body)
	}
}

// An owner changes a member's role (the admin token and admin keys too;
// an admin or viewer cannot); the role acts at the member's next request;
// the only owner keeps the role (409 last_owner) and an unknown member or
// role is refused, as a user of another workspace is the ordinary 404.
func TestChangeMemberRole(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	h.setupTenant("other", "elsewhere")
	ana := h.addUser("ana@example.com", "owner", "acme")
	bo := h.addUser("bo@example.com", "viewer", "acme")
	cy := h.addUser("cy@example.com", "admin", "acme")
	stranger := h.addUser("di@example.com", "viewer", "other")
	owner, admin, viewer := h.client(), h.client(), h.client()
	owner.signin("ana@example.com", testPassword)
	admin.signin("cy@example.com", testPassword)
	viewer.signin("bo@example.com", testPassword)

	mustStatus(t, viewer.do("GET", "/v1/workspaces/acme/keys", nil), 403, "forbidden")
	for _, tc := range []struct {
		name   string
		c      *signedClient
		token  string
		user   string
		body   any
		status int
		code   string
	}{
		{"a viewer", viewer, "", bo, map[string]any{"role": "owner"}, 403, "forbidden"},
		{"an admin", admin, "", bo, map[string]any{"role": "admin"}, 403, "forbidden"},
		{"a read key", nil, tn.readKey, bo, map[string]any{"role": "admin"}, 403, "forbidden"},
		{"no such role", owner, "", bo, map[string]any{"role": "boss"}, 400, "invalid_role"},
		{"no role", owner, "", bo, map[string]any{}, 400, "invalid_role"},
		{"a user of another workspace", owner, "", stranger, map[string]any{"role": "admin"}, 404, "not_found"},
		{"an unknown user", owner, "", "nobody", map[string]any{"role": "admin"}, 404, "not_found"},
		{"the only owner demoting itself", owner, "", ana, map[string]any{"role": "admin"}, 409, "last_owner"},
		{"the owner promoting a viewer", owner, "", bo, map[string]any{"role": "admin"}, 200, ""},
		{"the same role again", owner, "", bo, map[string]any{"role": "admin"}, 200, ""},
		{"an admin key", nil, tn.adminKey, cy, map[string]any{"role": "owner"}, 200, ""},
		{"one of two owners stepping down", owner, "", ana, map[string]any{"role": "viewer"}, 200, ""},
		{"the admin token", nil, testAdminToken, ana, map[string]any{"role": "owner"}, 200, ""},
	} {
		var r response
		if tc.c != nil {
			r = tc.c.do("PATCH", "/v1/workspaces/acme/members/"+tc.user, tc.body)
		} else {
			r = h.q("PATCH", "/v1/workspaces/acme/members/"+tc.user, tc.token, tc.body)
		}
		if r.status != tc.status || r.code() != tc.code {
			t.Fatalf("%s: got %d %q, want %d %q; body %s", tc.name, r.status, r.code(), tc.status, tc.code, r.body)
		}
		if tc.status == 200 {
			m := r.json(t)
			if m["user_id"] != tc.user || m["role"] != tc.body.(map[string]any)["role"] {
				t.Errorf("%s: got %s, want the member with its new role", tc.name, r.body)
			}
		}
	}
	// The viewer made admin acts as one at once, with its session as it was.
	mustStatus(t, viewer.do("GET", "/v1/workspaces/acme/keys", nil), 200, "")
	audit := h.q("GET", "/v1/workspaces/acme/audit", testAdminToken, nil)
	body := string(audit.body)
	if n := strings.Count(body, `"action":"member.update"`); n != 4 {
		t.Errorf("got %d member.update entries, want 4 (none for the same role again): %s", n, body)
	}
	if !strings.Contains(body, `"previous_role":"viewer","role":"admin"`) {
		t.Errorf("want a member.update entry with the roles before and after: %s", body)
	}
}
