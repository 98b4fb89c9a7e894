package server

import (
	"context"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// authBodyLimit bounds the bodies of the account routes.
const authBodyLimit = 16 << 10

// errBadSignin is the one answer to a wrong email or password: an unknown
// email gets it too, in the same time (storage.CheckPassword), so that
// accounts cannot be enumerated.
var errBadSignin = fault.Errorf(fault.Unauthorized, "wrong email or password")

// signin takes {email, password, totp?}, and on success starts a new
// session: a new random id in an HttpOnly cookie, and 200 with the
// session's answer (its CSRF token included).
//
// POST /v1/auth/signin
func (s *Server) signin(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if !sameOrigin(r, false) {
		return errCrossOrigin
	}
	body, err := decodeObject(w, r, authBodyLimit)
	if err != nil {
		return err
	}
	email, err := body.str("email", fault.InvalidEmail)
	if err != nil {
		return err
	}
	password, err := body.str("password", fault.InvalidPassword)
	if err != nil {
		return err
	}
	code := ""
	if body.has("totp") {
		if code, err = body.str("totp", fault.InvalidTOTP); err != nil {
			return err
		}
	}
	account := strings.ToLower(strings.TrimSpace(email))
	client := s.clientOf(r)
	if wait := s.signins.wait(account, client); wait > 0 {
		return throttled(wait)
	}
	u, found, err := s.db.UserByEmail(r.Context(), email)
	if err != nil {
		return err
	}
	if !found {
		u = nil
	}
	if !storage.CheckPassword(u, password) {
		s.signins.fail(account, client)
		s.auditFailure(u, "password")
		return errBadSignin
	}
	if u.TOTPEnabled {
		if code == "" {
			return fault.Errorf(fault.TOTPRequired, "this account asks for a two-factor code: send the current one of your authenticator app as totp")
		}
		if err := s.db.CheckTOTP(r.Context(), u, strings.TrimSpace(code)); err != nil {
			if fault.Code(err) == fault.InvalidTOTP {
				s.signins.fail(account, client)
				s.auditFailure(u, "totp")
			}
			return err
		}
	}
	s.signins.succeed(account)
	sess, token, err := s.db.CreateSession(r.Context(), u, s.limits())
	if err != nil {
		return err
	}
	s.setSessionCookie(w, token)
	ans, err := s.sessionAnswerOf(r.Context(), &signedIn{user: u, session: sess, token: token})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ans)
	return nil
}

// auditFailure records a failed sign-in of a known user off the request's
// path: the answer must take as long as an unknown email's, which writes
// nothing.
func (s *Server) auditFailure(u *storage.User, reason string) {
	if u == nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.db.AuditSigninFailed(ctx, u, reason); err != nil {
			s.log.Warn("audit a failed sign-in", "err", err.Error())
		}
	}()
}

// throttled is the 429 of a throttled sign-in.
func throttled(wait time.Duration) error {
	e := fault.Errorf(fault.RateLimited, "too many failed sign-ins for this account or from this client: wait %d seconds", int(math.Ceil(wait.Seconds())))
	e.RetryAfter = int(math.Ceil(wait.Seconds()))
	return e
}

// clientOf is a sign-in's client as the throttle keys it: its address, as
// GeoIP reads it (a trusted proxy's header, or the peer), which the
// throttle only ever holds hashed.
func (s *Server) clientOf(r *http.Request) string {
	if a, ok := s.locator.ClientAddr(r); ok {
		return a.String()
	}
	return r.RemoteAddr
}

