package server

import (
	"bytes"
	"strings"
	"testing"
)

// TestOwnersManageSites: a signed-in owner lists, creates and deletes the
// sites of its workspace (docs/accounts.md#roles); an admin's or viewer's
// session and API keys, admin-scoped too, get 403 as before; another
// workspace, or a site of another, is the ordinary 404. An owner's site
// creation is audited as the user's.
func TestOwnersManageSites(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	h.setupTenant("other", "elsewhere")
	owner := h.addUser("owner@example.com", "owner", "acme")
	h.addUser("admin@example.com", "admin", "acme")
	h.addUser("viewer@example.com", "viewer", "acme")
	as := map[string]*signedClient{}
	for _, who := range []string{"owner", "admin", "viewer"} {
		as[who] = h.client()
		as[who].signin(who+"@example.com", testPassword)
	}
	unknown := h.q("GET", "/v1/workspaces/nope/sites", testAdminToken, nil)
	newSite := map[string]any{"id": "shop", "name": "Shop"}
	for _, c := range []struct {
		who, method, path string
		body              any
		status            int
		code              string
	}{
		{"owner", "GET", "/v1/workspaces/acme/sites", nil, 200, ""},
		{"owner", "POST", "/v1/workspaces/acme/sites", map[string]any{"id": "bad id!", "name": "x"}, 400, "invalid_site_id"},
		{"owner", "POST", "/v1/workspaces/acme/sites", newSite, 201, ""},
		{"owner", "POST", "/v1/workspaces/acme/sites", newSite, 409, "site_id_taken"},
		{"owner", "GET", "/v1/sites/shop", nil, 200, ""},
		{"owner", "POST", "/v1/workspaces/other/sites", map[string]any{"id": "mine", "name": "x"}, 404, "not_found"},
		{"owner", "GET", "/v1/workspaces/other/sites", nil, 404, "not_found"},
		{"owner", "DELETE", "/v1/workspaces/other/sites/elsewhere", nil, 404, "not_found"},
		{"owner", "DELETE", "/v1/workspaces/acme/sites/elsewhere", nil, 404, "not_found"},
		{"admin", "GET", "/v1/workspaces/acme/sites", nil, 403, "forbidden"},
		{"admin", "POST", "/v1/workspaces/acme/sites", map[string]any{"id": "x", "name": "x"}, 403, "forbidden"},
		{"admin", "DELETE", "/v1/workspaces/acme/sites/shop", nil, 403, "forbidden"},
		{"admin", "POST", "/v1/workspaces/other/sites", map[string]any{"id": "x", "name": "x"}, 404, "not_found"},
		{"viewer", "POST", "/v1/workspaces/acme/sites", map[string]any{"id": "x", "name": "x"}, 403, "forbidden"},
		{"viewer", "DELETE", "/v1/workspaces/acme/sites/shop", nil, 403, "forbidden"},
		{"key", "POST", "/v1/workspaces/acme/sites", map[string]any{"id": "x", "name": "x"}, 403, "forbidden"},
		{"key", "DELETE", "/v1/workspaces/acme/sites/shop", nil, 403, "forbidden"},
		{"key", "GET", "/v1/workspaces/acme/sites", nil, 403, "forbidden"},
		{"key", "POST", "/v1/workspaces/other/sites", map[string]any{"id": "x", "name": "x"}, 404, "not_found"},
		{"owner", "DELETE", "/v1/workspaces/acme/sites/shop", nil, 204, ""},
		{"owner", "GET", "/v1/sites/shop", nil, 404, "not_found"},
		{"owner", "DELETE", "/v1/workspaces/acme/sites/shop", nil, 404, "not_found"},
	} {
		t.Run(c.who+" "+c.method+" "+c.path, func(t *testing.T) {
			var r response
			if c.who == "key" {
				r = h.q(c.method, c.path, tn.adminKey, c.body)
			} else {
				r = as[c.who].do(c.method, c.path, c.body)
			}
			mustStatus(t, r, c.status, c.code)
			if c.status == 404 && strings.Contains(c.path, "/workspaces/other/") && !bytes.Equal(r.body, unknown.body) {
				t.Errorf("got %s, want the answer of an unknown workspace %s", r.body, unknown.body)
			}
		})
	}
	var actor string
	if err := h.sqlDB().QueryRow(`SELECT COALESCE(actor_id, '') FROM audit_log WHERE action = 'site.create' AND target = 'shop'`).Scan(&actor); err != nil || actor != owner {
		t.Errorf("got site.create by %q (%v), want the owner %s", actor, err, owner)
	}
}
