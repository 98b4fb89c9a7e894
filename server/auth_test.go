package server

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"github.com/tally-analytics/tally/storage"
)

const testPassword = "correct horse battery"

// signedClient is a client with a cookie jar against the harness's query API,
// sending the session's CSRF token and the query API's own Origin on
// state-changing requests, as the dashboard does.
type signedClient struct {
	h      *harness
	client *http.Client
	csrf   string
	origin string // "" sends none
}

func (h *harness) client() *signedClient {
	jar, _ := cookiejar.New(nil)
	return &signedClient{h: h, client: &http.Client{Jar: jar}, origin: h.query.URL}
}

// do sends method path with body (JSON, or []byte as is) and headers (pairs).
func (b *signedClient) do(method, path string, body any, headers ...string) response {
	b.h.t.Helper()
	var rd io.Reader
	switch raw := body.(type) {
	case nil:
	case []byte: // sent as is (an upload)
		rd = bytes.NewReader(raw)
	default:
		buf, _ := json.Marshal(body)
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, b.h.query.URL+path, rd)
	if err != nil {
		b.h.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if method != http.MethodGet {
		if b.csrf != "" {
			req.Header.Set(csrfHeader, b.csrf)
		}
		if b.origin != "" {
			req.Header.Set("Origin", b.origin)
			req.Header.Set("Sec-Fetch-Site", "same-origin")
		}
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := b.client.Do(req)
	if err != nil {
		b.h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: out}
}

// signin signs b in as email, failing the test unless it works.
func (b *signedClient) signin(email, password string, totp ...string) response {
	b.h.t.Helper()
	body := map[string]any{"email": email, "password": password}
	if len(totp) > 0 {
		body["totp"] = totp[0]
	}
	r := b.do("POST", "/v1/auth/signin", body)
	mustStatus(b.h.t, r, 200, "")
	b.csrf = r.json(b.h.t)["csrf_token"].(string)
	return r
}

// addUser creates a user with a password and role in workspace slug
// through the operator's endpoint, and returns its id.
func (h *harness) addUser(email, role, slug string) string {
	h.t.Helper()
	r := h.q("POST", "/v1/users", testAdminToken, map[string]any{"email": email, "role": role, "workspace": slug, "password": testPassword})
	mustStatus(h.t, r, 201, "")
	return r.json(h.t)["id"].(string)
}

// sessionCookieOf is the session cookie r sets (nil when none).
func sessionCookieOf(r response, name string) *http.Cookie {
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func TestSigninAnswersUnknownEmailAsWrongPassword(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	h.addUser("ana@example.com", "owner", "acme")
	wrong := h.q("POST", "/v1/auth/signin", "", map[string]any{"email": "ana@example.com", "password": "not the password"})
	unknown := h.q("POST", "/v1/auth/signin", "", map[string]any{"email": "nobody@example.com", "password": "not the password"})
	unset := h.q("POST", "/v1/auth/signin", "", map[string]any{"email": "ANA@example.com ", "password": "not the password"})
	for _, r := range []response{wrong, unknown, unset} {
		if r.status != wrong.status || !bytes.Equal(r.body, wrong.body) {
			t.Errorf("got %d %s, want the wrong password's %d %s", r.status, r.body, wrong.status, wrong.body)
		}
		if r.header.Get("Set-Cookie") != "" {
			t.Errorf("a failed sign-in set a cookie: %q", r.header.Get("Set-Cookie"))
		}
	}
	mustStatus(t, wrong, 401, "unauthorized")
	// The email matches whatever its case.
	b := h.client()
	b.signin("ANA@Example.com", testPassword)
}

func TestSessionCookie(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		secure bool
		cookie string
	}{
		{"http", false, "tally_session"},
		{"https", true, "__Host-tally_session"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(c *Config) { c.SecureCookies = tc.secure })
			h.setupTenant("acme", "web")
			h.addUser("ana@example.com", "owner", "acme")
			var values, ids []string
			for range 2 {
				r := h.q("POST", "/v1/auth/signin", "", map[string]any{"email": "ana@example.com", "password": testPassword})
				mustStatus(t, r, 200, "")
				c := sessionCookieOf(r, tc.cookie)
				if c == nil {
					t.Fatalf("no %s cookie in %q", tc.cookie, r.header.Values("Set-Cookie"))
				}
				if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Secure != tc.secure || c.Path != "/" || c.Domain != "" {
					t.Errorf("got HttpOnly %v SameSite %v Secure %v Path %q Domain %q, want HttpOnly, Lax, Secure %v, /, none",
						c.HttpOnly, c.SameSite, c.Secure, c.Path, c.Domain, tc.secure)
				}
				if c.MaxAge != int(DefaultSessionMaxAge/time.Second) {
					t.Errorf("got Max-Age %d, want %d", c.MaxAge, int(DefaultSessionMaxAge/time.Second))
				}
				values = append(values, c.Value)
				ids = append(ids, r.json(t)["session"].(map[string]any)["id"].(string))
			}
			if values[0] == values[1] || ids[0] == ids[1] {
				t.Errorf("two sign-ins got cookies %q and ids %q, want new ones each time", values, ids)
			}
			// Only the SHA-256 of the cookie is stored.
			if n := h.count(`SELECT COUNT(*) FROM user_sessions WHERE token_hash = ? OR id = ?`, values[0], values[0]); n != 0 {
				t.Errorf("the cookie's value is stored in %d rows", n)
			}
			if n := h.count(`SELECT COUNT(*) FROM user_sessions`); n != 2 {
				t.Errorf("got %d sessions, want 2", n)
			}
		})
	}
}

