package server

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"github.com/tally-analytics/tally/internal/dbtest"
)

// shareClient is a browser on a shared link: a cookie jar, the token sent
// in X-Tally-Share with every request but the share page's own.
type shareClient struct {
	h      *harness
	token  string
	client *http.Client
}

func (h *harness) shareClient(token string) *shareClient {
	jar, _ := cookiejar.New(nil)
	return &shareClient{h: h, token: token, client: &http.Client{Jar: jar}}
}

// do sends method path with body (a string, sent as is) and the token.
func (c *shareClient) do(method, path, body string, headers ...string) response {
	c.h.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.h.query.URL+path, rd)
	if err != nil {
		c.h.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set(shareHeader, c.token)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := c.client.Do(req)
	if err != nil {
		c.h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: out}
}

// unlock gives the link's password, failing the test unless it works.
func (c *shareClient) unlock(password string) {
	c.h.t.Helper()
	mustStatus(c.h.t, c.do("POST", "/share/"+c.token+"/auth", `{"password":"`+password+`"}`), 204, "")
}

// createLink makes a shared link of site with body, and returns its id and
// token.
func (h *harness) createLink(site string, body map[string]any) (id, token string) {
	h.t.Helper()
	r := h.q("POST", "/v1/sites/"+site+"/shared-links", testAdminToken, body)
	mustStatus(h.t, r, 201, "")
	m := r.json(h.t)
	return m["id"].(string), m["token"].(string)
}

// sharedRouteBodies are the bodies that make an allowed route answer 200.
var sharedRouteBodies = map[string]string{
	"POST /v1/sites/:siteId/query":  `{"metrics":["visitors"],"date_range":"7d"}`,
	"POST /api/v2/query":            `{"site_id":"{site}","metrics":["visitors"],"date_range":"7d"}`,
	"POST /v1/sites/:siteId/funnel": `{"steps":["Home","Signup"],"date_range":"7d"}`,
	"POST /share/:token/auth":       `{"password":"` + testPassword + `"}`,
}

// sharedRouteQueries are the query strings that make an allowed GET answer 200.
var sharedRouteQueries = map[string]string{
	"/sites/:siteId/breakdown": "?dimension=url&from=2026-01-01&to=2026-01-31",
	"/sites/:siteId/pageviews": "?from=2026-01-01&to=2026-01-31",
	"/sites/:siteId/events":    "?from=2026-01-01&to=2026-01-31",
}

