package server

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestWorkspaceSiteKeyRules(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "acme-web")
	long := strings.Repeat("x", 129)
	tests := []struct {
		name   string
		method string
		path   string
		body   any
		status int
		code   string
	}{
		{"workspace name trimmed to empty", "POST", "/workspaces", map[string]any{"name": "   ", "slug": "a1"}, 400, "invalid_name"},
		{"workspace name too long", "POST", "/workspaces", map[string]any{"name": long, "slug": "a1"}, 400, "invalid_name"},
		{"workspace name of 128 multibyte chars", "POST", "/workspaces", map[string]any{"name": strings.Repeat("é", 128), "slug": "multi"}, 201, ""},
		{"workspace name missing", "POST", "/workspaces", map[string]any{"slug": "a1"}, 400, "invalid_name"},
		{"workspace name not a string", "POST", "/workspaces", map[string]any{"name": 5, "slug": "a1"}, 400, "invalid_name"},
		{"slug with capital", "POST", "/workspaces", map[string]any{"name": "A", "slug": "Abc"}, 400, "invalid_slug"},
		{"slug starting with digit", "POST", "/workspaces", map[string]any{"name": "A", "slug": "1abc"}, 400, "invalid_slug"},
		{"slug of 65 chars", "POST", "/workspaces", map[string]any{"name": "A", "slug": "a" + strings.Repeat("b", 64)}, 400, "invalid_slug"},
		{"slug of 64 chars", "POST", "/workspaces", map[string]any{"name": "A", "slug": "a" + strings.Repeat("b", 63)}, 201, ""},
		{"slug missing", "POST", "/workspaces", map[string]any{"name": "A"}, 400, "invalid_slug"},
		{"duplicate slug", "POST", "/workspaces", map[string]any{"name": "A", "slug": "acme"}, 409, "slug_taken"},
		{"malformed json", "POST", "/workspaces", `{"name":`, 400, "invalid_json"},
		{"json array body", "POST", "/workspaces", `[1,2]`, 400, "invalid_json"},
		{"json null body", "POST", "/workspaces", `null`, 400, "invalid_json"},
		{"empty body", "POST", "/workspaces", ``, 400, "invalid_json"},
		{"body over the cap", "POST", "/workspaces", `{"name":"` + strings.Repeat("a", 70<<10) + `"}`, 413, "payload_too_large"},
		{"patch renames", "PATCH", "/workspaces/acme", map[string]any{"name": "  Acme Inc  "}, 200, ""},
		{"patch with slug", "PATCH", "/workspaces/acme", map[string]any{"name": "x", "slug": "acme2"}, 400, "slug_immutable"},
		{"patch with same slug", "PATCH", "/workspaces/acme", map[string]any{"slug": "acme"}, 400, "slug_immutable"},
		{"patch empty name", "PATCH", "/workspaces/acme", map[string]any{"name": ""}, 400, "invalid_name"},
		{"patch unknown workspace", "PATCH", "/workspaces/nope", map[string]any{"name": "x"}, 404, "not_found"},
		{"get unknown workspace", "GET", "/workspaces/nope", nil, 404, "not_found"},
		{"site id with dot", "POST", "/workspaces/acme/sites", map[string]any{"id": "a.b", "name": "x"}, 400, "invalid_site_id"},
		{"site id of 65 chars", "POST", "/workspaces/acme/sites", map[string]any{"id": strings.Repeat("s", 65), "name": "x"}, 400, "invalid_site_id"},
		{"site id empty", "POST", "/workspaces/acme/sites", map[string]any{"id": "", "name": "x"}, 400, "invalid_site_id"},
		{"site name empty", "POST", "/workspaces/acme/sites", map[string]any{"id": "ok", "name": " "}, 400, "invalid_name"},
		{"duplicate site id", "POST", "/workspaces/acme/sites", map[string]any{"id": "acme-web", "name": "x"}, 409, "site_id_taken"},
		{"site in unknown workspace", "POST", "/workspaces/nope/sites", map[string]any{"id": "zz", "name": "x"}, 404, "not_found"},
		{"delete unknown site", "DELETE", "/workspaces/acme/sites/nope", nil, 404, "not_found"},
		{"key label empty", "POST", "/workspaces/acme/keys", map[string]any{"label": " ", "scopes": []string{"admin"}}, 400, "invalid_label"},
		{"key label too long", "POST", "/workspaces/acme/keys", map[string]any{"label": long, "scopes": []string{"admin"}}, 400, "invalid_label"},
		{"key label missing", "POST", "/workspaces/acme/keys", map[string]any{"scopes": []string{"admin"}}, 400, "invalid_label"},
		{"key scopes empty", "POST", "/workspaces/acme/keys", map[string]any{"label": "k", "scopes": []string{}}, 400, "invalid_scopes"},
		{"key scopes unknown", "POST", "/workspaces/acme/keys", map[string]any{"label": "k", "scopes": []string{"write"}}, 400, "invalid_scopes"},
		{"key scopes not an array", "POST", "/workspaces/acme/keys", map[string]any{"label": "k", "scopes": "admin"}, 400, "invalid_scopes"},
		{"key scopes missing", "POST", "/workspaces/acme/keys", map[string]any{"label": "k"}, 400, "invalid_scopes"},
		{"revoke unknown key", "DELETE", "/workspaces/acme/keys/00000000-0000-0000-0000-000000000000", nil, 404, "not_found"},
		{"audit limit 0", "GET", "/workspaces/acme/audit?limit=0", nil, 400, "invalid_limit"},
		{"audit limit 1001", "GET", "/workspaces/acme/audit?limit=1001", nil, 400, "invalid_limit"},
		{"audit limit not a number", "GET", "/workspaces/acme/audit?limit=ten", nil, 400, "invalid_limit"},
		{"audit cursor malformed", "GET", "/workspaces/acme/audit?cursor=yesterday", nil, 400, "invalid_cursor"},
		{"audit limit 1000", "GET", "/workspaces/acme/audit?limit=1000", nil, 200, ""},
		{"unknown route", "GET", "/nothing/here", nil, 404, "not_found"},
		{"wrong method", "PUT", "/workspaces", nil, 405, "method_not_allowed"},
	}
	for _, tt := range tests {
		for _, prefix := range []string{"", "/v1"} {
			t.Run(tt.name+prefix, func(t *testing.T) {
				r := h.q(tt.method, prefix+tt.path, testAdminToken, tt.body)
				mustStatus(t, r, tt.status, tt.code)
				if tt.status >= 400 {
					if ct := r.header.Get("Content-Type"); ct != "application/json" {
						t.Errorf("got Content-Type %q, want application/json", ct)
					}
					if msg, _ := r.json(t)["error"].(map[string]any)["message"].(string); msg == "" {
						t.Errorf("error envelope has no message: %s", r.body)
					}
				}
			})
			if tt.method == "POST" && tt.status == 201 {
				break // a second create would conflict
			}
		}
	}
	_ = tn
}

