package server

import (
	"encoding/json"
	"net/http"
	"slices"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// listWorkspaces answers {"workspaces": [...]}.
//
// GET /workspaces
func (s *Server) listWorkspaces(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if _, err := s.requireAdminToken(r); err != nil {
		return err
	}
	list, err := s.db.Workspaces(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, workspaceList{Workspaces: rowsOf(list, workspaceOf)})
	return nil
}

// createWorkspace takes {name, slug} and answers 201 with the workspace.
//
// POST /workspaces
func (s *Server) createWorkspace(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p, err := s.requireAdminToken(r)
	if err != nil {
		return err
	}
	body, err := decodeObject(w, r, adminBodyLimit)
	if err != nil {
		return err
	}
	name, err := body.str("name", fault.InvalidName)
	if err != nil {
		return err
	}
	slug, err := body.str("slug", fault.InvalidSlug)
	if err != nil {
		return err
	}
	ws, err := s.db.CreateWorkspace(r.Context(), p.actor(), name, slug)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, workspaceOf(ws))
	return nil
}

// getWorkspace answers the workspace.
//
// GET /workspaces/:slug
func (s *Server) getWorkspace(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	_, ws, err := s.workspace(r, ps.ByName("slug"), adminTokenOnly)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, workspaceOf(ws))
	return nil
}

// updateWorkspace takes {name} and answers 200 with the workspace; a slug
// in the body is 400 slug_immutable.
//
// PATCH /workspaces/:slug
func (s *Server) updateWorkspace(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, ws, err := s.workspace(r, ps.ByName("slug"), adminTokenOnly)
	if err != nil {
		return err
	}
	body, err := decodeObject(w, r, adminBodyLimit)
	if err != nil {
		return err
	}
	if body.has("slug") {
		return fault.Errorf(fault.SlugImmutable, "the slug of a workspace cannot be changed")
	}
	name, err := body.str("name", fault.InvalidName)
	if err != nil {
		return err
	}
	ws, err = s.db.UpdateWorkspace(r.Context(), p.actor(), ws, name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, workspaceOf(ws))
	return nil
}

// siteManager authenticates a caller who lists, creates or deletes the
// sites of workspace slug: the admin token, as SPEC says, or a signed-in
// owner of the workspace (docs/accounts.md#roles). An admin's session and
// every API key, admin-scoped or not, get 403 as before; a workspace the
// caller is not in is the ordinary 404.
func (s *Server) siteManager(r *http.Request, slug string) (principal, *storage.Workspace, error) {
	p, ws, err := s.workspace(r, slug, storage.ScopeQueryRead)
	switch {
	case err != nil:
		return p, nil, err
	case p.admin, p.session != nil && p.role(ws.ID) == storage.RoleOwner:
		return p, ws, nil
	case p.session != nil:
		return p, nil, fault.Errorf(fault.Forbidden, "creating, listing and deleting sites needs the owner role in this workspace")
	}
	return p, nil, p.require(adminTokenOnly)
}

// listSites answers {"sites": [...]}.
//
// GET /workspaces/:slug/sites
func (s *Server) listSites(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	_, ws, err := s.siteManager(r, ps.ByName("slug"))
	if err != nil {
		return err
	}
	list, err := s.db.Sites(r.Context(), ws.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, siteList{Sites: rowsOf(list, siteOf)})
	return nil
}

// createSite takes {id, name} and answers 201 with the site.
//
// POST /workspaces/:slug/sites
func (s *Server) createSite(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, ws, err := s.siteManager(r, ps.ByName("slug"))
	if err != nil {
		return err
	}
	body, err := decodeObject(w, r, adminBodyLimit)
	if err != nil {
		return err
	}
	id, err := body.str("id", fault.InvalidSiteID)
	if err != nil {
		return err
	}
	name, err := body.str("name", fault.InvalidName)
	if err != nil {
		return err
	}
	site, err := s.db.CreateSite(r.Context(), p.actor(), ws, id, name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, siteOf(site))
	return nil
}