// TestSharedLinkWalksEveryRoute sends every route of the query API's route
// table (dev mode's included) with a shared link: the allow-list's answer
// 200 (204 for the password form), every other the ordinary 404, so that
// a route added later is refused by default. The allowed routes of a
// site answer 404 for another site of the workspace and one of another
// workspace.
func TestSharedLinkWalksEveryRoute(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.DebugFeedSize = 10 })
	h.setupTenant("acme", "web")
	mustStatus(t, h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": "other", "name": "other"}), 201, "")
	h.setupTenant("beta", "b")
	for _, g := range []map[string]any{{"name": "Home", "page_path": "/"}, {"name": "Signup", "event_name": "signup"}} {
		mustStatus(t, h.q("POST", "/v1/sites/web/goals", testAdminToken, g), 201, "")
	}
	_, token := h.createLink("web", map[string]any{"label": "Board", "password": testPassword})
	c := h.shareClient(token)
	c.unlock(testPassword)

	routes := h.srv.Query().(*router).routes
	if len(routes) < 80 {
		t.Fatalf("got %d routes, want the whole table", len(routes))
	}
	allowed := map[string]bool{}
	for _, route := range routes {
		method, pattern, _ := strings.Cut(route, " ")
		build := func(site string) (string, string) {
			p := pattern
			for _, kv := range [][2]string{{":siteId", site}, {":slug", "acme"}, {":token", token}, {"*filepath", "app.js"}} {
				p = strings.ReplaceAll(p, kv[0], kv[1])
			}
			for strings.Contains(p, "/:") {
				i := strings.Index(p, "/:")
				j := strings.IndexByte(p[i+1:], '/')
				if j < 0 {
					p = p[:i] + "/x"
				} else {
					p = p[:i] + "/x" + p[i+1+j:]
				}
			}
			body := sharedRouteBodies[route]
			if body == "" && method != "GET" && method != "DELETE" {
				body = `{}`
			}
			return p + sharedRouteQueries[strings.TrimPrefix(pattern, "/v1")], strings.ReplaceAll(body, "{site}", site)
		}
		path, body := build("web")
		r := c.do(method, path, body)
		if !sharedLinkAllows(method, pattern) {
			if r.status != 404 || r.code() != "not_found" {
				t.Errorf("%s: got %d %s, want the ordinary 404", route, r.status, r.body)
			}
			continue
		}
		allowed[method+" "+strings.TrimPrefix(pattern, "/v1")] = true
		want := 200
		if route == "POST /share/:token/auth" {
			want = 204
		}
		if r.status != want {
			t.Errorf("%s: got %d %s, want %d", route, r.status, r.body, want)
		}
		if !strings.Contains(pattern, ":siteId") && route != "POST /api/v2/query" {
			continue
		}
		for _, site := range []string{"other", "b", "nosuch"} {
			path, body := build(site)
			if r := c.do(method, path, body); r.status != 404 {
				t.Errorf("%s on site %s: got %d %s, want 404", route, site, r.status, r.body)
			}
		}
	}
	for route := range sharedLinkRoutes {
		if !allowed[route] {
			t.Errorf("the allow-list names %s, which the route table does not have", route)
		}
	}
	// What the link shows of its site: the name and time zone, no more.
	r := c.do("GET", "/v1/sites/web", "")
	mustStatus(t, r, 200, "")
	if got := r.json(t); len(got) != 3 || got["name"] != "web" || got["time_zone"] != "UTC" {
		t.Errorf("got %v, want the site's id, name and time zone only", got)
	}
	// Another credential sent with the link's is not used.
	if r := c.do("GET", "/v1/workspaces/acme/keys", "", "Authorization", "Bearer "+testAdminToken); r.status != 404 {
		t.Errorf("with the admin token beside the link: got %d, want 404", r.status)
	}
	if r := c.do("GET", "/v1/sites/other", "", "Authorization", "Bearer "+testAdminToken); r.status != 404 {
		t.Errorf("another site with the admin token beside the link: got %d, want 404", r.status)
	}
	// The site's segments, none of anyone's personal ones.
	for _, seg := range []map[string]any{
		{"name": "Site-wide", "type": "site", "segment_data": map[string]any{"filters": []any{[]any{"is", "visit:country", []string{"DE"}}}}},
		{"name": "Mine", "type": "personal", "segment_data": map[string]any{"filters": []any{[]any{"is", "visit:country", []string{"FR"}}}}},
	} {
		mustStatus(t, h.q("POST", "/v1/sites/web/segments", testAdminToken, seg), 201, "")
	}
	r = c.do("GET", "/v1/sites/web/segments", "")
	mustStatus(t, r, 200, "")
	if !bytes.Contains(r.body, []byte("Site-wide")) || bytes.Contains(r.body, []byte("Mine")) {
		t.Errorf("the link's segments: got %s, want the site segment only", r.body)
	}
}

