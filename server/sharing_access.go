package server

import (
	"net/http"
	"strings"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// A shared link as a credential (docs/sharing.md#what-a-link-reads): the
// dashboard opened at /share/<token> sends the token in shareHeader (and,
// for a link with a password, the link's cookie). Such a request may only
// reach the routes of sharedLinkRoutes, an allow-list checked by the
// query router's gate before any handler runs: every other route, one
// added later included, answers the ordinary 404, as for a foreign
// tenant. On the routes it may reach, the link is a principal that reads
// its one site with the query:read scope (any other site is that same
// 404).

// shareHeader carries a shared link's token.
const shareHeader = "X-Tally-Share"

// sharedLinkRoutes are the routes a shared link may reach, "METHOD
// pattern" with the /v1 prefix removed: the site's report reads, the
// share page and its password form, and what the page asks first.
var sharedLinkRoutes = map[string]bool{
	"GET /share/:token":             true,
	"POST /share/:token/auth":       true,
	"GET /share":                    true,
	"GET /sites/:siteId":            true,
	"POST /sites/:siteId/query":     true,
	"POST /api/v2/query":            true,
	"GET /sites/:siteId/breakdown":  true,
	"GET /sites/:siteId/realtime":   true,
	"GET /sites/:siteId/properties": true,
	"GET /sites/:siteId/pageviews":  true,
	"GET /sites/:siteId/events":     true,
	"POST /sites/:siteId/funnel":    true,
	"GET /sites/:siteId/goals":      true,
	"GET /sites/:siteId/segments":   true,
	"GET /ui/*filepath":             true,
}

// sharedLinkAllows reports whether a shared link may reach method pattern.
func sharedLinkAllows(method, pattern string) bool {
	return sharedLinkRoutes[method+" "+strings.TrimPrefix(pattern, "/v1")]
}

// shareGate is the query router's gate: a request carrying a shared
// link's token reaches only the allow-listed routes.
func (s *Server) shareGate(r *http.Request, pattern string) error {
	if _, ok := r.Header[http.CanonicalHeaderKey(shareHeader)]; ok && !sharedLinkAllows(r.Method, pattern) {
		return errNotFound
	}
	return nil
}

// shareToken is the token r carries in shareHeader ("" for none).
func shareToken(r *http.Request) (string, bool) {
	v, ok := r.Header[http.CanonicalHeaderKey(shareHeader)]
	if !ok {
		return "", false
	}
	if len(v) == 0 {
		return "", true
	}
	return strings.TrimSpace(v[0]), true
}

var errSharePassword = fault.Errorf(fault.SharedLinkPassword, "this shared link asks for its password: send it to POST /share/<token>/auth")

// sharePrincipal authenticates a request by its shared link: the ordinary
// 404 for a token unknown or revoked (or a site gone), 401
// shared_link_password without the cookie of a password given. The
// principal reads the link's site with the query:read scope, as a key
// restricted to it would.
func (s *Server) sharePrincipal(r *http.Request, token string) (principal, error) {
	l, ok, err := s.db.SharedLinkByToken(r.Context(), token)
	if err != nil {
		return principal{}, err
	}
	if !ok {
		return principal{}, errNotFound
	}
	site, ok := s.db.Site(l.SiteID)
	if !ok {
		return principal{}, errNotFound
	}
	if l.HasPassword && !s.shareUnlocked(r, l) {
		return principal{}, errSharePassword
	}
	key := &storage.APIKey{WorkspaceID: site.WorkspaceID, Label: "shared link", Scopes: []string{storage.ScopeQueryRead}, Sites: []string{site.ID}}
	return principal{key: key, share: l}, nil
}