// getSite answers the site's settings (its time zone for the dashboard),
// to the admin token or any key with query:read that reaches the site.
//
// GET /v1/sites/:siteId
func (s *Server) getSite(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeQueryRead)
	if err != nil {
		return err
	}
	if p.share != nil {
		// A shared link sees the site's name and time zone only.
		writeJSON(w, http.StatusOK, sharedSiteOf(site))
		return nil
	}
	writeJSON(w, http.StatusOK, siteDetailOf(site, s.db.SiteAliases(site.ID)))
	return nil
}

// updateSite takes {name?, retention_days?, time_zone?, aliases?} and
// answers 200 with the site and its aliases. aliases replaces the list
// (docs/intake.md#plausible--and-umami-compatible-intake).
// retention_days is null (follow RETENTION_DAYS), 0 (keep everything) or
// the UTC days of raw rows kept; a changed one is applied by a purge at
// once (docs/storage.md#retention).
//
// PATCH /sites/:siteId
func (s *Server) updateSite(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	body, err := decodeObject(w, r, adminBodyLimit)
	if err != nil {
		return err
	}
	var change storage.SiteChange
	if body.has("name") {
		name, err := body.str("name", fault.InvalidName)
		if err != nil {
			return err
		}
		change.Name = &name
	}
	if raw, ok := body["retention_days"]; ok {
		change.Retention = true
		if err := json.Unmarshal(raw, &change.RetentionDays); err != nil ||
			(change.RetentionDays != nil && (*change.RetentionDays < 0 || *change.RetentionDays > storage.MaxRetentionDays)) {
			return fault.Errorf(fault.InvalidRetention, "retention_days must be null (follow the server's RETENTION_DAYS), 0 (keep everything) or a whole number of days up to %d", storage.MaxRetentionDays)
		}
	}
	if body.has("time_zone") {
		tz, err := body.str("time_zone", fault.InvalidTimeZone)
		if err != nil {
			return err
		}
		change.TimeZone = &tz
	}
	var aliases []string
	if raw, ok := body["aliases"]; ok {
		if json.Unmarshal(raw, &aliases) != nil || aliases == nil {
			return fault.Errorf(fault.InvalidAliases, "aliases must be an array of host names such as [\"example.com\"] ([] for none)")
		}
		// Checked before anything is written, so a bad list changes
		// nothing else either.
		if aliases, err = storage.CleanAliases(aliases); err != nil {
			return err
		}
	}
	updated, err := s.db.UpdateSite(r.Context(), p.actor(), site, change)
	if err != nil {
		return err
	}
	if change.Retention && updated != site {
		s.kickRetention()
	}
	if aliases != nil {
		if _, err := s.db.SetSiteAliases(r.Context(), p.actor(), updated, aliases); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, siteDetailOf(updated, s.db.SiteAliases(updated.ID)))
	return nil
}

