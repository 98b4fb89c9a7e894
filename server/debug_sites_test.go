package server

import (
	"encoding/json"
	"regexp"
	"testing"
)

// newThrowAwaySite posts body (nil for none) to /v1/debug/sites and
// decodes the 201.
func (h *harness) newThrowAwaySite(body any) throwAwaySite {
	h.t.Helper()
	r := h.q("POST", "/v1/debug/sites", "", body, "Content-Type", "application/json")
	mustStatus(h.t, r, 201, "")
	var s throwAwaySite
	if err := json.Unmarshal(r.body, &s); err != nil {
		h.t.Fatal(err)
	}
	return s
}

// A throw-away site is a site of the dev workspace with an ingest and a
// query key: it takes events by its bearer and its key, reads them with
// its query key, and DELETE removes it with its data and its keys.
func TestThrowAwaySiteLifecycle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.DebugFeedSize = 100; c.RequireAPIKey = KeyModeTag })
	s := h.newThrowAwaySite(nil)
	if !regexp.MustCompile(`^t-[0-9a-f]{12}$`).MatchString(s.SiteID) || s.Workspace != "dev" || s.Keys.Ingest == "" || s.Keys.Query == "" {
		t.Fatalf("got %+v, want a generated t- id in workspace dev with both keys", s)
	}
	named := h.newThrowAwaySite(map[string]any{"id": "checkout-test"})
	if named.SiteID != "checkout-test" {
		t.Fatalf("got site %q, want checkout-test", named.SiteID)
	}
	intake(t, h.c("POST", "/v1/events", s.SiteID, ev(s.SiteID, 1, nil)))
	intake(t, h.c("POST", "/v1/events", s.Keys.Ingest, ev(s.SiteID, 2, nil), "X-Site-Id", s.SiteID))
	intake(t, h.c("POST", "/v1/events", named.SiteID, ev(named.SiteID, 1, nil)))
	// Its keys are restricted to it: not another site of the workspace.
	mustStatus(t, h.c("POST", "/v1/events", s.Keys.Ingest, ev(named.SiteID, 5, nil), "X-Site-Id", named.SiteID), 401, "unauthorized")
	mustStatus(t, h.q("GET", "/v1/sites/"+named.SiteID+"/events?from=2026-01-01&to=2026-12-31", s.Keys.Query, nil), 404, "not_found")
	r := h.q("GET", "/v1/sites/"+s.SiteID+"/events?from=2026-01-01&to=2026-12-31", s.Keys.Query, nil)
	mustStatus(t, r, 200, "")
	var counts eventCountsBody
	if err := json.Unmarshal(r.body, &counts); err != nil || len(counts.ByName) != 1 || counts.ByName[0].Count != 2 {
		t.Fatalf("got %s, want 2 pageviews", r.body)
	}
	h.injectFault(map[string]any{"status": 503, "site_id": s.SiteID})

	mustStatus(t, h.q("DELETE", "/v1/debug/sites/"+s.SiteID, "", nil), 204, "")
	if got := h.count(`SELECT COUNT(*) FROM events WHERE site_id = ?`, s.SiteID); got != 0 {
		t.Fatalf("got %d events of the deleted site, want 0", got)
	}
	if got := h.count(`SELECT COUNT(*) FROM api_keys WHERE label LIKE ? AND revoked_at IS NULL`, "%"+s.SiteID+"%"); got != 0 {
		t.Fatalf("got %d live keys of the deleted site, want 0", got)
	}
	if got := h.pendingFaults(""); len(got) != 0 {
		t.Fatalf("got pending %+v, want the deleted site's fault gone", got)
	}
	mustStatus(t, h.c("POST", "/v1/events", s.SiteID, ev(s.SiteID, 3, nil)), 401, "unauthorized")
	// Its ingest key would otherwise still write to every site of the
	// workspace.
	mustStatus(t, h.c("POST", "/v1/events", s.Keys.Ingest, ev(named.SiteID, 2, nil), "X-Site-Id", named.SiteID), 401, "unauthorized")
	mustStatus(t, h.q("DELETE", "/v1/debug/sites/"+s.SiteID, "", nil), 404, "not_found")
	if got := h.count(`SELECT COUNT(*) FROM events WHERE site_id = ?`, named.SiteID); got != 1 {
		t.Fatalf("got %d events of the other throw-away site, want 1", got)
	}
	audit := h.count(`SELECT COUNT(*) FROM audit_log WHERE action IN ('site.create', 'site.delete', 'key.create', 'key.revoke') AND target IN (?, ?)`, s.SiteID, named.SiteID)
	if audit < 3 {
		t.Fatalf("got %d audit rows naming the sites, want at least 3 (two creations, one deletion)", audit)
	}
}

// The DELETE takes no credential, so it removes only sites POST made: not
// the seeded site, not another workspace's, not one of the dev workspace
// made through the admin API.
func TestThrowAwaySiteDeleteOnlyThrowAway(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.DebugFeedSize = 100 })
	h.setupTenant("acme", "web")
	h.newThrowAwaySite(nil) // makes workspace dev
	mustStatus(t, h.q("POST", "/v1/workspaces/dev/sites", testAdminToken, map[string]any{"id": "hand-made", "name": "mine"}), 201, "")
	for _, id := range []string{"web", "hand-made", "nope"} {
		mustStatus(t, h.q("DELETE", "/v1/debug/sites/"+id, "", nil), 404, "not_found")
	}
	if got := h.count(`SELECT COUNT(*) FROM sites WHERE id IN ('web', 'hand-made')`); got != 2 {
		t.Fatalf("got %d of the two sites, want both kept", got)
	}
}

// POST checks the id as site creation does, and is guarded as the reset
// is; the DELETE refuses foreign origins and hosts.
func TestThrowAwaySiteValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.DebugFeedSize = 100 })
	s := h.newThrowAwaySite(`{"id":"taken"}`)
	for _, tt := range []struct {
		name    string
		body    any
		headers []string
		status  int
		code    string
	}{
		{"taken id", `{"id":"taken"}`, nil, 409, "site_id_taken"},
		{"bad id", `{"id":"a b"}`, nil, 400, "invalid_site_id"},
		{"id a number", `{"id":7}`, nil, 400, "invalid_site_id"},
		{"unknown field", `{"name":"x"}`, nil, 400, "invalid_site_id"},
		{"not an object", `["x"]`, nil, 400, "invalid_json"},
		{"no content type", nil, nil, 415, "unsupported_media_type"},
		{"foreign Origin", `{}`, []string{"Origin", "https://evil.example"}, 403, "forbidden"},
		{"foreign host", `{}`, []string{"Host", "evil.example"}, 403, "forbidden"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mustStatus(t, h.q("POST", "/v1/debug/sites", "", tt.body, tt.headers...), tt.status, tt.code)
			if got := h.count(`SELECT COUNT(*) FROM sites`); got != 1 {
				t.Fatalf("got %d sites, want only the first", got)
			}
		})
	}
	mustStatus(t, h.q("DELETE", "/v1/debug/sites/"+s.SiteID, "", nil, "Origin", "https://evil.example"), 403, "forbidden")
	mustStatus(t, h.q("DELETE", "/v1/debug/sites/"+s.SiteID, "", nil, "Host", "evil.example"), 403, "forbidden")
	if got := h.count(`SELECT COUNT(*) FROM sites`); got != 1 {
		t.Fatalf("got %d sites after refused deletes, want 1", got)
	}
}
