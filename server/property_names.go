package server

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/storage"
)

// propertyNames answers {properties}: the custom property names the site's
// recent events carry, for the dashboard's property panel to offer.
//
// GET /v1/sites/:siteId/properties
func (s *Server) propertyNames(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	_, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeQueryRead)
	if err != nil {
		return err
	}
	names, err := s.db.PropertyNames(r.Context(), site.ID, storage.PropertyNamesMaxRows)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, propertyNamesBody{Properties: names, Default: storage.DefaultProperty(names)})
	return nil
}
