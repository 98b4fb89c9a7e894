package server

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/storage"
)

// realtime answers {visitors}: the site's distinct visitors with an event
// received in the last five minutes by the service's clock
// (docs/query-api.md#realtime).
//
// GET /v1/sites/:siteId/realtime
func (s *Server) realtime(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	_, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeQueryRead)
	if err != nil {
		return err
	}
	n, err := s.db.Realtime(r.Context(), site.ID, s.now())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, realtimeBody{Visitors: n})
	return nil
}