// deleteSite deletes a site and all its data; 204.
//
// DELETE /workspaces/:slug/sites/:id
func (s *Server) deleteSite(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, ws, err := s.siteManager(r, ps.ByName("slug"))
	if err != nil {
		return err
	}
	if err := s.db.DeleteSite(r.Context(), p.actor(), ws, ps.ByName("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// listKeys answers {"keys": [...]} with metadata only: those the caller
// manages (see manages).
//
// GET /workspaces/:slug/keys
func (s *Server) listKeys(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, ws, err := s.workspace(r, ps.ByName("slug"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	keys, err := s.db.Keys(r.Context(), ws.ID)
	if err != nil {
		return err
	}
	keys = slices.DeleteFunc(keys, func(k storage.APIKey) bool { return !p.manages(&k) })
	writeJSON(w, http.StatusOK, keyList{Keys: rowsOf(keys, keyOf)})
	return nil
}

// manages reports whether p may see and revoke key k: the admin token and
// an unrestricted key every key of the workspace, a site-restricted key
// only the keys restricted to some of its own sites
// (docs/api.md#authentication).
func (p principal) manages(k *storage.APIKey) bool {
	if p.admin || !p.key.Restricted() {
		return true
	}
	if !k.Restricted() {
		return false
	}
	for _, id := range k.Sites {
		if !p.key.AllowsSite(id) {
			return false
		}
	}
	return true
}

// keySites reads the optional "sites" of a key to create: nil (absent or
// null) for every site. A site-restricted creator must name some of its
// own sites; one outside them gets the answer of an unknown site.
func (p principal) keySites(body object) ([]string, error) {
	var sites []string
	if raw, ok := body["sites"]; ok {
		if err := json.Unmarshal(raw, &sites); err != nil {
			return nil, fault.Errorf(fault.InvalidSites, "sites must be an array of site ids, or absent for every site")
		}
	}
	if p.admin || !p.key.Restricted() {
		return sites, nil
	}
	if sites == nil {
		return nil, fault.Errorf(fault.Forbidden, "this key is restricted to sites, so the keys it creates must be too: send \"sites\" with some of %q", p.key.Sites)
	}
	for _, id := range sites {
		if !p.key.AllowsSite(id) {
			return nil, storage.UnknownSiteFault(id)
		}
	}
	return sites, nil
}

// createKey takes {label, scopes, sites} and answers 201 with the key and its
// plaintext, shown this once.
//
// POST /workspaces/:slug/keys
func (s *Server) createKey(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, ws, err := s.workspace(r, ps.ByName("slug"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	body, err := decodeObject(w, r, adminBodyLimit)
	if err != nil {
		return err
	}
	label, err := body.str("label", fault.InvalidLabel)
	if err != nil {
		return err
	}
	scopes, err := body.strings("scopes", fault.InvalidScopes)
	if err != nil {
		return err
	}
	sites, err := p.keySites(body)
	if err != nil {
		return err
	}
	k, plaintext, err := s.db.CreateKeyForSites(r.Context(), p.actor(), ws, label, scopes, sites)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, createdKey{
		ID: k.ID, WorkspaceID: k.WorkspaceID, Label: k.Label, Scopes: k.Scopes, CreatedAt: k.CreatedAt, Sites: k.Sites,
		Plaintext: plaintext,
		Warning:   "Save this key now: it is shown only once and cannot be recovered.",
	})
	return nil
}

// revokeKey soft-deletes a key; 204, and 404 when it is unknown or already
// revoked.
//
// DELETE /workspaces/:slug/keys/:keyId
func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, ws, err := s.workspace(r, ps.ByName("slug"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	if !p.admin && p.key.Restricted() {
		keys, err := s.db.Keys(r.Context(), ws.ID)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(keys, func(k storage.APIKey) bool { return k.ID == ps.ByName("keyId") })
		if i < 0 || !p.manages(&keys[i]) {
			return fault.Errorf(fault.NotFound, "key not found")
		}
	}
	if err := s.db.RevokeKey(r.Context(), p.actor(), ws, ps.ByName("keyId")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// listAudit answers {"entries": [...], "next_cursor": ts|null}, newest
// first, limit 1-1000 (default 100), entries strictly before cursor.
//
// GET /workspaces/:slug/audit
func (s *Server) listAudit(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, ws, err := s.workspace(r, ps.ByName("slug"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	if !p.admin && p.key.Restricted() {
		return fault.Errorf(fault.Forbidden, "the audit log covers every site of the workspace, so a key restricted to sites cannot read it")
	}
	limit, cursor, err := pageParams(r, "cursor")
	if err != nil {
		return err
	}
	entries, next, err := s.db.Audit(r.Context(), ws.ID, limit, cursor)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, auditPage{Entries: rowsOf(entries, auditEntryOf), NextCursor: next})
	return nil
}
