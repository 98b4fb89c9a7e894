package server

import (
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// The shared view (docs/sharing.md): GET /share/<token> is the dashboard
// in its shared mode (app.js reads the token from its path), and a link
// with a password is unlocked by POST /share/<token>/auth, which sets a
// cookie of that link's own.

// shareCookieTTL is how long a link's password, once given, is remembered
// by the browser.
const shareCookieTTL = 24 * time.Hour

// shareCookieName is the cookie of link id: one per link, so that
// unlocking one link unlocks no other; with HTTPS under the __Host-
// prefix, Secure and for the whole host only.
func (s *Server) shareCookieName(id string) string {
	name := "tally_share_" + strings.ReplaceAll(id, "-", "")
	if s.cfg.SecureCookies {
		return "__Host-" + name
	}
	return name
}

// shareCookieValue is the proof that l's password was given, until
// expires: "<unix seconds>.<MAC>", the MAC keyed by the password's stored
// hash (storage.SharedLink.PasswordProof), so any instance checks it and
// a new password voids it.
func shareCookieValue(l *storage.SharedLink, expires time.Time) string {
	exp := strconv.FormatInt(expires.Unix(), 10)
	return exp + "." + base64.RawURLEncoding.EncodeToString(l.PasswordProof(exp))
}

// shareUnlocked reports whether r carries a live proof of l's password.
func (s *Server) shareUnlocked(r *http.Request, l *storage.SharedLink) bool {
	c, err := r.Cookie(s.shareCookieName(l.ID))
	if err != nil {
		return false
	}
	exp, mac, ok := strings.Cut(c.Value, ".")
	if !ok {
		return false
	}
	secs, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || !s.now().Before(time.Unix(secs, 0)) {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(mac)
	want := l.PasswordProof(exp)
	return err == nil && want != nil && subtle.ConstantTimeCompare(got, want) == 1
}

// setShareCookie gives the browser the proof of l's password. HttpOnly,
// for the whole host (the dashboard's reads go to /v1/...). A link that
// may be framed by other origins needs SameSite=None for the cookie to
// reach the frame, which browsers take only with Secure: so under HTTPS
// it is None, Secure and Partitioned (CHIPS, kept per embedding site);
// over plain HTTP it stays Lax, and a framed link with a password works
// only on the dashboard's own site (docs/sharing.md#embedding).
func (s *Server) setShareCookie(w http.ResponseWriter, l *storage.SharedLink) {
	expires := s.now().Add(shareCookieTTL)
	c := &http.Cookie{Name: s.shareCookieName(l.ID), Value: shareCookieValue(l, expires), Path: "/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: s.cfg.SecureCookies, MaxAge: int(shareCookieTTL / time.Second)}
	if s.cfg.SecureCookies && len(l.AllowedOrigins) > 0 {
		c.SameSite, c.Partitioned = http.SameSiteNoneMode, true
	}
	http.SetCookie(w, c)
}

// frameAncestors is the CSP frame-ancestors source list of a page that
// origins may frame ('none' for no origin).
func frameAncestors(origins []string) string {
	if len(origins) == 0 {
		return "'none'"
	}
	return strings.Join(origins, " ")
}

// sharePage serves the dashboard for a shared link: the ordinary 404 for
// a token unknown or revoked. The page may be framed only by the link's
// allowed origins (none: frame-ancestors 'none' and X-Frame-Options
// DENY), and sends no Referer, so the token in its address leaves with no
// link clicked on it.
//
// GET /share/:token (query API)
func (s *Server) sharePage(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	l, ok, err := s.db.SharedLinkByToken(r.Context(), ps.ByName("token"))
	if err != nil {
		return err
	}
	if !ok {
		return errNotFound
	}
	w.Header().Set("Referrer-Policy", "no-referrer")
	return serveDashboardFile(w, r, "index.html", frameAncestors(l.AllowedOrigins))
}

// shareAuth takes {password} for a link that has one, and on the right
// one sets the link's cookie (204). Failures are throttled as sign-ins
// are (per link and per client); the check costs one argon2id hash
// whatever the answer.
//
// POST /share/:token/auth (query API)
func (s *Server) shareAuth(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	if !sameOrigin(r, false) {
		return errCrossOrigin
	}
	l, ok, err := s.db.SharedLinkByToken(r.Context(), ps.ByName("token"))
	if err != nil {
		return err
	}
	if !ok {
		return errNotFound
	}
	body, err := decodeObject(w, r, authBodyLimit)
	if err != nil {
		return err
	}
	password, err := body.str("password", fault.InvalidPassword)
	if err != nil {
		return err
	}
	if !l.HasPassword {
		w.WriteHeader(http.StatusNoContent) // nothing to unlock
		return nil
	}
	account, client := "shared link "+l.ID, s.clientOf(r)
	if wait := s.signins.wait(account, client); wait > 0 {
		return throttled(wait)
	}
	if !storage.CheckSharedLinkPassword(l, password) {
		s.signins.fail(account, client)
		return fault.Errorf(fault.SharedLinkPassword, "wrong password for this shared link")
	}
	s.signins.succeed(account)
	s.setShareCookie(w, l)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// shareInfo answers what the shared dashboard needs first: whether the
// link asks for a password and has it, and then its site (id, name, time
// zone only). The ordinary 404 for a token unknown or revoked.
//
// GET /v1/share (with X-Tally-Share)
func (s *Server) shareInfo(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	token, _ := shareToken(r)
	l, ok, err := s.db.SharedLinkByToken(r.Context(), token)
	if err != nil {
		return err
	}
	if !ok {
		return errNotFound
	}
	ans := shareAnswer{PasswordRequired: l.HasPassword, Unlocked: !l.HasPassword || s.shareUnlocked(r, l)}
	if ans.Unlocked {
		if site, ok := s.db.Site(l.SiteID); ok {
			b := sharedSiteOf(site)
			ans.Site = &b
		}
	}
	writeJSON(w, http.StatusOK, ans)
	return nil
}

// shareRoutes are the routes of shared links: the view's, and the site
// settings' (sharing_links.go).
func (s *Server) shareRoutes(rt *router) {
	rt.route(http.MethodGet, "/share/:token", s.sharePage)
	rt.route(http.MethodPost, "/share/:token/auth", s.shareAuth)
	rt.handleV1(http.MethodGet, "/share", s.shareInfo)
	rt.handleV1(http.MethodGet, "/sites/:siteId/shared-links", s.listSharedLinks)
	rt.handleV1(http.MethodPost, "/sites/:siteId/shared-links", s.createSharedLink)
	rt.handleV1(http.MethodPatch, "/sites/:siteId/shared-links/:linkId", s.updateSharedLink)
	rt.handleV1(http.MethodDelete, "/sites/:siteId/shared-links/:linkId", s.revokeSharedLink)
}
