package server

import (
	"net/http"
	"strings"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// credentialSite is "site" in events.credential: the legacy site bearer.
const credentialSite = "site"

// credentialInternal is "internal" in events.credential: re-posted by this
// process (DLQ replay or a webhook adapter).
const credentialInternal = "internal"

// keyPrefix starts every API key's plaintext (sk_<slug>_<secret>).
const keyPrefix = "sk_"

// collectorCredential authenticates an intake request under REQUIRE_API_KEY
// and returns the site it may write to and the credential to record:
//
//   - none: only "Bearer <site_id>";
//   - tag: that, or "Bearer <api key>" with "X-Site-Id: <site_id>";
//   - require: only the API key form.
//
// A bearer is read by what it is, not by how it starts: the internal
// bearer contains a character no site id may hold, and a bearer that is
// not an active key is tried as a site id, so every valid site id, even
// one starting "sk_" or "internal_", can ingest with its own bearer.
//
// A key needs ingest:write (admin also satisfies it). An unknown site, a
// site of another workspace or outside the key's site restriction, and a
// revoked key are all 401 unauthorized, so nothing about other tenants can
// be learned here.
func (s *Server) collectorCredential(r *http.Request) (*storage.Site, string, error) {
	token, ok := bearer(r)
	if !ok {
		return nil, "", fault.Errorf(fault.Unauthorized, "missing credential: send Authorization: Bearer <site id or API key>")
	}
	mode := s.cfg.RequireAPIKey
	if strings.HasPrefix(token, internalPrefix) {
		// This process re-posting events (DLQ replay, webhooks): any mode.
		site, ok := s.db.Site(r.Header.Get("X-Site-Id"))
		if !s.internal.matches(token) || !ok {
			return nil, "", fault.Errorf(fault.Unauthorized, "invalid internal credential")
		}
		return site, credentialInternal, nil
	}
	if mode != KeyModeNone {
		if k, ok, err := s.db.Authenticate(token); err != nil {
			return nil, "", err
		} else if ok {
			return s.keySite(r, k)
		}
		if mode == KeyModeRequire {
			if strings.HasPrefix(token, keyPrefix) {
				return nil, "", fault.Errorf(fault.Unauthorized, "unknown or revoked API key")
			}
			return nil, "", fault.Errorf(fault.Unauthorized, "this collector requires an API key with the ingest:write scope and an X-Site-Id header")
		}
	}
	site, ok := s.db.Site(token)
	if !ok {
		if mode == KeyModeTag && strings.HasPrefix(token, keyPrefix) {
			return nil, "", fault.Errorf(fault.Unauthorized, "unknown or revoked API key")
		}
		return nil, "", fault.Errorf(fault.Unauthorized, "unknown site")
	}
	return site, credentialSite, nil
}

// keySite resolves the X-Site-Id of a request authenticated with key k.
func (s *Server) keySite(r *http.Request, k *storage.APIKey) (*storage.Site, string, error) {
	s.db.TouchKey(k)
	siteID := r.Header.Get("X-Site-Id")
	if siteID == "" {
		return nil, "", fault.Errorf(fault.Unauthorized, "an API key must come with an X-Site-Id header naming the site")
	}
	site, ok := s.db.Site(siteID)
	if !ok || site.WorkspaceID != k.WorkspaceID || !k.AllowsSite(site.ID) {
		return nil, "", fault.Errorf(fault.Unauthorized, "this key cannot write to that site")
	}
	if !k.HasScope(storage.ScopeIngestWrite) {
		return nil, "", fault.Errorf(fault.Forbidden, "this key lacks the %q scope", storage.ScopeIngestWrite)
	}
	return site, "key:" + k.ID, nil
}