func TestSessionCSRF(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	h.addUser("ana@example.com", "admin", "acme")
	b := h.client()
	b.signin("ana@example.com", testPassword)
	csrf := b.csrf
	key := map[string]any{"label": "k", "scopes": []string{"query:read"}}
	for _, tc := range []struct {
		name    string
		csrf    string
		origin  string
		headers []string
		status  int
	}{
		{"token and same origin", csrf, h.query.URL, nil, 201},
		{"no token", "", h.query.URL, nil, 403},
		{"wrong token", csrf[1:] + "x", h.query.URL, nil, 403},
		{"other origin", csrf, "https://evil.example", []string{"Sec-Fetch-Site", "cross-site"}, 403},
		{"other origin, same-origin claimed", csrf, "https://evil.example", nil, 403},
		{"cross-site fetch", csrf, h.query.URL, []string{"Sec-Fetch-Site", "cross-site"}, 403},
		{"same-site fetch", csrf, h.query.URL, []string{"Sec-Fetch-Site", "same-site"}, 403},
		{"neither Origin nor Sec-Fetch-Site", csrf, "", nil, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b.csrf, b.origin = tc.csrf, tc.origin
			r := b.do("POST", "/v1/workspaces/acme/keys", key, tc.headers...)
			if r.status != tc.status {
				t.Fatalf("got %d %s, want %d", r.status, r.body, tc.status)
			}
		})
	}
	// Reads need no token; a bearer is unaffected by all of it.
	b.csrf, b.origin = "", ""
	mustStatus(t, b.do("GET", "/v1/workspaces/acme/keys", nil), 200, "")
	mustStatus(t, h.q("POST", "/v1/workspaces/acme/keys", tn.adminKey, key, "Origin", "https://evil.example"), 201, "")
	// A sign-in from another origin is refused too (login CSRF).
	r := h.q("POST", "/v1/auth/signin", "", map[string]any{"email": "ana@example.com", "password": testPassword}, "Origin", "https://evil.example")
	mustStatus(t, r, 403, "forbidden")
}

func TestSessionExpiry(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.SessionIdle = time.Hour; c.SessionMaxAge = 5 * time.Hour })
	h.setupTenant("acme", "web")
	h.addUser("ana@example.com", "viewer", "acme")

	idle := h.client()
	idle.signin("ana@example.com", testPassword)
	h.clock.Advance(59 * time.Minute)
	mustStatus(t, idle.do("GET", "/v1/auth/session", nil), 200, "") // a use: idle time starts again
	h.clock.Advance(59 * time.Minute)
	mustStatus(t, idle.do("GET", "/v1/sites/web", nil), 200, "")
	h.clock.Advance(61 * time.Minute)
	mustStatus(t, idle.do("GET", "/v1/sites/web", nil), 401, "unauthorized")

	busy := h.client()
	busy.signin("ana@example.com", testPassword)
	for range 4 {
		h.clock.Advance(59 * time.Minute)
		mustStatus(t, busy.do("GET", "/v1/sites/web", nil), 200, "")
	}
	h.clock.Advance(65 * time.Minute) // 5 h 01 min after its sign-in, used 1 h 05 min ago
	mustStatus(t, busy.do("GET", "/v1/sites/web", nil), 401, "unauthorized")
}

