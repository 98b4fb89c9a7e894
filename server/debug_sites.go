package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// The workspace and name of throw-away sites
// (docs/testing.md#parallel-test-suites). The name marks a site as one, so that
// the credential-less DELETE removes only what POST made, across restarts of a
// dev server on a file too; no endpoint renames a site.
const (
	devWorkspace      = "dev"
	throwAwaySiteName = "Throw-away site"
)

// throwAwayKeyLabel is the label of the key of scope made for site.
func throwAwayKeyLabel(site, scope string) string {
	return "throw-away site " + site + " " + scope
}

// throwAwayScopes are the keys a throw-away site comes with. No admin key:
// keys are workspace-wide, and one test's admin key could delete the
// other tests' sites; admin calls use the admin token.
var throwAwayScopes = []string{storage.ScopeIngestWrite, storage.ScopeQueryRead}

// devWorkspaceOf returns the dev workspace, made if the server was not
// seeded (a Server built without SeedDev).
func (s *Server) devWorkspaceOf(ctx context.Context) (*storage.Workspace, error) {
	if ws, ok := s.db.Workspace(devWorkspace); ok {
		return ws, nil
	}
	ws, err := s.db.CreateWorkspace(ctx, storage.Actor{Kind: storage.ActorSystem}, "Development", devWorkspace)
	if fault.Code(err) == fault.SlugTaken { // made meanwhile by another request
		if ws, ok := s.db.Workspace(devWorkspace); ok {
			return ws, nil
		}
	}
	return ws, err
}

// createThrowAwaySite makes a site in the dev workspace, with the id given
// or a generated one, and an ingest and a query key for it, and answers
// them as dev mode's setup answers the seeded site. Dev mode only;
// guarded as the reset is.
//
// POST /v1/debug/sites
func (s *Server) createThrowAwaySite(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if err := refuseForeignHost(r, s.cfg.DebugAnyHost); err != nil {
		return err
	}
	if err := refuseCrossSite(r); err != nil {
		return err
	}
	body, err := readBody(w, r, adminBodyLimit)
	if err != nil {
		return err
	}
	var req struct {
		ID *string `json:"id"`
	}
	if len(bytes.TrimSpace(body)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		var obj map[string]json.RawMessage
		if json.Unmarshal(body, &obj) != nil || obj == nil {
			return fault.Errorf(fault.InvalidJSON, "the body must be empty or a JSON object")
		}
		if err := dec.Decode(&req); err != nil {
			return fault.Errorf(fault.InvalidSiteID, "the body takes only id, a site id matching ^[A-Za-z0-9_-]{1,64}$")
		}
	}
	id := "t-" + randomID()
	if req.ID != nil {
		id = *req.ID
	}
	ctx := context.WithoutCancel(r.Context()) // a site half made would be left behind
	ws, err := s.devWorkspaceOf(ctx)
	if err != nil {
		return err
	}
	actor := storage.Actor{Kind: storage.ActorSystem}
	if _, err := s.db.CreateSite(ctx, actor, ws, id, throwAwaySiteName); err != nil {
		return err
	}
	answer := throwAwaySite{Workspace: ws.Slug, SiteID: id}
	for _, scope := range throwAwayScopes {
		_, plaintext, err := s.db.CreateKeyForSites(ctx, actor, ws, throwAwayKeyLabel(id, scope), []string{scope}, []string{id})
		if err != nil {
			return errors.Join(err, s.deleteThrowAwaySite(ctx, ws, id))
		}
		if scope == storage.ScopeIngestWrite {
			answer.Keys.Ingest = plaintext
		} else {
			answer.Keys.Query = plaintext
		}
	}
	writeJSON(w, http.StatusCreated, answer)
	return nil
}

// removeThrowAwaySite deletes a site made by POST /v1/debug/sites with its
// data, its keys and its pending faults; any other site is 404. Dev mode
// only.
//
// DELETE /v1/debug/sites/:siteId
func (s *Server) removeThrowAwaySite(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	if err := refuseForeignHost(r, s.cfg.DebugAnyHost); err != nil {
		return err
	}
	if err := refuseCrossOrigin(r); err != nil {
		return err
	}
	id := ps.ByName("siteId")
	site, ok := s.db.Site(id)
	ws, wsOK := s.db.Workspace(devWorkspace)
	if !ok || !wsOK || site.WorkspaceID != ws.ID || site.Name != throwAwaySiteName {
		return fault.Errorf(fault.NotFound, "no throw-away site has this id (only sites made by POST /v1/debug/sites can be deleted here)")
	}
	if err := s.deleteThrowAwaySite(context.WithoutCancel(r.Context()), ws, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// deleteThrowAwaySite revokes the site's keys first, as they would
// otherwise outlive it with access to the whole workspace, then deletes
// the site and its data, and forgets its pending faults.
func (s *Server) deleteThrowAwaySite(ctx context.Context, ws *storage.Workspace, id string) error {
	actor := storage.Actor{Kind: storage.ActorSystem}
	keys, err := s.db.Keys(ctx, ws.ID)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if k.RevokedAt != nil || !isThrowAwayKey(k.Label, id) {
			continue
		}
		if err := s.db.RevokeKey(ctx, actor, ws, k.ID); err != nil && fault.Code(err) != fault.NotFound {
			return err
		}
	}
	s.faults.clear(id, false)
	if err := s.db.DeleteSite(ctx, actor, ws, id); err != nil && fault.Code(err) != fault.NotFound {
		return err
	}
	return nil
}

// isThrowAwayKey reports whether label is that of a key made for site.
func isThrowAwayKey(label, site string) bool {
	for _, scope := range throwAwayScopes {
		if label == throwAwayKeyLabel(site, scope) {
			return true
		}
	}
	return false
}

// randomID is 12 random hex digits: a throw-away site id no parallel test
// will also draw.
func randomID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}
