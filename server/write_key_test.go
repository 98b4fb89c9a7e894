package server

import (
	"strings"
	"testing"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// Every kind of write key in every REQUIRE_API_KEY mode, against a real
// database: what it resolves to, or the fault and a message that says
// what a write key must be.
func TestWriteKeyCredential(t *testing.T) {
	t.Parallel()
	type want struct {
		site, credential string // credential "key" stands for "key:<its id>"
		code, inMsg      string
	}
	ok := func(site, credential string) want { return want{site: site, credential: credential} }
	unauthorized := func(inMsg string) want { return want{code: fault.Unauthorized, inMsg: inMsg} }
	forbidden := func(inMsg string) want { return want{code: fault.Forbidden, inMsg: inMsg} }
	tests := []struct {
		kind                string
		none, tag, required want
	}{
		{"empty", unauthorized("missing write key"), unauthorized("missing write key"), unauthorized("missing write key")},
		{"site id", ok("web", "site"), ok("web", "site"), unauthorized("REQUIRE_API_KEY=require")},
		{"site id shaped like a key", ok("sk_shop", "site"), ok("sk_shop", "site"), unauthorized("REQUIRE_API_KEY=require")},
		{"unknown site id", unauthorized("site id"), unauthorized("site id"), unauthorized("REQUIRE_API_KEY=require")},
		{"site id of another workspace", ok("beta-web", "site"), ok("beta-web", "site"), unauthorized("REQUIRE_API_KEY=require")},
		{"key restricted to one site with ingest:write", unauthorized("site id"), ok("web", "key"), ok("web", "key")},
		{"admin key restricted to one site", unauthorized("site id"), ok("web", "key"), ok("web", "key")},
		{"key restricted to one site without ingest:write", unauthorized("site id"), forbidden("ingest:write"), forbidden("ingest:write")},
		{"unrestricted key", unauthorized("site id"), forbidden("restricted to exactly one site"), forbidden("restricted to exactly one site")},
		{"key restricted to two sites", unauthorized("site id"), forbidden("restricted to exactly one site"), forbidden("restricted to exactly one site")},
		{"key restricted to two sites, one deleted", unauthorized("site id"), ok("web", "key"), ok("web", "key")},
		{"key whose only site was deleted", unauthorized("site id"), unauthorized("deleted"), unauthorized("deleted")},
		{"revoked key", unauthorized("site id"), unauthorized("revoked"), unauthorized("REQUIRE_API_KEY=require")},
		{"unknown key", unauthorized("site id"), unauthorized("revoked"), unauthorized("REQUIRE_API_KEY=require")},
	}
	for _, mode := range []string{KeyModeNone, KeyModeTag, KeyModeRequire} {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.RequireAPIKey = mode })
			h.setupTenant("acme", "web")
			h.setupTenant("beta", "beta-web")
			for _, id := range []string{"shop", "gone", "gone2", "sk_shop"} {
				mustStatus(t, h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": id, "name": id}), 201, "")
			}
			keys := map[string]string{"empty": "", "site id": "web", "site id shaped like a key": "sk_shop",
				"unknown site id": "nope", "site id of another workspace": "beta-web",
				"unknown key": "sk_acme_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}
			ids := map[string]string{}
			for kind, k := range map[string]struct {
				scopes, sites []string
			}{
				"key restricted to one site with ingest:write":    {[]string{"ingest:write"}, []string{"web"}},
				"admin key restricted to one site":                {[]string{"admin"}, []string{"web"}},
				"key restricted to one site without ingest:write": {[]string{"query:read"}, []string{"web"}},
				"unrestricted key":                                {[]string{"ingest:write"}, nil},
				"key restricted to two sites":                     {[]string{"ingest:write"}, []string{"web", "shop"}},
				"key restricted to two sites, one deleted":        {[]string{"ingest:write"}, []string{"gone", "web"}},
				"key whose only site was deleted":                 {[]string{"ingest:write"}, []string{"gone2"}},
				"revoked key":                                     {[]string{"ingest:write"}, []string{"web"}},
			} {
				var sites any
				if k.sites != nil {
					sites = k.sites
				}
				ids[kind], keys[kind] = h.createKey(testAdminToken, "acme", k.scopes, sites)
			}
			mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/keys/"+ids["revoked key"], testAdminToken, nil), 204, "")
			for _, site := range []string{"gone", "gone2"} {
				mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/sites/"+site, testAdminToken, nil), 204, "")
			}

			for _, tt := range tests {
				t.Run(tt.kind, func(t *testing.T) {
					w := map[string]want{KeyModeNone: tt.none, KeyModeTag: tt.tag, KeyModeRequire: tt.required}[mode]
					site, credential, err := h.srv.writeKeyCredential(keys[tt.kind])
					if w.code != "" {
						if fault.Code(err) != w.code || !strings.Contains(err.Error(), w.inMsg) {
							t.Fatalf("got %v (%s), want %s with a message containing %q", err, fault.Code(err), w.code, w.inMsg)
						}
						if site != nil || credential != "" {
							t.Errorf("got site %v and credential %q with the fault, want none", site, credential)
						}
						return
					}
					if err != nil {
						t.Fatalf("got %v, want site %s", err, w.site)
					}
					if w.credential == "key" {
						w.credential = "key:" + ids[tt.kind]
					}
					if site.ID != w.site || credential != w.credential {
						t.Errorf("got site %s, credential %q, want %s, %q", site.ID, credential, w.site, w.credential)
					}
				})
			}
		})
	}
}

// A write key's use shows in the key list, as any other use of the key.
func TestWriteKeyUseIsRecorded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.RequireAPIKey = KeyModeRequire })
	h.setupTenant("acme", "web")
	id, plaintext := h.createKey(testAdminToken, "acme", []string{storage.ScopeIngestWrite}, []string{"web"})
	if _, _, err := h.srv.writeKeyCredential(plaintext); err != nil {
		t.Fatal(err)
	}
	list, err := h.db.Keys(t.Context(), h.wsID("acme"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range list {
		if k.ID == id && k.LastUsedAt == nil {
			t.Errorf("got no last_used_at for the write key, want its use")
		}
	}
}

// wsID returns the id of workspace slug.
func (h *harness) wsID(slug string) string {
	h.t.Helper()
	ws, ok := h.db.Workspace(slug)
	if !ok {
		h.t.Fatalf("no workspace %s", slug)
	}
	return ws.ID
}
