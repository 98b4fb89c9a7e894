package server

import (
	"context"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/storage"
)

// Imported history in the query API (docs/query-api.md, include.imports,
// and docs/import.md).

// Plausible's imports_warning texts (lib/plausible/stats/query_result.ex,
// @imports_warnings), by skip reason.
var importsWarnings = map[string]string{
	storage.ImportsUnsupportedQuery: "Imported stats are not included in the results because query parameters are not supported. " +
		"For more information, see: https://plausible.io/docs/stats-api#filtering-imported-stats",
	storage.ImportsUnsupportedInterval: "Imported stats are not included because the time dimension (i.e. the interval) is too short.",
}

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

// addImportsMeta tells, with include.imports, whether the answer holds
// imported days, else why not, and which imported days its range has.
func (s *Server) addImportsMeta(r *http.Request, pq *parsedQuery, a *queryAnswer) error {
	if !pq.imports {
		return nil
	}
	q := pq.storageQuery(pq.from, pq.to)
	q.Imports = true
	in, err := s.db.ImportedInclusion(r.Context(), q)
	if err != nil {
		return err
	}
	if in.Included && pq.goalQuery() {
		in.Included, in.SkipReason = false, storage.ImportsUnsupportedQuery
	}
	a.Meta.ImportsIncluded = &in.Included
	a.Meta.ImportsSkipReason = in.SkipReason
	a.Meta.ImportsWarning = importsWarnings[in.SkipReason]
	a.Meta.ImportedRanges = [][]string{}
	for _, rg := range in.Ranges {
		a.Meta.ImportedRanges = append(a.Meta.ImportedRanges, []string{rg[0], rg[1]})
	}
	return nil
}

// startAtFirstImportedDay starts the range "all" of a query with
// include.imports at the first imported day, when that is earlier.
func (s *Server) startAtFirstImportedDay(ctx context.Context, pq *parsedQuery) error {
	if !pq.imports {
		return nil
	}
	day, ok, err := s.db.FirstImportedDay(ctx, pq.site.ID)
	if err != nil || !ok {
		return err
	}
	if d, err := time.ParseInLocation(time.DateOnly, day, pq.loc); err == nil && d.Before(pq.from) {
		pq.from = d
	}
	return nil
}
