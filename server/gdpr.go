package server

import (
	"encoding/json"
	"mime"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// gdprBodyLimit caps GDPR request bodies (docs/gdpr.md).
const gdprBodyLimit = 16 << 10

// gdprSubject authenticates a GDPR request (admin token or admin key) and
// reads {subject: {anon_id} | {user_id}}: 415 without a JSON content type,
// 413 over 16 KB, 400 invalid_subject unless exactly one non-empty id.
func (s *Server) gdprSubject(w http.ResponseWriter, r *http.Request, ps httprouter.Params) (principal, *storage.Site, storage.Subject, error) {
	var subj storage.Subject
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return p, nil, subj, err
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return p, nil, subj, fault.Errorf(fault.UnsupportedMedia, "send the body as Content-Type: application/json")
	}
	body, err := decodeObject(w, r, gdprBodyLimit)
	if err != nil {
		return p, nil, subj, err
	}
	var raw struct {
		AnonID *json.RawMessage `json:"anon_id"`
		UserID *json.RawMessage `json:"user_id"`
	}
	bad := fault.Errorf(fault.InvalidSubject, `subject must be {"anon_id": "..."} or {"user_id": "..."}, with exactly one non-empty id`)
	if json.Unmarshal(body["subject"], &raw) != nil || (raw.AnonID == nil) == (raw.UserID == nil) {
		return p, nil, subj, bad
	}
	id, dst := raw.AnonID, &subj.AnonID
	if raw.UserID != nil {
		id, dst = raw.UserID, &subj.UserID
	}
	if json.Unmarshal(*id, dst) != nil || *dst == "" {
		return p, nil, subj, bad
	}
	return p, site, subj, nil
}

// gdprExport answers every row of the subject, complete, including raw.
//
// POST /sites/:siteId/gdpr/export
func (s *Server) gdprExport(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, subj, err := s.gdprSubject(w, r, ps)
	if err != nil {
		return err
	}
	out, err := s.db.ExportSubject(r.Context(), p.actor(), site, subj)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, gdprExportOf(site.ID, subj, out))
	return nil
}

// gdprDelete erases the subject, forgets its decisions in the inspection
// feed (dev mode), and answers the counts removed.
//
// POST /sites/:siteId/gdpr/delete
func (s *Server) gdprDelete(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, subj, err := s.gdprSubject(w, r, ps)
	if err != nil {
		return err
	}
	// The feed's anon ids are matched to the subject before the erasure
	// deletes the links that tell.
	var anons map[string]bool
	if s.feed != nil {
		if anons, err = s.db.SubjectAnonIDs(r.Context(), site.ID, subj, s.feed.anonIDs(site.ID)); err != nil {
			return err
		}
	}
	counts, err := s.db.EraseSubject(r.Context(), p.actor(), site, subj)
	if err != nil {
		return err
	}
	if s.feed != nil {
		s.feed.forget(subjectMatch(site.ID, subj, anons))
	}
	writeJSON(w, http.StatusOK, gdprDeleteBody{SiteID: site.ID, Subject: subjectOf(subj), Counts: subjectCountsOf(counts)})
	return nil
}
