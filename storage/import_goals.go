package storage

import (
	"context"
	"slices"
	"strings"
	"time"
)

// Imported days in goal queries (docs/query-api.md, include.imports): a
// goal's imported figures are those of the imported custom events of its
// event name, or of the imported pages its page path matches, as
// Plausible counts goals over its imported_custom_events and
// imported_pages tables (lib/plausible/stats/imported/base.ex,
// decide_tables). Imported days count in a goal query of no dimension but
// event:goal, filtered on event:goal alone (at the top level: a breakdown
// by goal with any of the goal conditions, a filter with is, contains or
// matches), asking visitors, events, pageviews and conversion rates, over
// goals without a property condition; and, when the query filters on
// goals, goals of one kind (all of events or all of pages), as Plausible
// asks. Any other goal query is answered without them (unsupported_query).

// goalImportMetrics are the metrics imported rollups answer in a goal
// query.
var goalImportMetrics = []string{MetricVisitors, MetricEvents, MetricPageviews, metricConversionRate, metricGroupConversionRate}

// importedGoalSums are a goal's imported figures.
type importedGoalSums struct {
	visitors, events, pageviews float64
}

// goalImportable reports whether imported days can answer the goal query
// pq over the site's goals: the goals they count (those listed by a
// breakdown by goal, or picked by the goal filters), or false.
func (pq *parsedQuery) goalImportable(goals []Goal) ([]Goal, bool) {
	byGoal := slices.Equal(pq.dimensions, []string{GoalDimension})
	if !pq.imports || !byGoal && len(pq.dimensions) > 0 {
		return nil, false
	}
	for _, m := range pq.metrics {
		if !slices.Contains(goalImportMetrics, m) {
			return nil, false
		}
	}
	for _, f := range pq.filters {
		if f.Dim != GoalDimension || len(f.Children) > 0 || !byGoal && strings.HasSuffix(f.Op, "_not") {
			return nil, false
		}
	}
	if !byGoal && len(pq.filters) == 0 {
		return nil, false
	}
	// listedGoals keeps the goals every goal condition holds for; it
	// cannot fail here, goalStats having checked the conditions.
	picked, _, err := listedGoals(pq.filters, goals)
	if err != nil {
		return nil, false
	}
	pages := 0
	for _, g := range picked {
		if g.PropName != "" {
			return nil, false
		}
		if g.EventName == "" {
			pages++
		}
	}
	if len(pq.filters) > 0 && pages > 0 && pages < len(picked) {
		return nil, false
	}
	return picked, true
}

// importedGoals reads the imported figures of goals over [from, to)'s
// whole days: by goal name with a breakdown by goal, else in all (key
// ""), each imported row counted once however many of goals it matches.
func (db *DB) importedGoals(ctx context.Context, pq *parsedQuery, goals []Goal, byGoal bool, from, to time.Time) (map[string]importedGoalSums, error) {
	out := map[string]importedGoalSums{}
	q := pq.statsQuery(from, to)
	first, end := q.importedDays()
	if first >= end || len(goals) == 0 {
		return out, nil
	}
	// A page goal's condition on the page: the part of its filter on
	// event:page (GoalFilter).
	pageTests := make([]valueFilter, len(goals))
	for i, g := range goals {
		if g.EventName != "" {
			continue
		}
		for _, c := range GoalFilter(g).Children {
			if c.Dim == "event:page" {
				pageTests[i], _ = compileValueFilter([]QueryFilter{c})
			}
		}
	}
	// Asked for pageviews, a day's page without any is left out, as
	// withImported leaves it out.
	minPageviews := 0
	if slices.Contains(pq.metrics, MetricPageviews) {
		minPageviews = 1
	}
	rows, err := db.read.QueryContext(ctx, `SELECT dim, value, SUM(visitors), SUM(events), SUM(pageviews) FROM imported_rows
		WHERE site_id = ? AND dim IN ('event:name', 'event:page') AND day >= ? AND day < ?
		AND (dim = 'event:name' OR pageviews >= ?)
		AND import_id IN (SELECT id FROM imports WHERE site_id = ? AND complete = 1)
		GROUP BY 1, 2`, q.Site, first, end, minPageviews, q.Site)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var dim, value string
		var s importedGoalSums
		if err := rows.Scan(&dim, &value, &s.visitors, &s.events, &s.pageviews); err != nil {
			return nil, err
		}
		if dim == "event:name" {
			s.pageviews = 0 // custom events are no pageviews
		}
		counted := false
		for i, g := range goals {
			hit := dim == "event:name" && g.EventName == value ||
				dim == "event:page" && pageTests[i] != nil && pageTests[i](value)
			if !hit || !byGoal && counted {
				continue
			}
			counted = true
			key := ""
			if byGoal {
				key = g.Name
			}
			sum := out[key]
			sum.visitors += s.visitors
			sum.events += s.events
			sum.pageviews += s.pageviews
			out[key] = sum
		}
	}
	return out, rows.Err()
}

// addTo adds s to a goal row's figures.
func (s importedGoalSums) addTo(vals map[string]float64) {
	vals[MetricVisitors] += s.visitors
	vals[MetricEvents] += s.events
	vals[MetricPageviews] += s.pageviews
}
