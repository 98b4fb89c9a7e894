package server

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/storage"
)

// funnel answers a funnel of the site's goals
// (docs/query-api.md#goals-and-funnels): per step, the visitors who completed
// it after the steps before it within one visit. The body's reading and the
// steps' figures are storage's (storage/query_funnel.go).
//
// POST /v1/sites/:siteId/funnel
func (s *Server) funnel(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	_, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeQueryRead)
	if err != nil {
		return err
	}
	raw, err := readBody(w, r, queryBodyLimit)
	if err != nil {
		return err
	}
	a, err := s.db.QueryFunnel(r.Context(), site, raw, s.now())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, funnelAnswerOf(a))
	return nil
}