func TestNamesAndLabelsStoredTrimmed(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.q("POST", "/v1/workspaces", testAdminToken, map[string]any{"name": "  Acme  ", "slug": "acme"})
	mustStatus(t, r, 201, "")
	ws := r.json(t)
	if ws["name"] != "Acme" || ws["slug"] != "acme" || ws["id"] == "" {
		t.Fatalf("got %v, want trimmed name Acme", ws)
	}
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`).MatchString(ws["created_at"].(string)) {
		t.Errorf("got created_at %q, want UTC with 3 fraction digits", ws["created_at"])
	}
	r = h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": "web", "name": " Web "})
	mustStatus(t, r, 201, "")
	site := r.json(t)
	if site["name"] != "Web" || site["id"] != "web" || site["workspace_id"] != ws["id"] || site["created_at"] == nil {
		t.Fatalf("got site %v", site)
	}
	r = h.q("POST", "/v1/workspaces/acme/keys", testAdminToken, map[string]any{"label": " ci ", "scopes": []string{"query:read", "admin", "query:read"}})
	mustStatus(t, r, 201, "")
	key := r.json(t)
	if key["label"] != "ci" || fmt.Sprint(key["scopes"]) != "[query:read admin]" {
		t.Fatalf("got label %v scopes %v, want ci [query:read admin]", key["label"], key["scopes"])
	}
	lists := map[string]string{"/v1/workspaces": "workspaces", "/v1/workspaces/acme/sites": "sites", "/v1/workspaces/acme/keys": "keys"}
	for path, field := range lists {
		r := h.q("GET", path, testAdminToken, nil)
		mustStatus(t, r, 200, "")
		if n := len(r.json(t)[field].([]any)); n != 1 {
			t.Errorf("%s: got %d %s, want 1", path, n, field)
		}
	}
	r = h.q("GET", "/v1/workspaces/acme", testAdminToken, nil)
	mustStatus(t, r, 200, "")
	if r.json(t)["name"] != "Acme" {
		t.Errorf("got %s", r.body)
	}
	r = h.q("PATCH", "/v1/workspaces/acme", testAdminToken, map[string]any{"name": " New "})
	mustStatus(t, r, 200, "")
	if got := r.json(t); got["name"] != "New" || got["slug"] != "acme" || got["id"] != ws["id"] {
		t.Errorf("got %v after PATCH", got)
	}
	if got := h.q("GET", "/workspaces/acme", testAdminToken, nil).json(t)["name"]; got != "New" {
		t.Errorf("got name %v after PATCH, want New", got)
	}
}

func TestKeyLifecycle(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	r := h.q("POST", "/v1/workspaces/acme/keys", testAdminToken, map[string]any{"label": "deploy", "scopes": []string{"admin"}})
	mustStatus(t, r, 201, "")
	key := r.json(t)
	plaintext := key["plaintext"].(string)
	if !regexp.MustCompile(`^sk_acme_[A-Za-z0-9_-]{32}$`).MatchString(plaintext) {
		t.Fatalf("got plaintext %q, want sk_acme_<32 base64url chars>", plaintext)
	}
	if key["warning"] == "" || key["workspace_id"] == "" || key["created_at"] == "" {
		t.Errorf("create response misses fields: %v", key)
	}

	// The plaintext is stored nowhere: not in api_keys, not in the audit log.
	op := h.sqlDB()
	var hits int
	if err := op.QueryRow(`SELECT COUNT(*) FROM api_keys WHERE key_hash = ? OR label = ? OR scopes LIKE ?`, plaintext, plaintext, "%"+plaintext+"%").Scan(&hits); err != nil {
		t.Fatal(err)
	}
	if err := op.QueryRow(`SELECT COUNT(*) + ? FROM audit_log WHERE metadata LIKE ?`, hits, "%"+plaintext[8:]+"%").Scan(&hits); err != nil {
		t.Fatal(err)
	}
	if hits != 0 {
		t.Fatalf("plaintext found in %d stored rows", hits)
	}
	list := h.q("GET", "/v1/workspaces/acme/keys", plaintext, nil)
	mustStatus(t, list, 200, "")
	if strings.Contains(string(list.body), plaintext) || strings.Contains(string(list.body), "plaintext") {
		t.Fatalf("key list shows a plaintext: %s", list.body)
	}

	id := key["id"].(string)
	mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/keys/"+id, testAdminToken, nil), 204, "")
	mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/keys/"+id, testAdminToken, nil), 404, "not_found")
	mustStatus(t, h.q("DELETE", "/workspaces/acme/keys/"+id, testAdminToken, nil), 404, "not_found")
	mustStatus(t, h.q("GET", "/v1/workspaces/acme/keys", plaintext, nil), 401, "unauthorized")

	for _, k := range h.q("GET", "/v1/workspaces/acme/keys", testAdminToken, nil).json(t)["keys"].([]any) {
		k := k.(map[string]any)
		if k["id"] == id && k["revoked_at"] == nil {
			t.Errorf("revoked key lists revoked_at null")
		}
		if _, ok := k["last_used_at"]; !ok {
			t.Errorf("key %v lacks last_used_at", k["id"])
		}
	}
	// A restart keeps the revocation: keys are reloaded from the database.
	var revoked int
	if err := op.QueryRow(`SELECT COUNT(*) FROM api_keys WHERE id = ? AND revoked_at IS NOT NULL`, id).Scan(&revoked); err != nil || revoked != 1 {
		t.Fatalf("got revoked rows %d (%v), want 1", revoked, err)
	}
}

func TestLastUsedAtIsThrottled(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	op := h.sqlDB()
	stored := func() string {
		var v *string
		if err := op.QueryRow(`SELECT last_used_at FROM api_keys WHERE id = ?`, tn.adminKID).Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v == nil {
			return ""
		}
		return *v
	}
	listed := func() any {
		for _, k := range h.q("GET", "/v1/workspaces/acme/keys", testAdminToken, nil).json(t)["keys"].([]any) {
			if k := k.(map[string]any); k["id"] == tn.adminKID {
				return k["last_used_at"]
			}
		}
		return nil
	}
	if got := listed(); got != nil {
		t.Fatalf("got last_used_at %v before any use, want null", got)
	}
	mustStatus(t, h.q("GET", "/v1/workspaces/acme/audit", tn.adminKey, nil), 200, "")
	first := "2026-01-31T09:05:00.120Z"
	eventually(t, "first use stored", func() bool { return stored() == first })

	h.clock.Advance(30 * time.Second)
	mustStatus(t, h.q("GET", "/v1/workspaces/acme/audit", tn.adminKey, nil), 200, "")
	if got := listed(); got != "2026-01-31T09:05:30.120Z" {
		t.Errorf("got listed last_used_at %v, want the newest use", got)
	}
	// The throttle decides at once, on the request's path (a due write
	// alone is queued after it): no wait is needed to see that none was
	// queued; TestKeyUsesThrottle (storage) pins the rule itself.
	if got := stored(); got != first {
		t.Errorf("got stored %q 30 s later, want no write yet (%q)", got, first)
	}

	h.clock.Advance(31 * time.Second)
	mustStatus(t, h.q("GET", "/v1/workspaces/acme/audit", tn.adminKey, nil), 200, "")
	eventually(t, "use after a minute stored", func() bool { return stored() == "2026-01-31T09:06:01.120Z" })
}

func TestAuthorization(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.setupTenant("acme", "acme-web")
	b := h.setupTenant("bravo", "bravo-web")
	revoked := func() string {
		r := h.q("POST", "/v1/workspaces/acme/keys", testAdminToken, map[string]any{"label": "old", "scopes": []string{"admin"}})
		m := r.json(t)
		mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/keys/"+m["id"].(string), testAdminToken, nil), 204, "")
		return m["plaintext"].(string)
	}()
	type call struct{ method, path string }
	adminOnly := []call{
		{"GET", "/workspaces"}, {"POST", "/workspaces"},
	}
	adminOnlyInWorkspace := []call{
		{"GET", "/workspaces/acme"}, {"PATCH", "/workspaces/acme"},
		{"GET", "/workspaces/acme/sites"}, {"POST", "/workspaces/acme/sites"},
		{"DELETE", "/workspaces/acme/sites/acme-web"},
	}
	adminScoped := []call{
		{"GET", "/workspaces/acme/keys"}, {"POST", "/workspaces/acme/keys"},
		{"DELETE", "/workspaces/acme/keys/00000000-0000-0000-0000-000000000000"},
		{"GET", "/workspaces/acme/audit"},
	}
	tests := []struct {
		name   string
		token  string
		calls  []call
		status int
		code   string
	}{
		{"no credential", "", append(append(adminOnly, adminOnlyInWorkspace...), adminScoped...), 401, "unauthorized"},
		{"unknown bearer", "nope", append(append(adminOnly, adminOnlyInWorkspace...), adminScoped...), 401, "unauthorized"},
		{"forged key", "sk_acme_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", adminScoped, 401, "unauthorized"},
		{"revoked key", revoked, adminScoped, 401, "unauthorized"},
		{"admin key on admin-token routes", a.adminKey, adminOnly, 403, "forbidden"},
		{"admin key on own workspace admin-token routes", a.adminKey, adminOnlyInWorkspace, 403, "forbidden"},
		{"read key on admin-scoped routes", a.readKey, adminScoped, 403, "forbidden"},
		{"ingest key on admin-scoped routes", a.ingestKey, adminScoped, 403, "forbidden"},
		{"foreign admin key", b.adminKey, append(adminOnlyInWorkspace, adminScoped...), 404, "not_found"},
		{"foreign read key", b.readKey, append(adminOnlyInWorkspace, adminScoped...), 404, "not_found"},
	}
	for _, tt := range tests {
		for _, c := range tt.calls {
			t.Run(tt.name+" "+c.method+" "+c.path, func(t *testing.T) {
				r := h.q(c.method, "/v1"+c.path, tt.token, map[string]any{})
				mustStatus(t, r, tt.status, tt.code)
			})
		}
	}

	t.Run("foreign 404 is the ordinary not-found", func(t *testing.T) {
		foreign := h.q("GET", "/v1/workspaces/acme/audit", b.adminKey, nil)
		missing := h.q("GET", "/v1/workspaces/does-not-exist/audit", b.adminKey, nil)
		if foreign.status != 404 || string(foreign.body) != string(missing.body) {
			t.Fatalf("got foreign %d %s, missing %d %s: want identical 404s", foreign.status, foreign.body, missing.status, missing.body)
		}
	})
	t.Run("admin-scoped key works in its workspace", func(t *testing.T) {
		mustStatus(t, h.q("GET", "/v1/workspaces/acme/keys", a.adminKey, nil), 200, "")
		mustStatus(t, h.q("GET", "/v1/workspaces/acme/audit", a.adminKey, nil), 200, "")
		r := h.q("POST", "/v1/workspaces/acme/keys", a.adminKey, map[string]any{"label": "by key", "scopes": []string{"query:read"}})
		mustStatus(t, r, 201, "")
	})
	t.Run("lower-case bearer scheme accepted", func(t *testing.T) {
		r := h.request("GET", h.query.URL+"/v1/workspaces", "", nil, "Authorization", "bearer "+testAdminToken)
		mustStatus(t, r, 200, "")
	})
	t.Run("no admin token configured", func(t *testing.T) {
		h2 := newHarness(t, func(c *Config) { c.AdminToken = "" })
		mustStatus(t, h2.q("GET", "/v1/workspaces", "", nil), 401, "unauthorized")
		r := h2.request("GET", h2.query.URL+"/v1/workspaces", "", nil, "Authorization", "Bearer ")
		mustStatus(t, r, 401, "unauthorized")
	})
	t.Run("audit of a key's action names the key", func(t *testing.T) {
		r := h.q("GET", "/v1/workspaces/acme/audit?limit=1", testAdminToken, nil)
		e := r.json(t)["entries"].([]any)[0].(map[string]any)
		if e["action"] != "key.create" || e["actor_kind"] != "apiKey" || e["actor_id"] != a.adminKID {
			t.Fatalf("got %v, want key.create by apiKey %s", e, a.adminKID)
		}
	})
}

func TestHealthzOnBothListeners(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, base := range []string{h.collector.URL, h.query.URL} {
		for _, p := range []string{"/healthz", "/v1/healthz"} {
			r := h.request("GET", base+p, "", nil)
			if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"status":"ok"}` {
				t.Errorf("%s%s: got %d %s, want 200 {\"status\":\"ok\"}", base, p, r.status, r.body)
			}
		}
	}
	mustStatus(t, h.request("GET", h.collector.URL+"/v1/nothing", "", nil), 404, "not_found")
}
