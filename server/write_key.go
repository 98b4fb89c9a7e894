package server

import (
	"strings"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// writeKeyCredential resolves a Segment write key to the site it names and the credential tag
// recorded in events.credential ("site" or "key:<id>"). REQUIRE_API_KEY=none: the site id is a
// write key. tag: the site id, or an API key restricted to exactly one site with ingest:write.
// require: only such a key. Unknown or unfit: a fault (401 unauthorized / 403 forbidden).
//
// As in collectorCredential, a write key is read by what it is: in tag and
// require mode an active API key is the key, and in tag mode anything else
// is tried as a site id. Keys are found by hash and compared in constant
// time (storage.Authenticate); a site id is public (pages embed it), so
// its map lookup needs no such care. A write key the service does not know
// is 401; a real key that cannot serve as one (several or all sites, or
// no ingest:write) is 403 with a message saying what a write key must be,
// so whoever debugs an SDK's failing sends can tell the two apart
// (docs/api.md#write-keys).
func (s *Server) writeKeyCredential(writeKey string) (*storage.Site, string, error) {
	if writeKey == "" {
		return nil, "", fault.Errorf(fault.Unauthorized, "missing write key: send it as the HTTP Basic user name (empty password) or as writeKey in the body")
	}
	mode := s.cfg.RequireAPIKey
	if mode != KeyModeNone {
		if k, ok, err := s.db.Authenticate(writeKey); err != nil {
			return nil, "", err
		} else if ok {
			return s.keyWriteSite(k)
		}
	}
	site, ok := s.db.Site(writeKey)
	switch {
	case mode == KeyModeRequire:
		return nil, "", fault.Errorf(fault.Unauthorized, "unknown write key: with REQUIRE_API_KEY=require it must be an active API key restricted to one site, with the %q scope", storage.ScopeIngestWrite)
	case ok:
	case mode == KeyModeNone:
		return nil, "", fault.Errorf(fault.Unauthorized, "unknown write key: with REQUIRE_API_KEY=none the write key is a site id")
	case strings.HasPrefix(writeKey, keyPrefix):
		return nil, "", fault.Errorf(fault.Unauthorized, "unknown or revoked API key")
	default:
		return nil, "", fault.Errorf(fault.Unauthorized, "unknown write key: it must be a site id or an active API key restricted to one site")
	}
	return site, credentialSite, nil
}

// keyWriteSite resolves the one site of an API key used as a write key.
func (s *Server) keyWriteSite(k *storage.APIKey) (*storage.Site, string, error) {
	s.db.TouchKey(k)
	switch {
	case !k.Restricted():
		return nil, "", fault.Errorf(fault.Forbidden, "this API key reaches every site of its workspace; a write key must be a key restricted to exactly one site (create one with \"sites\": [\"<site id>\"])")
	case len(k.Sites) > 1:
		return nil, "", fault.Errorf(fault.Forbidden, "this API key is restricted to %d sites; a write key must be a key restricted to exactly one site", len(k.Sites))
	case len(k.Sites) == 0:
		return nil, "", fault.Errorf(fault.Unauthorized, "the site of this write key has been deleted")
	}
	site, ok := s.db.Site(k.Sites[0])
	if !ok || site.WorkspaceID != k.WorkspaceID {
		return nil, "", fault.Errorf(fault.Unauthorized, "the site of this write key has been deleted")
	}
	if !k.HasScope(storage.ScopeIngestWrite) {
		return nil, "", fault.Errorf(fault.Forbidden, "this API key lacks the %q scope a write key needs", storage.ScopeIngestWrite)
	}
	return site, "key:" + k.ID, nil
}