// TestSharedLinkSettings: the settings' routes, who may use them, the
// token shown once, validation naming the field, and the audit entries.
func TestSharedLinkSettings(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	other := h.setupTenant("beta", "b")
	h.addUser("ana@example.com", "viewer", "acme")
	viewer := h.client()
	viewer.signin("ana@example.com", testPassword)

	r := h.q("POST", "/v1/sites/web/shared-links", tn.adminKey, map[string]any{"label": " Board ", "allowed_origins": []string{"https://Intranet.Example.com/", "https://intranet.example.com"}})
	mustStatus(t, r, 201, "")
	created := r.json(t)
	token := created["token"].(string)
	if len(token) != 43 || created["path"] != "/share/"+token || created["url"] != h.query.URL+"/share/"+token {
		t.Errorf("got token %q path %v url %v, want 256 bits, /share/<token> and its URL on the query API", token, created["path"], created["url"])
	}
	if created["label"] != "Board" || created["password"] != false {
		t.Errorf("got %v, want label Board without a password", created)
	}
	if got := created["allowed_origins"].([]any); len(got) != 1 || got[0] != "https://intranet.example.com" {
		t.Errorf("got origins %v, want one, lowercased, without the slash", got)
	}
	id := created["id"].(string)
	if n := h.count(`SELECT COUNT(*) FROM shared_links WHERE token_hash = ?`, token); n != 0 {
		t.Errorf("the token is stored in the clear")
	}

	list := h.q("GET", "/v1/sites/web/shared-links", tn.adminKey, nil)
	mustStatus(t, list, 200, "")
	if bytes.Contains(list.body, []byte(token)) || !bytes.Contains(list.body, []byte(id)) {
		t.Errorf("the list %s must name the link and not its token", list.body)
	}

	for _, tc := range []struct {
		name, method, path, token string
		body                      any
		status                    int
		code, detail              string
	}{
		{"no label", "POST", "/v1/sites/web/shared-links", tn.adminKey, map[string]any{}, 400, "invalid_shared_link", "/label"},
		{"empty label", "POST", "/v1/sites/web/shared-links", tn.adminKey, map[string]any{"label": "  "}, 400, "invalid_shared_link", "/label"},
		{"label not a string", "POST", "/v1/sites/web/shared-links", tn.adminKey, map[string]any{"label": 3}, 400, "invalid_shared_link", "/label"},
		{"short password", "POST", "/v1/sites/web/shared-links", tn.adminKey, map[string]any{"label": "x", "password": "short"}, 400, "invalid_shared_link", "/password"},
		{"password not a string", "POST", "/v1/sites/web/shared-links", tn.adminKey, map[string]any{"label": "x", "password": 1}, 400, "invalid_shared_link", "/password"},
		{"origins not a list", "POST", "/v1/sites/web/shared-links", tn.adminKey, map[string]any{"label": "x", "allowed_origins": "https://a.example"}, 400, "invalid_shared_link", "/allowed_origins"},
		{"origin with a path", "POST", "/v1/sites/web/shared-links", tn.adminKey, map[string]any{"label": "x", "allowed_origins": []string{"https://a.example", "https://b.example/page"}}, 400, "invalid_shared_link", "/allowed_origins/1"},
		{"origin of another scheme", "POST", "/v1/sites/web/shared-links", tn.adminKey, map[string]any{"label": "x", "allowed_origins": []string{"ftp://a.example"}}, 400, "invalid_shared_link", "/allowed_origins/0"},
		{"wildcard origin", "POST", "/v1/sites/web/shared-links", tn.adminKey, map[string]any{"label": "x", "allowed_origins": []string{"https://*.a.example"}}, 400, "invalid_shared_link", "/allowed_origins/0"},
		{"origin injecting CSP", "POST", "/v1/sites/web/shared-links", tn.adminKey, map[string]any{"label": "x", "allowed_origins": []string{"https://a.example; script-src *"}}, 400, "invalid_shared_link", "/allowed_origins/0"},
		{"origin with a bad port", "POST", "/v1/sites/web/shared-links", tn.adminKey, map[string]any{"label": "x", "allowed_origins": []string{"https://a.example:99999"}}, 400, "invalid_shared_link", "/allowed_origins/0"},
		{"nothing to change", "PATCH", "/v1/sites/web/shared-links/" + id, tn.adminKey, map[string]any{}, 400, "invalid_shared_link", ""},
		{"a read key", "POST", "/v1/sites/web/shared-links", tn.readKey, map[string]any{"label": "x"}, 403, "forbidden", ""},
		{"a read key lists", "GET", "/v1/sites/web/shared-links", tn.readKey, nil, 403, "forbidden", ""},
		{"another workspace's admin", "GET", "/v1/sites/web/shared-links", other.adminKey, nil, 404, "not_found", ""},
		{"another site's link", "PATCH", "/v1/sites/b/shared-links/" + id, testAdminToken, map[string]any{"label": "y"}, 404, "not_found", ""},
		{"an unknown link", "DELETE", "/v1/sites/web/shared-links/nosuch", tn.adminKey, nil, 404, "not_found", ""},
	} {
		r := h.q(tc.method, tc.path, tc.token, tc.body)
		if r.status != tc.status || r.code() != tc.code {
			t.Errorf("%s: got %d %s, want %d %s", tc.name, r.status, r.body, tc.status, tc.code)
			continue
		}
		if tc.detail != "" && !bytes.Contains(r.body, []byte(`"path":"`+tc.detail+`"`)) {
			t.Errorf("%s: got %s, want a detail at %s", tc.name, r.body, tc.detail)
		}
	}
	// A viewer's session may not; an admin's may (CSRF as ever).
	mustStatus(t, viewer.do("POST", "/v1/sites/web/shared-links", map[string]any{"label": "x"}), 403, "forbidden")
	h.addUser("bo@example.com", "admin", "acme")
	admin := h.client()
	admin.signin("bo@example.com", testPassword)
	r = admin.do("POST", "/v1/sites/web/shared-links", map[string]any{"label": "Bo's"})
	mustStatus(t, r, 201, "")

	// PATCH: a password set, then cleared; origins emptied by null.
	r = h.q("PATCH", "/v1/sites/web/shared-links/"+id, tn.adminKey, map[string]any{"label": "Board room", "password": testPassword, "allowed_origins": nil})
	mustStatus(t, r, 200, "")
	if m := r.json(t); m["label"] != "Board room" || m["password"] != true || len(m["allowed_origins"].([]any)) != 0 {
		t.Errorf("got %v, want the new label, a password and no origins", m)
	}
	mustStatus(t, h.shareClient(token).do("POST", "/v1/sites/web/query", `{"metrics":["visitors"],"date_range":"7d"}`), 401, "shared_link_password")
	r = h.q("PATCH", "/v1/sites/web/shared-links/"+id, tn.adminKey, map[string]any{"password": nil})
	mustStatus(t, r, 200, "")
	if r.json(t)["password"] != false {
		t.Errorf("the password was not cleared: %s", r.body)
	}
	mustStatus(t, h.shareClient(token).do("POST", "/v1/sites/web/query", `{"metrics":["visitors"],"date_range":"7d"}`), 200, "")

	// DELETE revokes: 204, then the token is the ordinary 404 everywhere,
	// on another instance too (PostgreSQL: a second server on the database).
	b := h
	if dbtest.Postgres() {
		b = newHarnessAt(t, h.path)
	}
	mustStatus(t, b.shareClient(token).do("GET", "/v1/share", ""), 200, "")
	mustStatus(t, h.q("DELETE", "/v1/sites/web/shared-links/"+id, tn.adminKey, nil), 204, "")
	for _, x := range []*harness{h, b} {
		c := x.shareClient(token)
		mustStatus(t, c.do("GET", "/v1/share", ""), 404, "not_found")
		mustStatus(t, c.do("POST", "/v1/sites/web/query", `{"metrics":["visitors"],"date_range":"7d"}`), 404, "not_found")
		mustStatus(t, c.do("GET", "/share/"+token, ""), 404, "not_found")
	}
	mustStatus(t, h.q("DELETE", "/v1/sites/web/shared-links/"+id, tn.adminKey, nil), 404, "not_found")
	if bytes.Contains(h.q("GET", "/v1/sites/web/shared-links", tn.adminKey, nil).body, []byte(id)) {
		t.Errorf("a revoked link is still listed")
	}

	audit := h.q("GET", "/v1/workspaces/acme/audit?limit=100", testAdminToken, nil)
	for _, action := range []string{"shared_link.create", "shared_link.update", "shared_link.revoke"} {
		if !bytes.Contains(audit.body, []byte(`"`+action+`"`)) {
			t.Errorf("no %s in the audit log", action)
		}
	}
	if bytes.Contains(audit.body, []byte(token)) || bytes.Contains(audit.body, []byte(testPassword)) {
		t.Errorf("the audit log holds the token or the password")
	}

	// The cap counts live links.
	for i := 1; i < 100; i++ { // Bo's is one
		mustStatus(t, h.q("POST", "/v1/sites/web/shared-links", testAdminToken, map[string]any{"label": "x"}), 201, "")
	}
	mustStatus(t, h.q("POST", "/v1/sites/web/shared-links", testAdminToken, map[string]any{"label": "x"}), 409, "shared_link_limit_reached")

	// A deleted site's links go with it.
	mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/sites/web", testAdminToken, nil), 204, "")
	if n := h.count(`SELECT COUNT(*) FROM shared_links WHERE site_id = 'web'`); n != 0 {
		t.Errorf("got %d links of a deleted site, want 0", n)
	}
}