func TestSessionsListedAndRevoked(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	h.addUser("ana@example.com", "viewer", "acme")
	h.addUser("bo@example.com", "viewer", "acme")
	one, two, bo := h.client(), h.client(), h.client()
	one.signin("ana@example.com", testPassword)
	twoID := two.signin("ana@example.com", testPassword).json(t)["session"].(map[string]any)["id"].(string)
	boID := bo.signin("bo@example.com", testPassword).json(t)["session"].(map[string]any)["id"].(string)

	r := one.do("GET", "/v1/auth/sessions", nil)
	mustStatus(t, r, 200, "")
	var list sessionList
	_ = json.Unmarshal(r.body, &list)
	if len(list.Sessions) != 2 || list.Sessions[0].Current == list.Sessions[1].Current {
		t.Fatalf("got %s, want two sessions, one of them current", r.body)
	}
	mustStatus(t, one.do("DELETE", "/v1/auth/sessions/"+boID, nil), 404, "not_found")
	mustStatus(t, one.do("DELETE", "/v1/auth/sessions/"+twoID, nil), 204, "")
	mustStatus(t, two.do("GET", "/v1/sites/web", nil), 401, "unauthorized")
	mustStatus(t, one.do("DELETE", "/v1/auth/sessions/"+twoID, nil), 404, "not_found")
	mustStatus(t, bo.do("GET", "/v1/sites/web", nil), 200, "")

	// Sign-out ends the session and drops the cookie.
	r = one.do("POST", "/v1/auth/signout", nil)
	mustStatus(t, r, 204, "")
	if c := sessionCookieOf(r, sessionCookieName); c == nil || c.MaxAge >= 0 {
		t.Errorf("sign-out's Set-Cookie %q, want the cookie dropped", r.header.Values("Set-Cookie"))
	}
	mustStatus(t, one.do("GET", "/v1/auth/session", nil), 401, "unauthorized")
}

func TestRolesActWithTheirScopes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	h.setupTenant("other", "elsewhere")
	h.addUser("viewer@example.com", "viewer", "acme")
	h.addUser("admin@example.com", "admin", "acme")
	h.addUser("owner@example.com", "owner", "acme")
	victim := h.addUser("victim@example.com", "viewer", "acme")
	as := map[string]*signedClient{}
	for _, who := range []string{"viewer", "admin", "owner"} {
		as[who] = h.client()
		as[who].signin(who+"@example.com", testPassword)
	}
	unknown := h.q("GET", "/v1/sites/nope/pageviews", testAdminToken, nil)
	for _, tc := range []struct {
		who, method, path string
		body              any
		status            int
	}{
		{"viewer", "GET", "/v1/sites/web", nil, 200},
		{"viewer", "GET", "/v1/sites/web/pageviews?from=2026-01-01&to=2026-01-31", nil, 200},
		{"viewer", "PATCH", "/v1/sites/web", map[string]any{"name": "x"}, 403},
		{"viewer", "GET", "/v1/workspaces/acme/keys", nil, 403},
		{"viewer", "GET", "/v1/workspaces/acme/audit", nil, 403},
		{"viewer", "POST", "/v1/workspaces/acme/invitations", map[string]any{"email": "x@example.com", "role": "viewer"}, 403},
		{"viewer", "GET", "/v1/sites/elsewhere/pageviews", nil, 404},
		{"viewer", "GET", "/v1/workspaces/other/keys", nil, 404},
		{"admin", "GET", "/v1/sites/elsewhere", nil, 404},
		{"admin", "PATCH", "/v1/sites/web", map[string]any{"name": "Web"}, 200},
		{"admin", "GET", "/v1/workspaces/acme/audit", nil, 200},
		{"admin", "POST", "/v1/workspaces/acme/keys", map[string]any{"label": "k", "scopes": []string{"query:read"}}, 201},
		{"admin", "POST", "/v1/workspaces/acme/invitations", map[string]any{"email": "x@example.com", "role": "owner"}, 403},
		{"admin", "POST", "/v1/workspaces/acme/invitations", map[string]any{"email": "x@example.com", "role": "admin"}, 201},
		{"admin", "DELETE", "/v1/workspaces/acme/members/" + victim, nil, 403},
		{"admin", "POST", "/v1/workspaces/acme/sites", map[string]any{"id": "new", "name": "new"}, 403},
		{"admin", "GET", "/v1/workspaces", nil, 403},
		{"owner", "GET", "/v1/workspaces/acme/members", nil, 200},
		{"owner", "DELETE", "/v1/workspaces/acme/members/" + victim, nil, 204},
		{"owner", "POST", "/v1/workspaces/acme/invitations", map[string]any{"email": "y@example.com", "role": "owner"}, 201},
		{"owner", "GET", "/v1/workspaces/other/members", nil, 404},
	} {
		t.Run(tc.who+" "+tc.method+" "+tc.path, func(t *testing.T) {
			r := as[tc.who].do(tc.method, tc.path, tc.body)
			if r.status != tc.status {
				t.Fatalf("got %d %s, want %d", r.status, r.body, tc.status)
			}
			if tc.status == 404 && r.code() != unknown.code() {
				t.Errorf("got %s, want the ordinary not-found envelope %s", r.body, unknown.body)
			}
		})
	}
	// A site of another workspace answers as one that does not exist.
	a := as["viewer"].do("GET", "/v1/sites/elsewhere/pageviews", nil)
	n := as["viewer"].do("GET", "/v1/sites/nope/pageviews", nil)
	if a.status != n.status || !bytes.Equal(a.body, n.body) {
		t.Errorf("another workspace's site got %d %s, an unknown site %d %s: want the same", a.status, a.body, n.status, n.body)
	}
}

