package storage

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// MaxFunnelSteps bounds a funnel's steps: each is one bit of a mask.
const MaxFunnelSteps = 8

// FunnelQuery is a funnel over [From, To): Steps (each a filter on events,
// GoalFilter's) completed in order within one visit, counting only the
// events that pass Filters (the query API's).
type FunnelQuery struct {
	Site     string
	From, To time.Time
	Zone     *time.Location
	Filters  []QueryFilter
	Steps    []QueryFilter
}

// funnelStepEvents is what a funnel reads of each event: every column its
// steps and filters test is read through e (events). It is the one place
// to change to read a narrower table (an event's type and page path
// only) instead of the wide events rows.
const funnelStepEvents = `sessions s CROSS JOIN events e`

// Funnel answers q: per step, the distinct visitors who reached it, in
// order, within one visit (README "Goals and funnels"). Events are read
// through the visits that reach the range, as the query API's event reads
// are (README "Query API", How reports stay fast), in two halves at once
// (the visits starting before and after the middle of the range); each
// visit is in one half, and a visitor's furthest step is the furthest of
// its visits.
func (db *DB) Funnel(ctx context.Context, q FunnelQuery) ([]int, error) {
	if len(q.Steps) == 0 || len(q.Steps) > MaxFunnelSteps {
		return nil, fmt.Errorf("a funnel has 1 to %d steps, not %d", MaxFunnelSteps, len(q.Steps))
	}
	lo, err := db.visitLookback(ctx, q.Site, q.From)
	if err != nil {
		return nil, err
	}
	mid := time.UnixMilli(q.From.UnixMilli() + (q.To.UnixMilli()-q.From.UnixMilli())/2)
	parts := [][2]time.Time{{lo, q.To}}
	if mid.After(lo) && q.To.After(mid) && db.readConns >= 2 {
		parts = [][2]time.Time{{lo, mid}, {mid, q.To}}
	}
	// Each half runs on its own connection of the read pool; neither holds
	// one while waiting for another, so two funnels cannot wait on each
	// other.
	reached := make([]map[string]int, len(parts))
	errs := make([]error, len(parts))
	done := make(chan int, len(parts))
	for i, p := range parts {
		go func() {
			reached[i], errs[i] = db.funnelPart(ctx, &q, p[0], p[1])
			done <- i
		}()
	}
	for range parts {
		<-done
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	best := reached[0]
	for _, m := range reached[1:] {
		for anon, n := range m {
			best[anon] = max(best[anon], n)
		}
	}
	counts := make([]int, len(q.Steps))
	for _, n := range best {
		for i := 0; i < n; i++ {
			counts[i]++
		}
	}
	return counts, nil
}

// funnelPart reads the visits starting in [lo, hi) that reach q's range
// and returns each visitor's furthest step (1-based; absent: none).
func (db *DB) funnelPart(ctx context.Context, q *FunnelQuery, lo, hi time.Time) (map[string]int, error) {
	sq := &StatsQuery{Site: q.Site, From: q.From, To: q.To, Zone: q.Zone, Filters: q.Filters}
	// The mask of the steps an event matches, one bit each.
	mb := &sqlBuilder{q: sq}
	bits := make([]string, len(q.Steps))
	for i, step := range q.Steps {
		cond, err := mb.filterNode(step, false)
		if err != nil {
			return nil, err
		}
		bits[i] = fmt.Sprintf("(CASE WHEN %s THEN %d ELSE 0 END)", cond, 1<<i)
	}
	fb := &sqlBuilder{q: sq}
	where, err := fb.where()
	if err != nil {
		return nil, err
	}
	// Visits one after the other (the start index's order, ties by id),
	// each visit's events by time, then by arrival.
	query := `SELECT s.id, s.anon_id, ` + strings.Join(bits, " | ") + ` AS m
		FROM ` + funnelStepEvents + `
		WHERE s.site_id = ? AND s.started_ms >= ? AND s.started_ms < ? AND s.ended_ms >= ?
		AND e.site_id = s.site_id AND e.anon_id = s.anon_id
		AND e.ts_ms >= max(?, ` + visitStartMS("s") + `) AND e.ts_ms <= min(?, ` + visitEndMS("s") + `)` + where + `
		AND m <> 0
		ORDER BY s.started_ms, s.id, e.ts_ms, e.seq`
	args := append([]any{}, mb.whereArgs...)
	args = append(args, q.Site, visitTimeArg(lo), visitTimeArg(hi), visitTimeArg(q.From), q.From.UnixMilli(), q.To.UnixMilli()-1)
	args = append(args, fb.whereArgs...)
	rows, err := db.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	best := map[string]int{}
	var visit int64 = -1
	var anon string
	step := 0 // steps the current visit has completed
	flush := func() {
		if step > best[anon] {
			best[anon] = step
		}
	}
	for rows.Next() {
		var id, mask int64
		var a string
		if err := rows.Scan(&id, &a, &mask); err != nil {
			return nil, err
		}
		if id != visit {
			if visit >= 0 {
				flush()
			}
			visit, anon, step = id, a, 0
		}
		// One event completes one step at most: the next one, when it
		// matches it.
		if step < len(q.Steps) && mask&(1<<step) != 0 {
			step++
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if visit >= 0 {
		flush()
	}
	for a, n := range best {
		if n == 0 {
			delete(best, a)
		}
	}
	return best, nil
}
