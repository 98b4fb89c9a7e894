package server

import (
	"encoding/json"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// Shared links of a site (docs/sharing.md): made, listed, changed and
// revoked by whoever may change the site's settings (the admin token, an
// admin key that reaches the site, a session of an owner or admin).

// linkFieldError is the 400 of a body field of the wrong type.
func linkFieldError(path, msg string) error {
	return fault.WithDetails(fault.InvalidSharedLink, "the shared link is invalid: "+msg, []fault.Detail{{Path: path, Message: msg}})
}

// linkPassword reads the body's password: absent (set false), null
// (set, nil: none or remove it) or a string.
func linkPassword(body object) (pw *string, set bool, err error) {
	raw, ok := body["password"]
	if !ok {
		return nil, false, nil
	}
	if string(raw) == "null" {
		return nil, true, nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil, true, linkFieldError("/password", "password must be a string, or null for none")
	}
	return &s, true, nil
}

// linkOrigins reads the body's allowed_origins: absent (set false), null
// (an empty list) or an array of strings.
func linkOrigins(body object) (list []string, set bool, err error) {
	raw, ok := body["allowed_origins"]
	if !ok {
		return nil, false, nil
	}
	if string(raw) == "null" {
		return []string{}, true, nil
	}
	if json.Unmarshal(raw, &list) != nil {
		return nil, true, linkFieldError("/allowed_origins", "allowed_origins must be an array of origins such as [\"https://example.com\"]")
	}
	return list, true, nil
}

// linkLabel reads the body's label: absent (set false) or a string.
func linkLabel(body object) (label string, set bool, err error) {
	raw, ok := body["label"]
	if !ok {
		return "", false, nil
	}
	if json.Unmarshal(raw, &label) != nil {
		return "", true, linkFieldError("/label", "label must be a string")
	}
	return label, true, nil
}

// createSharedLink takes {label, password?, allowed_origins?}; 201 with
// the link and its token, path and url, shown this once.
//
// POST /v1/sites/:siteId/shared-links
func (s *Server) createSharedLink(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	body, err := decodeObject(w, r, adminBodyLimit)
	if err != nil {
		return err
	}
	var nl storage.NewSharedLink
	label, set, err := linkLabel(body)
	if err != nil {
		return err
	}
	if !set {
		return linkFieldError("/label", "label is required: a name for the link, such as \"Board\"")
	}
	nl.Label = label
	if nl.Password, _, err = linkPassword(body); err != nil {
		return err
	}
	if nl.AllowedOrigins, _, err = linkOrigins(body); err != nil {
		return err
	}
	l, token, err := s.db.CreateSharedLink(r.Context(), p.actor(), site, nl)
	if err != nil {
		return err
	}
	path := "/share/" + token
	writeJSON(w, http.StatusCreated, createdSharedLink{sharedLinkBody: sharedLinkOf(l), Token: token, Path: path, URL: s.originOf(r) + path})
	return nil
}

// originOf is the query API's origin as r reached it: https when the
// request came over TLS or HTTPS is on, and r's Host (behind a reverse
// proxy, pass Host through).
func (s *Server) originOf(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || s.cfg.SecureCookies {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// listSharedLinks answers {"shared_links": [...]}, the site's live links,
// newest first, without their tokens.
//
// GET /v1/sites/:siteId/shared-links
func (s *Server) listSharedLinks(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	_, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	list, err := s.db.SharedLinks(r.Context(), site.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sharedLinkList{SharedLinks: rowsOf(list, sharedLinkOf)})
	return nil
}

// updateSharedLink changes what the body has: label, password (a string
// sets it, null removes it), allowed_origins (null empties it); 200 with
// the link.
//
// PATCH /v1/sites/:siteId/shared-links/:linkId
func (s *Server) updateSharedLink(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	body, err := decodeObject(w, r, adminBodyLimit)
	if err != nil {
		return err
	}
	var c storage.SharedLinkChange
	label, set, err := linkLabel(body)
	if err != nil {
		return err
	}
	if set {
		c.Label = &label
	}
	pw, set, err := linkPassword(body)
	if err != nil {
		return err
	}
	c.Password, c.ClearPassword = pw, set && pw == nil
	origins, set, err := linkOrigins(body)
	if err != nil {
		return err
	}
	if set {
		c.AllowedOrigins = &origins
	}
	l, err := s.db.UpdateSharedLink(r.Context(), p.actor(), site, ps.ByName("linkId"), c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sharedLinkOf(l))
	return nil
}

// revokeSharedLink ends a link: 204, and its token answers 404 from then
// on, on every instance.
//
// DELETE /v1/sites/:siteId/shared-links/:linkId
func (s *Server) revokeSharedLink(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	if err := s.db.RevokeSharedLink(r.Context(), p.actor(), site, ps.ByName("linkId")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
