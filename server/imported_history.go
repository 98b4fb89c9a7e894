package server

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/storage"
)

// The list of a site's imports (docs/import.md); what the query API's
// include.imports does is storage's (storage/query_imports.go).

// listImports answers GET /v1/sites/:siteId/imports: the site's imports,
// oldest first, with the days each covers.
func (s *Server) listImports(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	_, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeQueryRead)
	if err != nil {
		return err
	}
	list, err := s.db.Imports(r.Context(), site.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, importList{Imports: rowsOf(list, importOf)})
	return nil
}