// TestSharedLinkPassword: without the password the link shows nothing;
// a wrong one is refused and throttled; the right one sets a cookie of
// that link only, which a new password voids.
func TestSharedLinkPassword(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	id, token := h.createLink("web", map[string]any{"label": "Board", "password": testPassword})
	_, other := h.createLink("web", map[string]any{"label": "Other", "password": testPassword})
	query := `{"metrics":["visitors"],"date_range":"7d"}`

	c := h.shareClient(token)
	r := c.do("GET", "/v1/share", "")
	mustStatus(t, r, 200, "")
	if m := r.json(t); m["password_required"] != true || m["unlocked"] != false || m["site"] != nil {
		t.Errorf("got %v, want a password required and no site", m)
	}
	mustStatus(t, c.do("POST", "/v1/sites/web/query", query), 401, "shared_link_password")
	mustStatus(t, c.do("GET", "/v1/sites/web", ""), 401, "shared_link_password")
	mustStatus(t, c.do("POST", "/share/"+token+"/auth", `{"password":"wrong password"}`), 401, "shared_link_password")
	mustStatus(t, c.do("POST", "/share/"+token+"/auth", `{}`), 400, "invalid_password")
	mustStatus(t, c.do("POST", "/share/"+token+"/auth", `{"password":"`+testPassword+`"}`, "Origin", "https://evil.example"), 403, "forbidden")
	mustStatus(t, c.do("POST", "/share/nosuch/auth", `{"password":"`+testPassword+`"}`), 404, "not_found")

	r = c.do("POST", "/share/"+token+"/auth", `{"password":"`+testPassword+`"}`)
	mustStatus(t, r, 204, "")
	ck := sessionCookieOf(r, "tally_share_"+strings.ReplaceAll(id, "-", ""))
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" || ck.Secure || bytes.Contains([]byte(ck.Value), []byte(token)) {
		t.Fatalf("got cookie %+v, want HttpOnly, SameSite=Lax, Path=/, not Secure over HTTP, without the token", ck)
	}
	mustStatus(t, c.do("POST", "/v1/sites/web/query", query), 200, "")
	r = c.do("GET", "/v1/share", "")
	if m := r.json(t); m["unlocked"] != true || m["site"] == nil {
		t.Errorf("got %v, want unlocked with its site", m)
	}
	// Another instance takes the cookie (its MAC is keyed by the stored
	// hash; cookies are per host, not per port).
	if dbtest.Postgres() {
		b := &shareClient{h: newHarnessAt(t, h.path), token: token, client: c.client}
		mustStatus(t, b.do("POST", "/v1/sites/web/query", query), 200, "")
	}
	// The cookie is this link's: the other link stays locked.
	c.token = other
	mustStatus(t, c.do("POST", "/v1/sites/web/query", query), 401, "shared_link_password")
	c.token = token
	// It expires.
	h.clock.Advance(shareCookieTTL + time.Second)
	mustStatus(t, c.do("POST", "/v1/sites/web/query", query), 401, "shared_link_password")
	c.unlock(testPassword)
	// A new password voids it.
	mustStatus(t, h.q("PATCH", "/v1/sites/web/shared-links/"+id, testAdminToken, map[string]any{"password": "another password"}), 200, "")
	mustStatus(t, c.do("POST", "/v1/sites/web/query", query), 401, "shared_link_password")

	// Five failures of one link, then 429 even with the right password.
	for i := 0; i < 5; i++ {
		mustStatus(t, c.do("POST", "/share/"+token+"/auth", `{"password":"wrong password"}`), 401, "shared_link_password")
	}
	r = c.do("POST", "/share/"+token+"/auth", `{"password":"another password"}`)
	mustStatus(t, r, 429, "rate_limited")
	if r.header.Get("Retry-After") == "" {
		t.Errorf("no Retry-After on a throttled password")
	}

	// With HTTPS and allowed origins the cookie can reach a frame.
	hs := newHarness(t, func(c *Config) { c.SecureCookies = true })
	hs.setupTenant("acme", "web")
	hid, htoken := hs.createLink("web", map[string]any{"label": "Board", "password": testPassword, "allowed_origins": []string{"https://intranet.example"}})
	r = hs.shareClient(htoken).do("POST", "/share/"+htoken+"/auth", `{"password":"`+testPassword+`"}`)
	mustStatus(t, r, 204, "")
	ck = sessionCookieOf(r, "__Host-tally_share_"+strings.ReplaceAll(hid, "-", ""))
	if ck == nil || !ck.Secure || ck.SameSite != http.SameSiteNoneMode || !ck.Partitioned || !ck.HttpOnly {
		t.Errorf("got cookie %+v, want __Host-, Secure, SameSite=None, Partitioned, HttpOnly", ck)
	}
}

