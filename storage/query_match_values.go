package storage

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"time"
)

// matchKey names a matches filter's pattern on a dimension, folded or
// not.
func matchKey(dim, pattern string, fold bool) string {
	if fold {
		return dim + "\x00lower\x00" + pattern
	}
	return dim + "\x00" + pattern
}

// matchGroup is the matches patterns of a query on one dimension, folded
// or not: one read of that dimension's values answers them all.
type matchGroup struct {
	dim      string
	fold     bool
	patterns []string
}

// resolveMatches reads, on a backend without RE2 in SQL (PostgreSQL), the
// distinct values of each matches filter's dimension that the query's
// reads can meet, and keeps those its pattern matches, matched in Go with
// the same compiled pattern as SQLite's tally_match, so that the read
// lists them (docs/postgresql.md#on-postgresql). Each dimension is read once, for
// all its patterns, and within the range (matchRange).
func (db *DB) resolveMatches(ctx context.Context, q *StatsQuery) error {
	if db.d.matchList("x") == "" {
		return nil
	}
	var groups []*matchGroup
	seen := map[string]bool{}
	var walk func(fs []QueryFilter)
	walk = func(fs []QueryFilter) {
		for _, f := range fs {
			walk(f.Children)
			if f.Op != "matches" && f.Op != "matches_not" {
				continue
			}
			dims := []string{f.Dim}
			if f.Dim == "event:page" && slices.Contains(q.Metrics, MetricBounceRate) {
				// bounce_rate reads an event:page filter as one on the
				// visit's entry page too (entryFilters, query_plan.go).
				dims = append(dims, "visit:entry_page")
			}
			for _, dim := range dims {
				for _, v := range f.Values {
					k := matchKey(dim, v, f.Fold)
					if _, ok := q.matched[k]; ok || seen[k] {
						continue
					}
					seen[k] = true
					var g *matchGroup
					for _, x := range groups {
						if x.dim == dim && x.fold == f.Fold {
							g = x
						}
					}
					if g == nil {
						g = &matchGroup{dim: dim, fold: f.Fold}
						groups = append(groups, g)
					}
					g.patterns = append(g.patterns, v)
				}
			}
		}
	}
	walk(q.Filters)
	walk(q.Goals)
	if len(groups) == 0 {
		return nil
	}
	r, err := db.matchRange(ctx, q)
	if err != nil {
		return err
	}
	if q.matched == nil {
		q.matched = map[string][]string{}
	}
	for _, g := range groups {
		if err := db.matchValuesOf(ctx, q, r, g); err != nil {
			return err
		}
	}
	return nil
}

// matchSpan is where the reads of a query meet values: events in
// [eventsFrom, eventsTo), visits starting in [visitsFrom, visitsTo).
type matchSpan struct {
	eventsFrom, eventsTo, visitsFrom, visitsTo time.Time
}

// matchRange is what q's reads read (query_plan.go): the events of the range,
// with the visits that reach it (from the visit lookback, report_visit_reach.go),
// and the visits starting in the range, with, for session metrics of an
// event-level query, all their events, which may run past its end.
func (db *DB) matchRange(ctx context.Context, q *StatsQuery) (matchSpan, error) {
	r := matchSpan{eventsFrom: q.From, eventsTo: q.To, visitsTo: q.To}
	lo, err := db.visitLookback(ctx, q.Site, q.From)
	if err != nil {
		return r, err
	}
	r.visitsFrom = lo
	sessionMetric := false
	for _, m := range q.Metrics {
		sessionMetric = sessionMetric || SessionMetric(m)
	}
	if sessionMetric && q.eventLevel() {
		var end *int64
		if err := db.read.QueryRowContext(ctx, `SELECT MAX(ended_ms) FROM sessions s WHERE `+visitRangeSQL,
			q.Site, q.From.UnixMilli(), q.To.UnixMilli()).Scan(&end); err != nil {
			return r, err
		}
		if end != nil && *end >= q.To.UnixMilli() {
			r.eventsTo = time.UnixMilli(*end + 1)
		}
	}
	return r, nil
}

// matchValuesOf reads g's dimension's distinct values in r and lists, for
// each of its patterns, those it matches.
func (db *DB) matchValuesOf(ctx context.Context, q *StatsQuery, r matchSpan, g *matchGroup) error {
	res := make([]*regexp.Regexp, len(g.patterns))
	for i, p := range g.patterns {
		var err error
		if res[i], err = compilePattern(p); err != nil {
			return err
		}
	}
	b := &sqlBuilder{q: q, visitSide: strings.HasPrefix(g.dim, "visit:")}
	expr, args, err := b.dimExpr(g.dim)
	if err != nil {
		return err
	}
	if g.fold {
		// The pattern is matched against the folded value, as SQLite's
		// tally_match(?, lower(expr)).
		expr = db.d.Fold(expr)
	}
	// A visit dimension is the visit's alone, an event dimension the
	// event's alone: neither read joins the other table.
	query := `SELECT DISTINCT ` + expr + ` FROM sessions s WHERE ` + visitRangeSQL
	args = append(args, q.Site, r.visitsFrom.UnixMilli(), r.visitsTo.UnixMilli())
	if !b.visitSide {
		query = `SELECT DISTINCT ` + expr + ` FROM events e WHERE e.site_id = ? AND e.ts_ms >= ? AND e.ts_ms < ?`
		args = append(args[:len(args)-3], q.Site, r.eventsFrom.UnixMilli(), r.eventsTo.UnixMilli())
	}
	db.hooks.matchReads.Add(1)
	rows, err := db.read.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	lists := make([][]string, len(res))
	for rows.Next() {
		var s *string
		if err := rows.Scan(&s); err != nil {
			return err
		}
		db.hooks.matchValues.Add(1)
		for i, re := range res {
			if s != nil && re.MatchString(*s) {
				lists[i] = append(lists[i], *s)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i, p := range g.patterns {
		if lists[i] == nil {
			lists[i] = []string{}
		}
		q.matched[matchKey(g.dim, p, g.fold)] = lists[i]
	}
	return nil
}