func TestSigninThrottle(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	h.addUser("ana@example.com", "viewer", "acme")
	bad := map[string]any{"email": "ana@example.com", "password": "wrong password"}
	for i := range signinAccountLimit {
		if r := h.q("POST", "/v1/auth/signin", "", bad); r.status != 401 {
			t.Fatalf("failure %d: got %d %s, want 401", i+1, r.status, r.body)
		}
	}
	good := map[string]any{"email": "ana@example.com", "password": testPassword}
	r := h.q("POST", "/v1/auth/signin", "", good)
	mustStatus(t, r, 429, "rate_limited")
	if ra := r.header.Get("Retry-After"); ra != "900" {
		t.Errorf("got Retry-After %q, want 900", ra)
	}
	// An unknown email is throttled alike (nothing told apart).
	for range signinAccountLimit {
		h.q("POST", "/v1/auth/signin", "", map[string]any{"email": "ghost@example.com", "password": "wrong password"})
	}
	mustStatus(t, h.q("POST", "/v1/auth/signin", "", map[string]any{"email": "ghost@example.com", "password": "x"}), 429, "rate_limited")
	h.clock.Advance(signinWindow)
	mustStatus(t, h.q("POST", "/v1/auth/signin", "", good), 200, "")

	// Per client: failures over many accounts from one address.
	h.clock.Advance(signinWindow)
	for i := range signinClientLimit - 2 { // 2 failures of ghost@ are in this window? no: a new window
		h.q("POST", "/v1/auth/signin", "", map[string]any{"email": strings.Repeat("x", i+1) + "@example.com", "password": "wrong password"})
	}
	h.q("POST", "/v1/auth/signin", "", bad)
	h.q("POST", "/v1/auth/signin", "", bad)
	mustStatus(t, h.q("POST", "/v1/auth/signin", "", map[string]any{"email": "new@example.com", "password": "x"}), 429, "rate_limited")
}