// TestSharedLinkFrameHeaders: the share page may be framed only by its
// link's allowed origins, and sends no Referer.
func TestSharedLinkFrameHeaders(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	_, closed := h.createLink("web", map[string]any{"label": "Closed"})
	_, open := h.createLink("web", map[string]any{"label": "Open", "allowed_origins": []string{"https://intranet.example", "http://localhost:8000"}})
	for _, tc := range []struct {
		token, ancestors, xfo string
	}{
		{closed, "frame-ancestors 'none'", "DENY"},
		{open, "frame-ancestors https://intranet.example http://localhost:8000", ""},
	} {
		r := h.q("GET", "/share/"+tc.token, "", nil)
		mustStatus(t, r, 200, "")
		if csp := r.header.Get("Content-Security-Policy"); !strings.HasSuffix(csp, tc.ancestors) {
			t.Errorf("got CSP %q, want it to end with %q", csp, tc.ancestors)
		}
		if got := r.header.Get("X-Frame-Options"); got != tc.xfo {
			t.Errorf("got X-Frame-Options %q, want %q", got, tc.xfo)
		}
		if got := r.header.Get("Referrer-Policy"); got != "no-referrer" {
			t.Errorf("got Referrer-Policy %q, want no-referrer", got)
		}
		if !bytes.Contains(r.body, []byte("/v1/ui/app.js")) {
			t.Errorf("the share page is not the dashboard: %.200s", r.body)
		}
	}
	// The dashboard itself stays unframeable.
	r := h.q("GET", "/", "", nil)
	if r.header.Get("X-Frame-Options") != "DENY" || !strings.HasSuffix(r.header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("the dashboard's frame headers changed: %v", r.header)
	}
}

