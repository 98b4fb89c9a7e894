package server

import (
	"net/http"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// Saved segments of a site (docs/query-api.md#saved-segments), Plausible's:
// written as goals are (the admin token or an admin key that reaches the
// site), read by whoever reads the site's figures. Named saved_ so as not to
// be taken for Segment's intake (segment_*.go).

// createSegment stores a segment; 201 with it.
//
// POST /v1/sites/:siteId/segments
func (s *Server) createSegment(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	c, err := segmentChangeOf(w, r)
	if err != nil {
		return err
	}
	seg, err := s.db.CreateSegment(r.Context(), p.actor(), site, c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, segmentOf(seg))
	return nil
}

// segmentChangeOf reads a segment's body: name and type (strings) and
// segment_data, each optional here; storage checks the values and which
// are required.
func segmentChangeOf(w http.ResponseWriter, r *http.Request) (storage.SegmentChange, error) {
	var c storage.SegmentChange
	body, err := decodeObject(w, r, adminBodyLimit)
	if err != nil {
		return c, err
	}
	for _, f := range []struct {
		key string
		dst **string
	}{{"name", &c.Name}, {"type", &c.Type}} {
		if !body.has(f.key) {
			continue
		}
		v, err := body.str(f.key, fault.InvalidSegment)
		if err != nil {
			return c, fault.Errorf(fault.InvalidSegment, "%s must be a string", f.key)
		}
		*f.dst = &v
	}
	if raw, ok := body["segment_data"]; ok {
		c.Data = raw
	}
	return c, nil
}

// listSegments answers {"segments": [...]}: the site segments and the
// caller's own personal ones, the last updated first.
//
// GET /v1/sites/:siteId/segments
func (s *Server) listSegments(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeQueryRead)
	if err != nil {
		return err
	}
	list, err := s.db.Segments(r.Context(), site.ID, p.actor())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, segmentList{Segments: rowsOf(list, segmentOf)})
	return nil
}

// segmentID reads the path's segment id; one that is not a number is the
// ordinary 404, as an unknown one is.
func segmentID(ps httprouter.Params) (int64, error) {
	id, err := strconv.ParseInt(ps.ByName("segmentId"), 10, 64)
	if err != nil {
		return 0, fault.Errorf(fault.NotFound, "no segment with that id on this site")
	}
	return id, nil
}

// getSegment answers one segment of the site.
//
// GET /v1/sites/:siteId/segments/:segmentId
func (s *Server) getSegment(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	_, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeQueryRead)
	if err != nil {
		return err
	}
	id, err := segmentID(ps)
	if err != nil {
		return err
	}
	seg, err := s.db.SegmentOf(r.Context(), site.ID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, segmentOf(seg))
	return nil
}

// updateSegment changes the fields the body has; 200 with the segment.
//
// PATCH /v1/sites/:siteId/segments/:segmentId
func (s *Server) updateSegment(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	id, err := segmentID(ps)
	if err != nil {
		return err
	}
	c, err := segmentChangeOf(w, r)
	if err != nil {
		return err
	}
	seg, err := s.db.UpdateSegment(r.Context(), p.actor(), site, id, c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, segmentOf(seg))
	return nil
}

// deleteSegment deletes a segment; 204, and 404 when the site has no such
// segment.
//
// DELETE /v1/sites/:siteId/segments/:segmentId
func (s *Server) deleteSegment(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	id, err := segmentID(ps)
	if err != nil {
		return err
	}
	if err := s.db.DeleteSegment(r.Context(), p.actor(), site, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
