package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// createKey creates a key in workspace slug with token and answers it
// decoded; sites nil sends no "sites".
func (h *harness) createKey(token, slug string, scopes []string, sites any) (id, plaintext string) {
	h.t.Helper()
	body := map[string]any{"label": "k", "scopes": scopes}
	if sites != nil {
		body["sites"] = sites
	}
	r := h.q("POST", "/v1/workspaces/"+slug+"/keys", token, body)
	mustStatus(h.t, r, 201, "")
	m := r.json(h.t)
	return m["id"].(string), m["plaintext"].(string)
}

// keySites returns the "sites" of key id in the workspace's key list, as
// JSON text ("null" for every site), or "absent" when it is not listed.
func (h *harness) keySites(token, slug, id string) string {
	h.t.Helper()
	r := h.q("GET", "/v1/workspaces/"+slug+"/keys", token, nil)
	mustStatus(h.t, r, 200, "")
	var list struct {
		Keys []struct {
			ID    string          `json:"id"`
			Sites json.RawMessage `json:"sites"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil {
		h.t.Fatal(err)
	}
	for _, k := range list.Keys {
		if k.ID == id {
			return string(k.Sites)
		}
	}
	return "absent"
}

func TestKeySiteRestrictionAtCreation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	h.setupTenant("beta", "beta-web")
	mustStatus(t, h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": "shop", "name": "Shop"}), 201, "")
	tests := []struct {
		name  string
		sites any // "-" for no field
		code  string
		want  string // the sites answered and listed
		inMsg string
	}{
		{"absent is every site", "-", "", "null", ""},
		{"null is every site", nil, "", "null", ""},
		{"one site", []string{"web"}, "", `["web"]`, ""},
		{"duplicates folded, order kept", []string{"shop", "web", "shop"}, "", `["shop","web"]`, ""},
		{"empty array", []string{}, "invalid_sites", "", "non-empty"},
		{"unknown site", []string{"web", "nope"}, "invalid_sites", "", `nope`},
		{"site of another workspace", []string{"beta-web"}, "invalid_sites", "", `beta-web`},
		{"not an array", "web", "invalid_sites", "", "array"},
		{"not strings", []any{1}, "invalid_sites", "", "array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := map[string]any{"label": "k", "scopes": []string{"query:read"}}
			if tt.sites != "-" {
				body["sites"] = tt.sites
			}
			r := h.q("POST", "/v1/workspaces/acme/keys", testAdminToken, body)
			if tt.code != "" {
				mustStatus(t, r, 400, tt.code)
				if msg := string(r.body); !strings.Contains(msg, tt.inMsg) {
					t.Errorf("got %s, want a message containing %s", msg, tt.inMsg)
				}
				return
			}
			mustStatus(t, r, 201, "")
			var created struct {
				ID    string          `json:"id"`
				Sites json.RawMessage `json:"sites"`
			}
			if err := json.Unmarshal(r.body, &created); err != nil {
				t.Fatal(err)
			}
			if string(created.Sites) != tt.want {
				t.Errorf("got sites %s in the create answer, want %s", created.Sites, tt.want)
			}
			if got := h.keySites(testAdminToken, "acme", created.ID); got != tt.want {
				t.Errorf("got sites %s in the key list, want %s", got, tt.want)
			}
			var meta string
			if err := h.sqlDB().QueryRow(`SELECT metadata FROM audit_log WHERE action = 'key.create' AND target = ?`, created.ID).Scan(&meta); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(meta, `"sites":`+tt.want) {
				t.Errorf("got key.create metadata %s, want sites %s", meta, tt.want)
			}
		})
	}
}

// A key restricted to sites reaches, on every route that takes a key, only
// those sites: any other answers exactly as a site of another workspace or
// one that does not exist, and the same request on an allowed site (or by
// an unrestricted key) does not.
func TestSiteRestrictedKeyRouteFamilies(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.RequireAPIKey = KeyModeTag })
	tn := h.setupTenant("acme", "web")
	h.setupTenant("beta", "beta-web")
	mustStatus(t, h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": "shop", "name": "Shop"}), 201, "")
	_, admin := h.createKey(testAdminToken, "acme", []string{"admin"}, []string{"web"})
	_, read := h.createKey(testAdminToken, "acme", []string{"query:read"}, []string{"web"})
	_, ingest := h.createKey(testAdminToken, "acme", []string{"ingest:write"}, []string{"web"})
	unrestricted := map[string]string{admin: tn.adminKey, read: tn.readKey, ingest: tn.ingestKey}

	mapData := base64.StdEncoding.EncodeToString([]byte(`{"version":3,"sources":["a.ts"],"mappings":"AAAA"}`))
	const today = "from=2026-01-31&to=2026-01-31"
	n := 0
	tests := []struct {
		name, api, method, path, key string
		body                         func(site string) any
	}{
		{"pageviews", "q", "GET", "/v1/sites/{s}/pageviews?" + today, read, nil},
		{"event counts", "q", "GET", "/v1/sites/{s}/events?" + today, read, nil},
		{"sessions", "q", "GET", "/v1/sites/{s}/sessions?" + today, read, nil},
		{"timeline", "q", "GET", "/v1/sites/{s}/users/u1/timeline", read, nil},
		{"breakdown", "q", "GET", "/v1/sites/{s}/breakdown?dimension=url&" + today, read, nil},
		{"dlq list", "q", "GET", "/v1/sites/{s}/dlq", admin, nil},
		{"dlq replay", "q", "POST", "/v1/sites/{s}/dlq/" + eventID(999) + "/replay", admin, nil},
		{"gdpr export", "q", "POST", "/v1/sites/{s}/gdpr/export", admin, func(string) any {
			return map[string]any{"subject": map[string]any{"anon_id": "anon-1"}}
		}},
		{"gdpr delete", "q", "POST", "/v1/sites/{s}/gdpr/delete", admin, func(string) any {
			return map[string]any{"subject": map[string]any{"anon_id": "nobody"}}
		}},
		{"webhook secret create", "q", "POST", "/v1/sites/{s}/webhook-secrets", admin, func(string) any { return map[string]any{} }},
		{"webhook secret list", "q", "GET", "/v1/sites/{s}/webhook-secrets", admin, nil},
		{"webhook secret revoke", "q", "DELETE", "/v1/sites/{s}/webhook-secrets/999", admin, nil},
		{"sourcemap delete", "q", "DELETE", "/v1/sites/{s}/sourcemaps?release=none", admin, nil},
		{"sourcemap upload", "q", "POST", "/v1/sites/{s}/sourcemaps", ingest, func(string) any {
			n++
			return map[string]any{"release": fmt.Sprint(n), "file": "a.min.js", "map": mapData}
		}},
		{"browser intake", "c", "POST", "/v1/events", ingest, func(site string) any { n++; return ev(site, n, nil) }},
		{"server intake", "c", "POST", "/v1/s2s/events", ingest, func(site string) any { n++; return ev(site, n, nil) }},
	}
	send := func(api, method, path, key, site string, body func(string) any) response {
		t.Helper()
		var b any
		if body != nil {
			b = body(site)
		}
		path = strings.ReplaceAll(path, "{s}", site)
		headers := []string{"User-Agent", chromeUA, "X-Site-Id", site}
		if api == "c" {
			return h.c(method, path, key, b, headers...)
		}
		return h.q(method, path, key, b, headers...)
	}
	same := func(a, b response) bool { return a.status == b.status && bytes.Equal(a.body, b.body) }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			outside := send(tt.api, tt.method, tt.path, tt.key, "shop", tt.body)
			foreign := send(tt.api, tt.method, tt.path, tt.key, "beta-web", tt.body)
			missing := send(tt.api, tt.method, tt.path, tt.key, "no-such-site", tt.body)
			if outside.status != 404 && outside.status != 401 {
				t.Fatalf("got %d %s outside the key's sites, want 404 or 401", outside.status, outside.body)
			}
			if !same(outside, foreign) || !same(outside, missing) {
				t.Errorf("got %d %s outside the key's sites, want what a foreign site (%d %s) and a missing one (%d %s) get",
					outside.status, outside.body, foreign.status, foreign.body, missing.status, missing.body)
			}
			allowed := send(tt.api, tt.method, tt.path, tt.key, "web", tt.body)
			if same(allowed, outside) {
				t.Errorf("got %d %s on the key's own site, the answer of a site it cannot reach", allowed.status, allowed.body)
			}
			other := send(tt.api, tt.method, tt.path, unrestricted[tt.key], "shop", tt.body)
			if other.status != allowed.status {
				t.Errorf("got %d %s for an unrestricted key on shop, want %d as the restricted key on its own site", other.status, other.body, allowed.status)
			}
		})
	}
	if got := h.count(`SELECT COUNT(*) FROM events e JOIN event_credentials c USING (seq) WHERE e.site_id = 'shop' AND c.credential = ?`, "key:"+idOfPlaintext(t, h, ingest)); got != 0 {
		t.Errorf("got %d events of shop stored with the restricted key, want 0", got)
	}
}

// idOfPlaintext returns the id of the active key with that plaintext.
func idOfPlaintext(t *testing.T, h *harness, plaintext string) string {
	t.Helper()
	k, ok, _ := h.db.Authenticate(plaintext)
	if !ok {
		t.Fatal("key not active")
	}
	return k.ID
}

// What a site-restricted admin key may do at the workspace level: manage
// keys within its own sites only, never read the audit log (it covers
// every site) and, like every key, not manage the workspace or its sites.
func TestSiteRestrictedAdminKeyInItsWorkspace(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	mustStatus(t, h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": "shop", "name": "Shop"}), 201, "")
	_, admin := h.createKey(testAdminToken, "acme", []string{"admin"}, []string{"web"})
	webKey, _ := h.createKey(testAdminToken, "acme", []string{"query:read"}, []string{"web"})
	bothKey, _ := h.createKey(testAdminToken, "acme", []string{"query:read"}, []string{"web", "shop"})
	shopKey, _ := h.createKey(testAdminToken, "acme", []string{"query:read"}, []string{"shop"})

	tests := []struct {
		name, method, path string
		body               any
		status             int
		code               string
	}{
		{"create without sites", "POST", "/workspaces/acme/keys", map[string]any{"label": "k", "scopes": []string{"admin"}}, 403, "forbidden"},
		{"create with sites null", "POST", "/workspaces/acme/keys", map[string]any{"label": "k", "scopes": []string{"admin"}, "sites": nil}, 403, "forbidden"},
		{"create for another site", "POST", "/workspaces/acme/keys", map[string]any{"label": "k", "scopes": []string{"admin"}, "sites": []string{"shop"}}, 400, "invalid_sites"},
		{"create for its site and another", "POST", "/workspaces/acme/keys", map[string]any{"label": "k", "scopes": []string{"admin"}, "sites": []string{"web", "shop"}}, 400, "invalid_sites"},
		{"create for its own site", "POST", "/workspaces/acme/keys", map[string]any{"label": "k", "scopes": []string{"admin"}, "sites": []string{"web"}}, 201, ""},
		{"revoke an unrestricted key", "DELETE", "/workspaces/acme/keys/" + tn.adminKID, nil, 404, "not_found"},
		{"revoke a key of its site and another", "DELETE", "/workspaces/acme/keys/" + bothKey, nil, 404, "not_found"},
		{"revoke a key of another site", "DELETE", "/workspaces/acme/keys/" + shopKey, nil, 404, "not_found"},
		{"revoke a key of its site", "DELETE", "/workspaces/acme/keys/" + webKey, nil, 204, ""},
		{"audit log", "GET", "/workspaces/acme/audit", nil, 403, "forbidden"},
		{"get workspace", "GET", "/workspaces/acme", nil, 403, "forbidden"},
		{"rename workspace", "PATCH", "/workspaces/acme", map[string]any{"name": "x"}, 403, "forbidden"},
		{"list sites", "GET", "/workspaces/acme/sites", nil, 403, "forbidden"},
		{"create site", "POST", "/workspaces/acme/sites", map[string]any{"id": "blog", "name": "Blog"}, 403, "forbidden"},
		{"delete its site", "DELETE", "/workspaces/acme/sites/web", nil, 403, "forbidden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mustStatus(t, h.q(tt.method, "/v1"+tt.path, admin, tt.body), tt.status, tt.code)
		})
	}
	// The unknown-site answer does not tell a site outside the key's
	// restriction from one that does not exist.
	a := h.q("POST", "/v1/workspaces/acme/keys", admin, map[string]any{"label": "k", "scopes": []string{"admin"}, "sites": []string{"shop"}})
	b := h.q("POST", "/v1/workspaces/acme/keys", testAdminToken, map[string]any{"label": "k", "scopes": []string{"admin"}, "sites": []string{"nope"}})
	if strings.ReplaceAll(string(a.body), "shop", "X") != strings.ReplaceAll(string(b.body), "nope", "X") {
		t.Errorf("got %s for a site outside the restriction, want the answer to a missing site (%s)", a.body, b.body)
	}

	r := h.q("GET", "/v1/workspaces/acme/keys", admin, nil)
	mustStatus(t, r, 200, "")
	var list struct {
		Keys []struct {
			ID    string   `json:"id"`
			Sites []string `json:"sites"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatal(err)
	}
	for _, k := range list.Keys {
		if k.Sites == nil || slices.Contains(k.Sites, "shop") {
			t.Errorf("got key %s (sites %v) in the list of a key restricted to web, want only keys within web", k.ID, k.Sites)
		}
	}
	if len(list.Keys) != 3 { // itself, the one it created, the revoked web key
		t.Errorf("got %d keys listed, want 3: %s", len(list.Keys), r.body)
	}
	if got := h.keySites(testAdminToken, "acme", tn.adminKID); got != "null" {
		t.Errorf("got %s for the unrestricted admin key in the admin token's list, want null (listed)", got)
	}
}

// A deleted site leaves every restriction, in memory and in the database:
// a key restricted only to deleted sites can do nothing, not even reach a
// new site created under the same id.
func TestDeletedSiteLeavesKeyRestrictions(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/k.db"
	h := newHarnessAt(t, path, func(c *Config) { c.RequireAPIKey = KeyModeTag })
	h.setupTenant("acme", "web")
	mustStatus(t, h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": "shop", "name": "Shop"}), 201, "")
	bothID, both := h.createKey(testAdminToken, "acme", []string{"admin"}, []string{"shop", "web"})
	shopID, shop := h.createKey(testAdminToken, "acme", []string{"admin"}, []string{"shop"})

	mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/sites/shop", testAdminToken, nil), 204, "")
	mustStatus(t, h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": "shop", "name": "Shop again"}), 201, "")

	check := func(t *testing.T, h *harness) {
		if got := h.keySites(testAdminToken, "acme", bothID); got != `["web"]` {
			t.Errorf("got sites %s after deleting shop, want [\"web\"]", got)
		}
		if got := h.keySites(testAdminToken, "acme", shopID); got != `[]` {
			t.Errorf("got sites %s after deleting its only site, want []", got)
		}
		mustStatus(t, h.q("GET", "/v1/sites/web/dlq", both, nil), 200, "")
		for _, site := range []string{"shop", "web"} {
			mustStatus(t, h.q("GET", "/v1/sites/"+site+"/dlq", shop, nil), 404, "not_found")
			mustStatus(t, h.c("POST", "/v1/events", shop, ev(site, 1, nil), "X-Site-Id", site, "User-Agent", chromeUA), 401, "unauthorized")
		}
		mustStatus(t, h.q("GET", "/v1/sites/shop/dlq", both, nil), 404, "not_found")
		mustStatus(t, h.q("GET", "/v1/workspaces/acme/keys", shop, nil), 403, "forbidden")
		mustStatus(t, h.q("POST", "/v1/workspaces/acme/keys", shop, map[string]any{"label": "k", "scopes": []string{"admin"}, "sites": []string{"web"}}), 403, "forbidden")
	}
	t.Run("live", func(t *testing.T) { check(t, h) })
	h.stop()
	h2 := newHarnessAt(t, path, func(c *Config) { c.RequireAPIKey = KeyModeTag })
	t.Run("after restart", func(t *testing.T) { check(t, h2) })
}

// A site deleted while a key naming it is created is refused in the
// writer, so no key ends up restricted to a site that is gone (and so to
// whatever site later takes its id).
func TestKeyCreationRacingSiteDeletion(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	mustStatus(t, h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": "shop", "name": "Shop"}), 201, "")
	ws, _ := h.db.Workspace("acme")
	// CreateKeyForSites reads the clock after checking the sites, before
	// its writer job: the site goes in between.
	_, _, err := h.db.CreateKeyForSites(t.Context(), storage.Actor{Kind: storage.ActorAdmin}, ws, "k", []string{"admin"}, []string{"shop"})
	if err != nil {
		t.Fatal(err)
	}
	h.clock.OnNextRead(func() {
		if err := h.db.DeleteSite(t.Context(), storage.Actor{Kind: storage.ActorAdmin}, ws, "shop"); err != nil {
			t.Error(err)
		}
	})
	_, _, err = h.db.CreateKeyForSites(t.Context(), storage.Actor{Kind: storage.ActorAdmin}, ws, "k2", []string{"admin"}, []string{"shop"})
	if code := fault.Code(err); code != "invalid_sites" {
		t.Fatalf("got %v creating a key for a site deleted meanwhile, want invalid_sites", err)
	}
	if n := h.count(`SELECT COUNT(*) FROM api_keys WHERE label = 'k2'`); n != 0 {
		t.Errorf("got %d keys stored for the deleted site, want 0", n)
	}
	if n := h.count(`SELECT COUNT(*) FROM api_keys WHERE label = 'k' AND sites = '[]'`); n != 1 {
		t.Errorf("got %d keys created before the deletion left with no site, want 1", n)
	}
}