// TestSharedLinkLogsHoldNoSecrets: neither a link's token nor its password
// reaches the logs, whatever the request does.
func TestSharedLinkLogsHoldNoSecrets(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	h := newHarness(t, func(c *Config) { c.Logger = logger })
	h.setupTenant("acme", "web")
	_, token := h.createLink("web", map[string]any{"label": "Board", "password": testPassword})
	c := h.shareClient(token)
	c.do("GET", "/share/"+token, "")
	c.do("POST", "/share/"+token+"/auth", `{"password":"wrong password"}`)
	c.unlock(testPassword)
	c.do("POST", "/v1/sites/web/query", `{"metrics":["visitors"],"date_range":"7d"}`)
	c.do("POST", "/v1/sites/web/query", `{"metrics":["nope"]}`)
	c.do("GET", "/v1/workspaces/acme/keys", "")
	c.do("GET", "/v1/sites/web/nosuch", "")
	c.do("POST", "/api/v2/query", `{"site_id":"web","metrics":["visitors"],"date_range":"7d"}`)
	h.q("PATCH", "/v1/sites/web/shared-links/nosuch", testAdminToken, map[string]any{"password": "a new password"})
	logs := buf.String()
	for _, banned := range []string{token, testPassword, "wrong password", "a new password"} {
		if strings.Contains(logs, banned) {
			t.Errorf("logs contain %q:\n%s", banned, logs)
		}
	}
}
