package storage

import (
	"context"
	"encoding/json"
	"time"
)

// Funnel answers of closed ranges in the report cache
// (docs/query-api.md#how-reports-stay-fast,
// docs/query-api.md#goals-and-funnels): a funnel over a range that ended
// more than partialMargin ago is kept, exact, and served again while no
// writer has changed a visit or event of the range or of a visit that runs
// into it: the counts of partialGens over [the range's lookback, its end),
// which intake, erasure, retention, a site deletion or reset and a
// time-zone change move, as for the filtered reports of report_scan_cache.go. The
// key holds the steps' definitions (not their names or ids), so a goal
// deleted and created again differently is a new funnel.

// funnelKey returns how a funnel q whose visits start from lo is kept: its
// cache key and the change count of its days, taken before any read, and
// false when its range is not closed yet (or ReadWideEvents is on).
func (db *DB) funnelKey(ctx context.Context, q *FunnelQuery, lo time.Time) (string, uint64, bool, error) {
	if q.To.Add(partialMargin).After(db.now()) || db.wideReads.Load() {
		// Tests that read the wide rows compare them with the narrow
		// read: neither may answer the other.
		return "", 0, false, nil
	}
	gen, err := db.changesGen(ctx, q.Site, lo, q.To)
	if err != nil {
		return "", 0, false, err
	}
	zone := "UTC"
	if q.Zone != nil {
		zone = q.Zone.String()
	}
	type step struct{ E, P, N, V string }
	steps := make([]step, len(q.Steps))
	for i, g := range q.Steps {
		steps[i] = step{g.EventName, g.PagePath, g.PropName, g.PropValue}
	}
	shape, err := json.Marshal(struct {
		S        []step
		F        []QueryFilter
		From, To int64
	}{steps, q.Filters, q.From.UnixMilli(), q.To.UnixMilli()})
	if err != nil {
		return "", 0, false, err
	}
	return "funnel\x00" + q.Site + "\x00" + zone + "\x00" + string(shape), gen, true, nil
}
