package server

import (
	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// writeKeyCredential resolves a Segment write key to the site it names and the credential tag
// recorded in events.credential ("site" or "key:<id>"). REQUIRE_API_KEY=none: the site id is a
// write key. tag: the site id, or an API key restricted to exactly one site with ingest:write.
// require: only such a key. Unknown or unfit: a fault (401 unauthorized / 403 forbidden).
func (s *Server) writeKeyCredential(writeKey string) (*storage.Site, string, error) {
	// Only the site-id form lives here; API keys restricted to one site
	// come with the write-key restriction of keys (README "Segment-compatible
	// intake").
	site, ok := s.db.Site(writeKey)
	if !ok || writeKey == "" {
		return nil, "", fault.Errorf(fault.Unauthorized, "unknown write key")
	}
	return site, credentialSite, nil
}
