package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// adminToken compares bearers with the operator token in constant time.
// Both sides are hashed first so the comparison does not even leak length.
type adminToken struct {
	set  bool
	hash [32]byte
}

func newAdminToken(token string) adminToken {
	return adminToken{set: token != "", hash: sha256.Sum256([]byte(token))}
}

func (a adminToken) matches(bearer string) bool {
	h := sha256.Sum256([]byte(bearer))
	return a.set && subtle.ConstantTimeCompare(a.hash[:], h[:]) == 1
}

// bearer returns the token of an "Authorization: Bearer <token>" header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// principal is the authenticated caller of the query API: the operator
// (admin token), an API key, or a signed-in user (a session cookie).
// Once a user's request has named a workspace, key stands for the user's
// role there: a key of that workspace with the role's scopes
// (storage.RoleScopes), so that every scope rule of keys applies.
type principal struct {
	admin bool
	key   *storage.APIKey
	// session is set for a signed-in user (auth_session.go).
	session *signedIn
	// share is set for a shared link (sharing_access.go); key is then a
	// query:read key restricted to the link's site.
	share *storage.SharedLink
}

// actor is the audit log's view of p.
func (p principal) actor() storage.Actor {
	if p.share != nil {
		// A link writes nothing; as a viewer it owns no personal segment.
		return storage.Actor{Kind: "shared_link", ID: p.share.ID}
	}
	if p.session != nil {
		return storage.UserActor(p.session.user.ID)
	}
	if p.admin {
		return storage.Actor{Kind: storage.ActorAdmin}
	}
	return storage.Actor{Kind: storage.ActorAPIKey, ID: p.key.ID}
}

var errUnauthorized = fault.Errorf(fault.Unauthorized, "missing or invalid credential: send Authorization: Bearer <admin token or API key>")

// authenticate identifies the caller of a query API request: 401 for a
// missing, unknown or revoked credential.
func (s *Server) authenticate(r *http.Request) (principal, error) {
	// A shared link's token wins over any other credential sent with it:
	// the request is the link's, and reaches only what a link may
	// (sharing_access.go).
	if share, ok := shareToken(r); ok {
		return s.sharePrincipal(r, share)
	}
	token, ok := bearer(r)
	if !ok {
		// Without a bearer, a session cookie (docs/accounts.md#sessions).
		if cookie := s.sessionCookie(r); cookie != "" {
			return s.sessionPrincipal(r, cookie)
		}
		return principal{}, errUnauthorized
	}
	if s.admin.matches(token) {
		return principal{admin: true}, nil
	}
	k, ok, err := s.db.Authenticate(token)
	switch {
	case err != nil:
		return principal{}, err
	case ok:
		s.db.TouchKey(k)
		return principal{key: k}, nil
	}
	return principal{}, errUnauthorized
}

// Access levels of query API routes: the admin token only, or the admin
// token or a key holding the named scope.
const adminTokenOnly = ""

var errNotFound = fault.Errorf(fault.NotFound, "not found")

// workspace authenticates the caller and resolves the :slug workspace. A key
// addressing another workspace gets the ordinary 404, so workspaces cannot
// be probed; a key in its own workspace without the scope gets 403.
func (s *Server) workspace(r *http.Request, slug, scope string) (principal, *storage.Workspace, error) {
	p, err := s.authenticate(r)
	if err != nil {
		return p, nil, err
	}
	if p.share != nil {
		return p, nil, errNotFound // a link reads one site, never a workspace
	}
	ws, ok := s.db.Workspace(slug)
	if ok {
		p, ok = p.in(ws.ID)
	}
	if !ok || (!p.admin && p.key.WorkspaceID != ws.ID) {
		return p, nil, errNotFound
	}
	if err := p.require(scope); err != nil {
		return p, nil, err
	}
	if !p.admin && p.key.Restricted() && len(p.key.Sites) == 0 {
		return p, nil, errNoSitesLeft
	}
	return p, ws, nil
}

// errNoSitesLeft answers a key restricted to sites that have all been
// deleted: it can do nothing (docs/api.md#authentication).
var errNoSitesLeft = fault.Errorf(fault.Forbidden, "this key was restricted to sites that have all been deleted, so it can do nothing; revoke it")

// site authenticates the caller and resolves the :siteId site, with the
// same 404-before-403 rule as workspace. A site outside a key's site
// restriction is that same 404.
func (s *Server) site(r *http.Request, siteID, scope string) (principal, *storage.Site, error) {
	p, err := s.authenticate(r)
	if err != nil {
		return p, nil, err
	}
	site, ok := s.db.Site(siteID)
	if ok {
		p, ok = p.in(site.WorkspaceID)
	}
	if !ok || (!p.admin && (p.key.WorkspaceID != site.WorkspaceID || !p.key.AllowsSite(site.ID))) {
		return p, nil, errNotFound
	}
	if err := p.require(scope); err != nil {
		return p, nil, err
	}
	return p, site, nil
}

// require checks p against an access level.
func (p principal) require(scope string) error {
	switch {
	case p.admin:
		return nil
	case scope == adminTokenOnly:
		return fault.Errorf(fault.Forbidden, "this endpoint needs the admin token")
	case p.session != nil && !p.key.HasScope(scope):
		return fault.Errorf(fault.Forbidden, "your role in this workspace does not allow this (it needs the %q scope: an admin's or owner's)", scope)
	case !p.key.HasScope(scope):
		return fault.Errorf(fault.Forbidden, "this key lacks the %q scope", scope)
	}
	return nil
}

// requireAdminToken authenticates a caller who must hold the admin token.
func (s *Server) requireAdminToken(r *http.Request) (principal, error) {
	p, err := s.authenticate(r)
	if err != nil {
		return p, err
	}
	return p, p.require(adminTokenOnly)
}
