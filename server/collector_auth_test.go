package server

import (
	"testing"
)

// Site ids that look like other credentials are still site ids: the
// internal bearer's shape cannot be a site id, and a bearer that is not an
// active key is tried as a site.
func TestCollectorSiteIDsShapedLikeCredentials(t *testing.T) {
	t.Parallel()
	sites := []string{
		"internal_shop",
		"internal_",
		"sk_shop",
		"sk_acme_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", // the shape of a key of workspace acme
	}
	for _, mode := range []string{KeyModeNone, KeyModeTag, KeyModeRequire} {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.RequireAPIKey = mode })
			tn := h.setupTenant("acme", "acme-web")
			for _, site := range sites {
				mustStatus(t, h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": site, "name": site}), 201, "")
			}
			siteStatus := map[string]int{KeyModeNone: 202, KeyModeTag: 202, KeyModeRequire: 401}[mode]
			keyStatus := map[string]int{KeyModeNone: 401, KeyModeTag: 202, KeyModeRequire: 202}[mode]
			for i, site := range sites {
				t.Run(site, func(t *testing.T) {
					r := h.c("POST", "/v1/events", site, ev(site, 2*i, nil), "User-Agent", chromeUA)
					mustStatus(t, r, siteStatus, map[int]string{202: "", 401: "unauthorized"}[siteStatus])
					r = h.c("POST", "/v1/events", tn.ingestKey, ev(site, 2*i+1, nil), "X-Site-Id", site, "User-Agent", chromeUA)
					mustStatus(t, r, keyStatus, map[int]string{202: "", 401: "unauthorized"}[keyStatus])
				})
			}
			wantSite := map[string]int{KeyModeNone: len(sites), KeyModeTag: len(sites), KeyModeRequire: 0}[mode]
			if n := h.count(`SELECT COUNT(*) FROM event_credentials WHERE credential = 'site'`); n != wantSite {
				t.Errorf("got %d events stored with the site bearer, want %d", n, wantSite)
			}
		})
	}
}

// The internal bearer still works in every mode, and a guess at it (old
// or new shape) is refused.
func TestCollectorInternalBearer(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{KeyModeNone, KeyModeTag, KeyModeRequire} {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.RequireAPIKey = mode })
			h.setupTenant("acme", "internal_shop")
			tests := []struct {
				name   string
				token  string
				status int
			}{
				{"this process's bearer", h.srv.internal.token, 202},
				{"a guessed bearer", internalPrefix + "00", 401},
				{"the bearer without its prefix", h.srv.internal.token[len(internalPrefix):], 401},
			}
			for i, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					r := h.c("POST", "/v1/events", tt.token, ev("internal_shop", i, nil), "X-Site-Id", "internal_shop", "User-Agent", chromeUA)
					mustStatus(t, r, tt.status, map[int]string{202: "", 401: "unauthorized"}[tt.status])
				})
			}
			if n := h.count(`SELECT COUNT(*) FROM event_credentials WHERE credential = 'internal'`); n != 1 {
				t.Errorf("got %d events stored with the internal bearer, want 1", n)
			}
		})
	}
}