// sessionAnswerOf is the answer describing si: the user, its workspaces
// with their sites, the session and its CSRF token.
func (s *Server) sessionAnswerOf(ctx context.Context, si *signedIn) (sessionAnswer, error) {
	ms, err := s.db.Memberships(ctx, si.user.ID)
	if err != nil {
		return sessionAnswer{}, err
	}
	ans := sessionAnswer{User: accountUserOf(si.user), Workspaces: []accountWorkspace{},
		Session: sessionInfoOf(si.session, si.session.ID), CSRFToken: csrfToken(si.token)}
	for _, m := range ms {
		sites, err := s.db.Sites(ctx, m.WorkspaceID)
		if err != nil {
			return sessionAnswer{}, err
		}
		aw := accountWorkspace{ID: m.WorkspaceID, Slug: m.Slug, Name: m.Name, Role: m.Role, Sites: []accountSite{}}
		for _, site := range sites {
			aw.Sites = append(aw.Sites, accountSite{ID: site.ID, Name: site.Name})
		}
		ans.Workspaces = append(ans.Workspaces, aw)
	}
	return ans, nil
}

// session authenticates a request that must come with a session cookie
// (the account routes): 401 without one. State-changing requests pass the
// CSRF checks.
func (s *Server) session(r *http.Request) (*signedIn, error) {
	cookie := s.sessionCookie(r)
	if cookie == "" {
		return nil, fault.Errorf(fault.Unauthorized, "not signed in: sign in with POST /v1/auth/signin")
	}
	p, err := s.sessionPrincipal(r, cookie)
	if err != nil {
		return nil, err
	}
	return p.session, nil
}

// getSession answers who is signed in (the dashboard asks at start).
//
// GET /v1/auth/session
func (s *Server) getSession(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	si, err := s.session(r)
	if err != nil {
		return err
	}
	ans, err := s.sessionAnswerOf(r.Context(), si)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ans)
	return nil
}

// signout ends the request's session and drops its cookie; 204.
//
// POST /v1/auth/signout
func (s *Server) signout(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	si, err := s.session(r)
	if err != nil {
		return err
	}
	if err := s.db.RevokeSession(r.Context(), si.user.ID, si.session.ID, "session.signout"); err != nil {
		return err
	}
	s.clearSessionCookie(w)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// listSessions answers the signed-in user's live sessions, newest first.
//
// GET /v1/auth/sessions
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	si, err := s.session(r)
	if err != nil {
		return err
	}
	list, err := s.db.UserSessions(r.Context(), si.user.ID, s.limits())
	if err != nil {
		return err
	}
	out := sessionList{Sessions: []sessionInfo{}}
	for i := range list {
		out.Sessions = append(out.Sessions, sessionInfoOf(&list[i], si.session.ID))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// revokeSession ends one of the user's sessions (the current one too,
// whose cookie it drops); 204, and 404 for one of someone else's or one
// ended.
//
// DELETE /v1/auth/sessions/:id
func (s *Server) revokeSession(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	si, err := s.session(r)
	if err != nil {
		return err
	}
	id := ps.ByName("id")
	if err := s.db.RevokeSession(r.Context(), si.user.ID, id, "session.revoke"); err != nil {
		return err
	}
	if id == si.session.ID {
		s.clearSessionCookie(w)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// accountRoutes are the routes of users and sessions (docs/accounts.md).
func (s *Server) accountRoutes(rt *router) {
	rt.handleV1(http.MethodPost, "/auth/signin", s.signin)
	rt.handleV1(http.MethodPost, "/auth/signout", s.signout)
	rt.handleV1(http.MethodGet, "/auth/session", s.getSession)
	rt.handleV1(http.MethodGet, "/auth/sessions", s.listSessions)
	rt.handleV1(http.MethodDelete, "/auth/sessions/:id", s.revokeSession)
	rt.handleV1(http.MethodPost, "/auth/password", s.changePassword)
	rt.handleV1(http.MethodPost, "/auth/password-reset", s.resetPassword)
	rt.handleV1(http.MethodPost, "/auth/totp", s.enrolTOTP)
	rt.handleV1(http.MethodPost, "/auth/totp/confirm", s.confirmTOTP)
	rt.handleV1(http.MethodPost, "/auth/totp/disable", s.disableTOTP)
	rt.handleV1(http.MethodPost, "/auth/invitations/accept", s.acceptInvitation)
	rt.handleV1(http.MethodPost, "/users", s.createUser)
	rt.handleV1(http.MethodPost, "/users/password-link", s.createPasswordLink)
}
