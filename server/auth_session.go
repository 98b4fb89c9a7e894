package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"time"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// Session lifetimes by default (docs/accounts.md#sessions): a session ends
// after DefaultSessionIdle without a request, and DefaultSessionMaxAge
// after its sign-in whatever its use.
const (
	DefaultSessionIdle   = 24 * time.Hour
	DefaultSessionMaxAge = 14 * 24 * time.Hour
)

// Names of the session cookie: with HTTPS the __Host- prefix, which a
// browser takes only Secure, for the whole host and from no subdomain.
const (
	sessionCookieName       = "tally_session"
	secureSessionCookieName = "__Host-tally_session"
)

// csrfHeader carries a session's CSRF token on state-changing requests.
const csrfHeader = "X-CSRF-Token"

// signedIn is a user's session behind a request.
type signedIn struct {
	user    *storage.User
	session *storage.UserSession
	token   string            // the cookie's value, for the CSRF token
	roles   map[string]string // workspace id -> role
}

// in narrows p to workspace id: for a signed-in user, key becomes the
// user's role there (ok false when it has none, which callers answer with
// the ordinary 404). The admin token and keys pass unchanged.
func (p principal) in(workspaceID string) (principal, bool) {
	if p.session == nil {
		return p, true
	}
	role, ok := p.session.roles[workspaceID]
	if !ok {
		return p, false
	}
	p.key = &storage.APIKey{WorkspaceID: workspaceID, Label: "role " + role, Scopes: storage.RoleScopes(role)}
	return p, true
}

// role is p's role in workspace id ("" for none, the admin token and keys).
func (p principal) role(workspaceID string) string {
	if p.session == nil {
		return ""
	}
	return p.session.roles[workspaceID]
}

func (s *Server) cookieName() string {
	if s.cfg.SecureCookies {
		return secureSessionCookieName
	}
	return sessionCookieName
}

// sessionCookie is the value of r's session cookie ("" for none).
func (s *Server) sessionCookie(r *http.Request) string {
	c, err := r.Cookie(s.cookieName())
	if err != nil {
		return ""
	}
	return c.Value
}

// limits are the sessions' lifetimes.
func (s *Server) limits() storage.SessionLimits {
	return storage.SessionLimits{Idle: s.cfg.SessionIdle, Absolute: s.cfg.SessionMaxAge}
}

var errSessionEnded = fault.Errorf(fault.Unauthorized, "your session has ended (signed out, expired or revoked): sign in again")

// sessionPrincipal authenticates a request by its session cookie: 401 for
// a session unknown, revoked or expired. A state-changing request must
// also pass the CSRF checks (checkCSRF).
func (s *Server) sessionPrincipal(r *http.Request, cookie string) (principal, error) {
	si, err := s.signedIn(r, cookie)
	if err != nil {
		return principal{}, err
	}
	if unsafeMethod(r.Method) {
		if err := checkCSRF(r, cookie); err != nil {
			return principal{}, err
		}
	}
	return principal{session: si}, nil
}

// signedIn reads the session and user behind cookie, and records its use.
func (s *Server) signedIn(r *http.Request, cookie string) (*signedIn, error) {
	ctx := r.Context()
	sess, ok, err := s.db.SessionByToken(ctx, cookie, s.limits())
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errSessionEnded
	}
	u, ok, err := s.db.UserByID(ctx, sess.UserID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errSessionEnded
	}
	ms, err := s.db.Memberships(ctx, u.ID)
	if err != nil {
		return nil, err
	}
	roles := make(map[string]string, len(ms))
	for _, m := range ms {
		roles[m.WorkspaceID] = m.Role
	}
	if err := s.db.TouchSession(ctx, sess); err != nil {
		return nil, err
	}
	return &signedIn{user: u, session: sess, token: cookie, roles: roles}, nil
}

// unsafeMethod reports whether method may change state: all but GET,
// HEAD and OPTIONS.
func unsafeMethod(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}

// csrfToken is the CSRF token of a session: derived from the cookie's
// secret value, which a page of another origin can neither read nor
// compute, and given to the dashboard in the sign-in's answer and
// GET /v1/auth/session (a synchronizer token that needs no storage).
func csrfToken(cookie string) string {
	sum := sha256.Sum256([]byte("tally csrf\x00" + cookie))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

var (
	errCrossOrigin = fault.Errorf(fault.Forbidden, "cross-origin request refused: a request made with a session cookie must come from the dashboard's own origin")
	errNoCSRF      = fault.Errorf(fault.Forbidden, "missing or wrong X-CSRF-Token header: a state-changing request made with a session cookie must send the session's CSRF token (or use a bearer instead)")
)

// checkCSRF is the double check of a state-changing request made with a
// session cookie: it comes from the same origin (Sec-Fetch-Site, or
// Origin, at least one of which every current browser sends), and it
// carries the session's CSRF token.
func checkCSRF(r *http.Request, cookie string) error {
	if !sameOrigin(r, true) {
		return errCrossOrigin
	}
	got, want := r.Header.Get(csrfHeader), csrfToken(cookie)
	if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return errNoCSRF
	}
	return nil
}

// sameOrigin reports whether r says it comes from its own origin:
// Sec-Fetch-Site same-origin, and an Origin whose host is r's Host. When
// neither header is there, it is strict's answer: false for requests
// made with a session (a browser sends one), true for a sign-in (a
// client that is no browser sends neither).
func sameOrigin(r *http.Request, strict bool) bool {
	site := r.Header.Get("Sec-Fetch-Site")
	origin := r.Header.Get("Origin")
	if site == "" && origin == "" {
		return !strict
	}
	if site != "" && site != "same-origin" {
		return false
	}
	if origin != "" {
		u, err := url.Parse(origin)
		if err != nil || u.Host == "" || u.Host != r.Host {
			return false
		}
	}
	return true
}

// setSessionCookie gives the browser a new session's cookie: HttpOnly (no
// script reads it), SameSite=Lax, Secure under HTTPS, for the whole host,
// kept no longer than the session's absolute lifetime.
func (s *Server) setSessionCookie(w http.ResponseWriter, token string) {
	http.SetCookie(w, &http.Cookie{Name: s.cookieName(), Value: token, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: s.cfg.SecureCookies, MaxAge: int(s.cfg.SessionMaxAge / time.Second)})
}

// clearSessionCookie has the browser drop the session cookie.
func (s *Server) clearSessionCookie(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: s.cookieName(), Value: "", Path: "/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: s.cfg.SecureCookies, MaxAge: -1})
}