func TestPasswordLinks(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	// A user added without a password gets a set-password link.
	r := h.q("POST", "/v1/users", testAdminToken, map[string]any{"email": "ana@example.com", "role": "owner", "workspace": "acme"})
	mustStatus(t, r, 201, "")
	link := r.json(t)["password_link"].(map[string]any)
	token := link["token"].(string)
	if link["path"] != passwordPath+token {
		t.Errorf("got path %v, want %s", link["path"], passwordPath+token)
	}
	// No password yet: signing in fails as any wrong password does.
	mustStatus(t, h.q("POST", "/v1/auth/signin", "", map[string]any{"email": "ana@example.com", "password": ""}), 401, "unauthorized")
	mustStatus(t, h.q("POST", "/v1/auth/password-reset", "", map[string]any{"token": token, "password": "short"}), 400, "invalid_password")
	mustStatus(t, h.q("POST", "/v1/auth/password-reset", "", map[string]any{"token": token, "password": testPassword}), 204, "")
	mustStatus(t, h.q("POST", "/v1/auth/password-reset", "", map[string]any{"token": token, "password": testPassword}), 400, "invalid_token")
	b := h.client()
	b.signin("ana@example.com", testPassword)

	// A reset link: single use, one hour, every session ended.
	reset := func() string {
		r := h.q("POST", "/v1/users/password-link", testAdminToken, map[string]any{"email": "ana@example.com"})
		mustStatus(t, r, 200, "")
		return r.json(t)["token"].(string)
	}
	expired := reset()
	h.clock.Advance(resetLinkTTL)
	mustStatus(t, h.q("POST", "/v1/auth/password-reset", "", map[string]any{"token": expired, "password": "another good one"}), 400, "invalid_token")
	mustStatus(t, h.q("POST", "/v1/auth/password-reset", "", map[string]any{"token": "made-up", "password": "another good one"}), 400, "invalid_token")
	fresh := reset()
	mustStatus(t, h.q("POST", "/v1/auth/password-reset", "", map[string]any{"token": fresh, "password": "another good one"}), 204, "")
	mustStatus(t, b.do("GET", "/v1/auth/session", nil), 401, "unauthorized")
	h.client().signin("ana@example.com", "another good one")
	mustStatus(t, h.q("POST", "/v1/users/password-link", testAdminToken, map[string]any{"email": "nobody@example.com"}), 404, "not_found")
	mustStatus(t, h.q("POST", "/v1/users/password-link", "", map[string]any{"email": "ana@example.com"}), 401, "unauthorized")
	if n := h.count(`SELECT COUNT(*) FROM password_tokens WHERE token_hash = ?`, fresh); n != 0 {
		t.Errorf("a link's token is stored in the clear")
	}
}

func TestPasswordChange(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	h.addUser("ana@example.com", "viewer", "acme")
	here, there := h.client(), h.client()
	here.signin("ana@example.com", testPassword)
	there.signin("ana@example.com", testPassword)
	mustStatus(t, here.do("POST", "/v1/auth/password", map[string]any{"current_password": "wrong one!", "new_password": "a new password"}), 403, "forbidden")
	mustStatus(t, here.do("POST", "/v1/auth/password", map[string]any{"current_password": testPassword, "new_password": "short"}), 400, "invalid_password")
	mustStatus(t, here.do("POST", "/v1/auth/password", map[string]any{"current_password": testPassword, "new_password": "a new password"}), 204, "")
	mustStatus(t, here.do("GET", "/v1/sites/web", nil), 200, "")
	mustStatus(t, there.do("GET", "/v1/sites/web", nil), 401, "unauthorized")
	mustStatus(t, h.q("POST", "/v1/auth/signin", "", map[string]any{"email": "ana@example.com", "password": testPassword}), 401, "unauthorized")
	h.client().signin("ana@example.com", "a new password")
}

