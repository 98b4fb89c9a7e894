package storage

import (
	"context"
	"strings"
	"time"
)

// A report that reads events reads them through the visits of its range
// (visitsEventRead) in two parts at once, the visits starting in the first
// half of the range and those starting in the second, each on its own read
// connection (README "Query API", How reports stay fast): the reads are
// CPU-bound in SQLite, the machine has two cores, and readers never hold
// up the writer in WAL mode. Each visit is in one part, so visits, events
// and pageviews add; visitors are merged as sets, each part handing its
// rows per group and visitor.

// eventRow is one row of a part: a group, one of its visitors, and that
// visitor's visits, pageviews and events in the group.
type eventRow struct {
	key, anon                string
	visits, pageviews, count float64
}

// readEvents adds q's event figures (visitors of the events, visits when
// eventLevel, pageviews, events) to the groups get hands out, in the order
// the groups are first seen.
func (db *DB) readEvents(ctx context.Context, q *StatsQuery, eventLevel bool, get func(string) *aggregate) error {
	if q.byEvents {
		query, args, err := q.eventIndexRead(eventLevel)
		if err != nil {
			return err
		}
		return db.scanGroups(ctx, query, args, len(q.Dimensions), 4, func(key string, v []float64) {
			a := get(key)
			a.visitors, a.pageviews, a.events = v[0], v[2], v[3]
			if eventLevel {
				a.visits = v[1]
			}
		})
	}
	lo, err := db.visitLookback(ctx, q.Site, q.From)
	if err != nil {
		return err
	}
	// Split at the middle of the range: the visits starting before it
	// (those of the lookback too, which are few) and after.
	mid := time.UnixMilli(q.From.UnixMilli() + (q.To.UnixMilli()-q.From.UnixMilli())/2)
	bounds := []time.Time{lo, mid, q.To}
	if !mid.After(lo) || !q.To.After(mid) {
		bounds = []time.Time{lo, q.To}
	}
	parts := make([][]eventRow, len(bounds)-1)
	errs := make(chan error, len(parts))
	for i := range parts {
		go func() {
			rows, err := db.eventPart(ctx, q, bounds[i], bounds[i+1])
			parts[i] = rows
			errs <- err
		}()
	}
	for range parts {
		if e := <-errs; e != nil && err == nil {
			err = e
		}
	}
	if err != nil {
		return err
	}
	seen := map[string]struct{}{}
	for _, rows := range parts {
		for _, r := range rows {
			a := get(r.key)
			a.pageviews += r.pageviews
			a.events += r.count
			if eventLevel {
				a.visits += r.visits
			}
			k := r.key + keySep + r.anon
			if _, ok := seen[k]; !ok {
				seen[k] = struct{}{}
				a.visitors++
			}
		}
	}
	return nil
}

// eventPart reads q's events of the visits starting in [lo, hi), per group
// and visitor.
func (db *DB) eventPart(ctx context.Context, q *StatsQuery, lo, hi time.Time) ([]eventRow, error) {
	query, args, err := q.visitsEventRead(lo, hi, true)
	if err != nil {
		return nil, err
	}
	rows, err := db.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	n := len(q.Dimensions)
	texts := make([]string, n+1)
	var r eventRow
	dest := make([]any, 0, n+4)
	for i := range texts {
		dest = append(dest, &texts[i])
	}
	dest = append(dest, &r.visits, &r.pageviews, &r.count)
	var out []eventRow
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		r.key, r.anon = strings.Join(texts[:n], keySep), texts[n]
		out = append(out, r)
	}
	return out, rows.Err()
}
