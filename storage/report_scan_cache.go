package storage

import (
	"context"
	"encoding/json"
)

// Filtered reports of closed days in the report cache
// (docs/query-api.md#how-reports-stay-fast): a report the day partials cannot
// answer (filters on more than one dimension) reads the range's visits and
// their events; its answer over a range that ended more than partialMargin ago
// is kept, exact, and served again while no writer has changed a visit or event
// of the range or of the visits that run into it (the counts of partialGens
// over [the range's lookback, its end), the same counts that keep merged
// partials), so a dashboard's second view of a filter, or the same filter's
// report read again, costs a map lookup.

// scanAnswer is a scanned report's groups and their first-seen order;
// never modified once kept.
type scanAnswer struct {
	groups map[string]*aggregate
	order  []string
}

func (a *scanAnswer) keys() []string {
	if a == nil {
		return nil
	}
	return a.order
}

// cachedScan returns how a scan of q is kept: its cache key and the change
// count of its days, taken before any read, and false when q is not one to
// keep (no filters, a range not yet closed, or a test's forced scan).
func (db *DB) cachedScan(ctx context.Context, q *StatsQuery) (string, uint64, bool, error) {
	if len(q.Filters) == 0 && len(q.Goals) == 0 || q.scan || q.byEvents || q.To.Add(partialMargin).After(db.now()) {
		return "", 0, false, nil
	}
	lo, err := db.visitLookback(ctx, q.Site, q.From)
	if err != nil {
		return "", 0, false, err
	}
	gen, err := db.changesGen(ctx, q.Site, lo, q.To)
	if err != nil {
		return "", 0, false, err
	}
	zone := "UTC"
	if q.Zone != nil {
		zone = q.Zone.String()
	}
	shape, err := json.Marshal(struct {
		M, D     []string
		F, G     []QueryFilter
		U        string
		E        bool
		From, To int64
	}{q.Metrics, q.Dimensions, q.Filters, q.Goals, q.TimeUnit, q.eventBasis, q.From.UnixMilli(), q.To.UnixMilli()})
	if err != nil {
		return "", 0, false, err
	}
	return "scan\x00" + q.Site + "\x00" + zone + "\x00" + string(shape), gen, true, nil
}

// keepScan keeps a scanned answer computed from reads that began at gen.
func (db *DB) keepScan(key string, gen uint64, groups map[string]*aggregate, order []string) {
	db.reports.put(&cachedReport{key: key, gen: gen, scan: &scanAnswer{groups: groups, order: order}})
}