func TestTOTPSignin(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	h.addUser("ana@example.com", "viewer", "acme")
	b := h.client()
	b.signin("ana@example.com", testPassword)
	r := b.do("POST", "/v1/auth/totp", nil)
	mustStatus(t, r, 200, "")
	secret := r.json(t)["secret"].(string)
	if uri := r.json(t)["uri"].(string); !strings.HasPrefix(uri, "otpauth://totp/Tally:ana@example.com?") || !strings.Contains(uri, "secret="+secret) {
		t.Errorf("got uri %q, want an otpauth://totp/ URI with the secret", uri)
	}
	code := func() string {
		c, err := storage.TOTPCode(secret, h.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	mustStatus(t, b.do("POST", "/v1/auth/totp/confirm", map[string]any{"code": "000000"}), 400, "invalid_totp")
	mustStatus(t, b.do("POST", "/v1/auth/totp/confirm", map[string]any{"code": code()}), 204, "")

	creds := map[string]any{"email": "ana@example.com", "password": testPassword}
	mustStatus(t, h.q("POST", "/v1/auth/signin", "", creds), 401, "totp_required")
	creds["totp"] = code()
	mustStatus(t, h.q("POST", "/v1/auth/signin", "", creds), 400, "invalid_totp") // the step confirm used
	h.clock.Advance(30 * time.Second)
	creds["totp"] = code()
	mustStatus(t, h.q("POST", "/v1/auth/signin", "", creds), 200, "")
	mustStatus(t, h.q("POST", "/v1/auth/signin", "", creds), 400, "invalid_totp") // a replay
	creds["password"] = "wrong password"
	h.clock.Advance(30 * time.Second)
	creds["totp"] = code()
	mustStatus(t, h.q("POST", "/v1/auth/signin", "", creds), 401, "unauthorized")

	h.clock.Advance(30 * time.Second)
	mustStatus(t, b.do("POST", "/v1/auth/totp/disable", map[string]any{"password": "wrong password", "code": code()}), 403, "forbidden")
	mustStatus(t, b.do("POST", "/v1/auth/totp/disable", map[string]any{"password": testPassword, "code": code()}), 204, "")
	h.client().signin("ana@example.com", testPassword)
}

func TestInvitations(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	h.setupTenant("other", "elsewhere")
	invite := func(slug, email, role string) string {
		r := h.q("POST", "/v1/workspaces/"+slug+"/invitations", testAdminToken, map[string]any{"email": email, "role": role})
		mustStatus(t, r, 201, "")
		return r.json(t)["token"].(string)
	}
	for _, tc := range []struct {
		body map[string]any
		code string
	}{
		{map[string]any{"email": "not an address", "role": "viewer"}, "invalid_email"},
		{map[string]any{"email": "a@example.com", "role": "boss"}, "invalid_role"},
	} {
		mustStatus(t, h.q("POST", "/v1/workspaces/acme/invitations", testAdminToken, tc.body), 400, tc.code)
	}
	token := invite("acme", "bo@example.com", "viewer")
	r := h.q("GET", "/v1/workspaces/acme/invitations", testAdminToken, nil)
	mustStatus(t, r, 200, "")
	if strings.Contains(string(r.body), token) {
		t.Errorf("the invitation list shows the token: %s", r.body)
	}
	b := h.client()
	mustStatus(t, b.do("POST", "/v1/auth/invitations/accept", map[string]any{"token": token, "password": "short"}), 400, "invalid_password")
	r = b.do("POST", "/v1/auth/invitations/accept", map[string]any{"token": token, "password": testPassword})
	mustStatus(t, r, 200, "")
	b.csrf = r.json(t)["csrf_token"].(string)
	mustStatus(t, b.do("GET", "/v1/sites/web", nil), 200, "")
	mustStatus(t, h.client().do("POST", "/v1/auth/invitations/accept", map[string]any{"token": token, "password": testPassword}), 400, "invalid_token")

	// Signed in, an invitation adds the workspace to the user.
	other := invite("other", "bo@example.com", "admin")
	mustStatus(t, b.do("GET", "/v1/sites/elsewhere", nil), 404, "not_found")
	mustStatus(t, b.do("POST", "/v1/auth/invitations/accept", map[string]any{"token": other}), 200, "")
	mustStatus(t, b.do("GET", "/v1/workspaces/other/keys", nil), 200, "")

	// Expired; and an existing user's email cannot be taken by a new user.
	late := invite("acme", "cy@example.com", "viewer")
	h.clock.Advance(invitationTTL)
	mustStatus(t, h.client().do("POST", "/v1/auth/invitations/accept", map[string]any{"token": late, "password": testPassword}), 400, "invalid_token")
	taken := invite("other", "BO@example.com", "viewer")
	mustStatus(t, h.client().do("POST", "/v1/auth/invitations/accept", map[string]any{"token": taken, "password": testPassword}), 409, "email_taken")
}

func TestAccountActionsAudited(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	h.addUser("ana@example.com", "owner", "acme")
	h.q("POST", "/v1/auth/signin", "", map[string]any{"email": "ana@example.com", "password": "wrong password"})
	b := h.client()
	b.signin("ana@example.com", testPassword)
	mustStatus(t, b.do("POST", "/v1/auth/password", map[string]any{"current_password": testPassword, "new_password": "a new password"}), 204, "")
	inv := b.do("POST", "/v1/workspaces/acme/invitations", map[string]any{"email": "bo@example.com", "role": "viewer"})
	mustStatus(t, inv, 201, "")
	token := inv.json(t)["token"].(string)
	mustStatus(t, h.client().do("POST", "/v1/auth/invitations/accept", map[string]any{"token": token, "password": testPassword}), 200, "")
	mustStatus(t, b.do("POST", "/v1/auth/signout", nil), 204, "")

	want := []string{"user.create", "member.add", "session.signin_failed", "session.signin", "password.change",
		"invitation.create", "invitation.accept", "session.signout"}
	var body string
	eventually(t, "every account action in the audit log", func() bool {
		r := h.q("GET", "/v1/workspaces/acme/audit", testAdminToken, nil)
		body = string(r.body)
		for _, a := range want {
			if !strings.Contains(body, `"action":"`+a+`"`) {
				return false
			}
		}
		return true
	})
	for _, secret := range []string{testPassword, "a new password", token, b.csrf, "127.0.0.1"} {
		if strings.Contains(body, secret) {
			t.Errorf("the audit log holds %q: %s", secret, body)
		}
	}
	if !strings.Contains(body, `"actor_kind":"system"`) || !strings.Contains(body, `"actor":"user"`) {
		t.Errorf("a user's actions: got %s, want actor_kind system and metadata actor user", body)
	}
}

// TestAccountLogsHoldNoSecrets: passwords, tokens, codes and addresses of
// the account routes are never logged, failures included.
func TestAccountLogsHoldNoSecrets(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	h := newHarness(t, func(c *Config) { c.Logger = logger })
	h.setupTenant("acme", "web")
	h.addUser("ana@example.com", "owner", "acme")
	r := h.q("POST", "/v1/users/password-link", testAdminToken, map[string]any{"email": "ana@example.com"})
	mustStatus(t, r, 200, "")
	link := r.json(t)["token"].(string)
	h.q("POST", "/v1/auth/signin", "", map[string]any{"email": "ana@example.com", "password": "wrong password"})
	h.q("POST", "/v1/auth/signin", "", map[string]any{"email": "nobody@example.com", "password": "wrong password"})
	h.q("POST", "/v1/auth/password-reset", "", map[string]any{"token": link + "x", "password": "a new password"})
	b := h.client()
	b.signin("ana@example.com", testPassword)
	b.do("POST", "/v1/auth/password", map[string]any{"current_password": testPassword, "new_password": "short"})
	b.do("POST", "/v1/auth/invitations/accept", map[string]any{"token": "made-up-token"})
	logs := buf.String()
	for _, banned := range []string{testPassword, "wrong password", "a new password", link, "made-up-token", b.csrf, "127.0.0.1", "ana@example.com", "nobody@example.com"} {
		if strings.Contains(logs, banned) {
			t.Errorf("logs contain %q:\n%s", banned, logs)
		}
	}
}

// TestLastOwnerStays: a workspace keeps at least one owner.
func TestLastOwnerStays(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	ana := h.addUser("ana@example.com", "owner", "acme")
	bo := h.addUser("bo@example.com", "owner", "acme")
	mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/members/"+bo, testAdminToken, nil), 204, "")
	mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/members/"+ana, testAdminToken, nil), 409, "last_owner")
	mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/members/"+bo, testAdminToken, nil), 404, "not_found")
}

// TestRestrictedKeyCannotManageMembers: members reach every site, so a
// site-restricted admin key gets 403; an unrestricted one invites.
func TestRestrictedKeyCannotManageMembers(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	r := h.q("POST", "/v1/workspaces/acme/keys", testAdminToken, map[string]any{"label": "k", "scopes": []string{"admin"}, "sites": []string{"web"}})
	mustStatus(t, r, 201, "")
	restricted := r.json(t)["plaintext"].(string)
	inv := map[string]any{"email": "bo@example.com", "role": "viewer"}
	mustStatus(t, h.q("POST", "/v1/workspaces/acme/invitations", restricted, inv), 403, "forbidden")
	mustStatus(t, h.q("GET", "/v1/workspaces/acme/members", restricted, nil), 403, "forbidden")
	mustStatus(t, h.q("POST", "/v1/workspaces/acme/invitations", tn.adminKey, inv), 201, "")
	mustStatus(t, h.q("POST", "/v1/workspaces/acme/invitations", tn.readKey, inv), 403, "forbidden")
	mustStatus(t, h.q("POST", "/v1/users", tn.adminKey, map[string]any{"email": "x@example.com", "role": "viewer", "workspace": "acme"}), 403, "forbidden")
}
