package storage

import (
	"context"
	"time"
)

// Imported history in the query API (docs/query-api.md, include.imports,
// and docs/import.md): what the answer's meta says of it, and where the
// range "all" starts. The rollups' reads are import_days.go's.

// importsWarnings are Plausible's imports_warning texts
// (lib/plausible/stats/query_result.ex, @imports_warnings), by skip
// reason.
var importsWarnings = map[string]string{
	ImportsUnsupportedQuery: "Imported stats are not included in the results because query parameters are not supported. " +
		"For more information, see: https://plausible.io/docs/stats-api#filtering-imported-stats",
	ImportsUnsupportedInterval: "Imported stats are not included because the time dimension (i.e. the interval) is too short.",
}

// ImportsWarning is the answer's imports_warning for a skip reason, ""
// for none.
func ImportsWarning(reason string) string { return importsWarnings[reason] }

// addImportsMeta tells, with include.imports, whether the answer holds
// imported days, else why not, and which imported days its range has.
func (db *DB) addImportsMeta(ctx context.Context, pq *parsedQuery, a *QueryAnswer) error {
	if !pq.imports {
		return nil
	}
	q := pq.statsQuery(pq.from, pq.to)
	q.Imports = true
	goalImports := false
	if pq.goalQuery() {
		goals, err := db.Goals(ctx, pq.site.ID)
		if err != nil {
			return err
		}
		if _, goalImports = pq.goalImportable(goals); goalImports {
			// Only whether the range holds imported days (import_goals.go).
			q.Dimensions, q.Filters = nil, nil
		}
	}
	in, err := db.ImportedInclusion(ctx, q)
	if err != nil {
		return err
	}
	if in.Included && pq.goalQuery() && !goalImports {
		in.Included, in.SkipReason = false, ImportsUnsupportedQuery
	}
	a.Meta.Imports = &QueryImports{Included: in.Included, SkipReason: in.SkipReason,
		Warning: importsWarnings[in.SkipReason], Ranges: in.Ranges}
	return nil
}

// startAtFirstImportedDay starts the range "all" of a query with
// include.imports at the first imported day, when that is earlier.
func (db *DB) startAtFirstImportedDay(ctx context.Context, pq *parsedQuery) error {
	if !pq.imports {
		return nil
	}
	day, ok, err := db.FirstImportedDay(ctx, pq.site.ID)
	if err != nil || !ok {
		return err
	}
	if d, err := time.ParseInLocation(time.DateOnly, day, pq.loc); err == nil && d.Before(pq.from) {
		pq.from = d
	}
	return nil
}
