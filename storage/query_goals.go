package storage

import (
	"context"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Goals in the query API (docs/query-api.md#goals-and-funnels): the event:goal
// dimension and filter, conversion rates and revenue. An event:goal
// filter is rewritten into the filters on events that define the goals it
// names (GoalFilter), a breakdown by goal is one read of all goals
// (StatsQuery.Goals; one read per goal where visit metrics or revenue
// need it), and the rates and revenue are computed from further reads of
// the same machinery.

// The query API's goal metrics, Plausible's names (the goal dimension is
// GoalDimension).
const (
	metricConversionRate      = "conversion_rate"
	metricGroupConversionRate = "group_conversion_rate"
	metricTotalRevenue        = "total_revenue"
	metricAverageRevenue      = "average_revenue"
)

// goalMetric reports whether m is computed by this file.
func goalMetric(m string) bool {
	return m == metricConversionRate || m == metricGroupConversionRate || m == metricTotalRevenue || m == metricAverageRevenue
}

// namesGoal reports whether fs test event:goal anywhere.
func namesGoal(fs []QueryFilter) bool {
	for _, f := range fs {
		if f.Dim == GoalDimension || namesGoal(f.Children) {
			return true
		}
	}
	return false
}

// goalQuery reports whether pq needs this file: a goal dimension, filter
// or metric.
func (pq *parsedQuery) goalQuery() bool {
	return slices.Contains(pq.dimensions, GoalDimension) || namesGoal(pq.filters) || slices.ContainsFunc(pq.metrics, goalMetric)
}

// validateGoals checks the goal metrics' needs, as Plausible has them.
func (pq *parsedQuery) validateGoals() error {
	byGoal := slices.Contains(pq.dimensions, GoalDimension)
	for _, m := range pq.metrics {
		if !goalMetric(m) {
			if m == MetricPercentage && byGoal {
				return unsupportedQuery("the metric percentage cannot be queried with the event:goal dimension")
			}
			continue
		}
		// Revenue needs no goal filter or dimension: its currency comes
		// from the revenue goals the query matches (query_revenue.go).
		if !RevenueMetric(m) && !byGoal && !namesGoal(pq.filters) {
			return invalidQuery("the metric %q requires an event:goal filter or an event:goal dimension", m)
		}
		if m == metricGroupConversionRate && len(pq.dimensions) == 0 {
			return invalidQuery("the metric group_conversion_rate requires non-empty dimensions")
		}
		if m == metricConversionRate || m == metricGroupConversionRate {
			for _, f := range pq.filters {
				if f.Dim != GoalDimension && namesGoal([]QueryFilter{f}) {
					return unsupportedQuery("with %s, event:goal may be filtered on at the top level of filters only, not inside and, or or not", m)
				}
			}
		}
	}
	return nil
}

// statsRows answers pq over [from, to) as rows in pq's metric order, and
// whether visitors are estimated.
func (db *DB) statsRows(ctx context.Context, pq *parsedQuery, from, to time.Time) ([]StatsRow, bool, error) {
	if slices.Contains(pq.metrics, MetricExitRate) {
		return db.exitRateStats(ctx, pq, from, to)
	}
	if !pq.goalQuery() {
		return db.StatsEstimate(ctx, pq.statsQuery(from, to))
	}
	goals, err := db.Goals(ctx, pq.site.ID)
	if err != nil {
		return nil, false, err
	}
	return db.goalStats(ctx, pq, goals, from, to)
}

// goalPart is one read of a goal query: all of it, or (by goal) one
// goal's events.
type goalPart struct {
	name   string
	filter []QueryFilter
}

// goalStats answers a query with a goal dimension, filter or metric.
func (db *DB) goalStats(ctx context.Context, pq *parsedQuery, goals []Goal, from, to time.Time) ([]StatsRow, bool, error) {
	gi := slices.Index(pq.dimensions, GoalDimension)
	dims := slices.Clone(pq.dimensions)
	parts := []goalPart{{}}
	eventFilters := pq.filters
	if gi >= 0 {
		var listed []Goal
		var err error
		if listed, eventFilters, err = listedGoals(pq.filters, goals); err != nil {
			return nil, false, err
		}
		dims = slices.Delete(dims, gi, gi+1)
		parts = parts[:0]
		for _, g := range listed {
			parts = append(parts, goalPart{name: g.Name, filter: []QueryFilter{GoalFilter(g)}})
		}
	}
	filters, err := goalFilters(eventFilters, goals)
	if err != nil {
		return nil, false, err
	}
	if pq.revenueAsked() {
		matching := goals
		if matching, _, err = listedGoals(pq.filters, goals); err != nil {
			return nil, false, err
		}
		pq.planRevenue(matching, gi >= 0)
	}
	// Imported days, where they answer the query (import_goals.go).
	var imported map[string]importedGoalSums
	if picked, ok := pq.goalImportable(goals); ok {
		if imported, err = db.importedGoals(ctx, pq, picked, gi >= 0, from, to); err != nil {
			return nil, false, err
		}
	}
	// The metrics the reads compute: the asked ones but the goal metrics,
	// and visitors and events, which the rates and the goal rows need.
	base := []string{MetricVisitors, MetricEvents}
	for _, m := range pq.metrics {
		if !goalMetric(m) && !slices.Contains(base, m) {
			base = append(base, m)
		}
	}
	q := pq.statsQuery(from, to)
	q.Dimensions, q.Metrics = dims, base
	withGoal := func(row []string, name string) []string {
		if gi < 0 {
			return row
		}
		return slices.Insert(slices.Clone(row), gi, name)
	}
	type built struct {
		dims []string
		rest []string // dims without the goal
		vals map[string]float64
	}
	var rows []built
	estimated := false
	reads, oneRead := parts, gi >= 0 && len(parts) > 0 && oneGoalRead(base)
	if oneRead {
		// Every goal in one read of the range (storage's Goals): the
		// goal's index is the row's goal dimension.
		reads = []goalPart{{}}
	}
	for _, p := range reads {
		pqq := q
		pqq.Filters = append(slices.Clone(filters), p.filter...)
		if oneRead {
			pqq.Dimensions = slices.Insert(slices.Clone(dims), gi, GoalDimension)
			pqq.Goals = make([]QueryFilter, len(parts))
			for i, gp := range parts {
				pqq.Goals[i] = gp.filter[0]
			}
		}
		got, est, err := db.StatsEstimate(ctx, pqq)
		if err != nil {
			return nil, false, err
		}
		estimated = estimated || est
		for _, row := range got {
			if oneRead {
				i, err := strconv.Atoi(row.Dims[gi])
				if err != nil || i < 0 || i >= len(parts) {
					continue
				}
				p = parts[i]
				row.Dims = slices.Delete(slices.Clone(row.Dims), gi, gi+1)
			}
			vals := map[string]float64{}
			for i, m := range base {
				vals[m] = row.Metrics[i]
			}
			if sums, ok := imported[p.name]; ok {
				sums.addTo(vals)
				delete(imported, p.name)
			}
			if gi >= 0 && vals[MetricEvents] == 0 {
				continue // a goal no event completed has no row
			}
			rows = append(rows, built{dims: withGoal(row.Dims, p.name), rest: row.Dims, vals: vals})
		}
	}
	for _, p := range parts {
		if sums, ok := imported[p.name]; ok && gi >= 0 && sums.events > 0 {
			vals := map[string]float64{}
			sums.addTo(vals)
			rows = append(rows, built{dims: withGoal([]string{}, p.name), rest: []string{}, vals: vals})
		}
	}
	if slices.Contains(pq.metrics, metricConversionRate) || slices.Contains(pq.metrics, metricGroupConversionRate) {
		// Of all visitors of the range: the filters but those on goals.
		var others []QueryFilter
		for _, f := range pq.filters {
			if f.Dim != GoalDimension {
				others = append(others, f)
			}
		}
		all := pq.statsQuery(from, to)
		all.Filters, all.Dimensions, all.Metrics = others, nil, []string{MetricVisitors}
		all.Imports = imported != nil
		tot, _, err := db.StatsEstimate(ctx, all)
		if err != nil {
			return nil, false, err
		}
		total := tot[0].Metrics[0]
		groups := map[string]float64{}
		if slices.Contains(pq.metrics, metricGroupConversionRate) && len(dims) > 0 {
			all.Dimensions = dims
			byGroup, _, err := db.StatsEstimate(ctx, all)
			if err != nil {
				return nil, false, err
			}
			for _, g := range byGroup {
				groups[strings.Join(g.Dims, "\x00")] = g.Metrics[0]
			}
		}
		for _, b := range rows {
			v := b.vals[MetricVisitors]
			b.vals[metricConversionRate] = rate(v, total)
			if len(dims) == 0 {
				b.vals[metricGroupConversionRate] = rate(v, total)
			} else {
				b.vals[metricGroupConversionRate] = rate(v, groups[strings.Join(b.rest, "\x00")])
			}
		}
	}
	if pq.revenueAsked() {
		var rev map[string]revenueSum
		if pq.revenueWarning == "" {
			if rev, err = db.revenue(ctx, q, filters, parts, withGoal, revenueGoalCurrencies(goals)); err != nil {
				return nil, false, err
			}
		}
		for _, b := range rows {
			goal := ""
			if gi >= 0 {
				goal = b.dims[gi]
			}
			// Without a currency for the row (a warning, a goal without
			// one) revenue is none (null); with one, the amounts' sum
			// and mean, 0 without any, as Plausible's answer has them.
			if pq.rowCurrency(goal) == "" {
				b.vals[metricTotalRevenue], b.vals[metricAverageRevenue] = math.NaN(), math.NaN()
				continue
			}
			sum := rev[strings.Join(b.dims, "\x00")]
			b.vals[metricTotalRevenue], b.vals[metricAverageRevenue] = sum.totalValue(), sum.averageValue()
		}
	}
	out := make([]StatsRow, 0, len(rows))
	for _, b := range rows {
		row := StatsRow{Dims: b.dims, Metrics: make([]float64, len(pq.metrics))}
		for i, m := range pq.metrics {
			row.Metrics[i] = b.vals[m]
		}
		out = append(out, row)
	}
	if len(pq.dimensions) == 0 && len(out) == 0 {
		out = append(out, StatsRow{Dims: []string{}, Metrics: pq.emptyMetrics()})
	}
	return out, estimated, nil
}

// emptyMetrics are the metrics of a group without data: 0, but none
// (NaN, null in the answer) for the revenue metrics without one currency
// for every row (query_revenue.go).
func (pq *parsedQuery) emptyMetrics() []float64 {
	m := make([]float64, len(pq.metrics))
	for i, name := range pq.metrics {
		if RevenueMetric(name) && (pq.revenueDefault == "" || pq.revenueWarning != "") {
			m[i] = math.NaN()
		}
	}
	return m
}

// RevenueMetric reports whether m is total_revenue or average_revenue,
// whose values the answer shows as money (docs/query-api.md#goals-and-funnels).
func RevenueMetric(m string) bool { return m == metricTotalRevenue || m == metricAverageRevenue }

// oneGoalRead reports whether a breakdown by goal with the storage
// metrics base is one read of the range for all goals: metrics counted
// from events only (a visit's metrics read visits, per goal).
func oneGoalRead(base []string) bool {
	for _, m := range base {
		if m != MetricVisitors && m != MetricEvents && m != MetricPageviews {
			return false
		}
	}
	return true
}

// rate is n of d as a percentage with two decimals, as the query API
// gives percentages; 0 of nothing.
func rate(n, d float64) float64 {
	if d == 0 {
		return 0
	}
	return round2(100 * n / d)
}

func round2(x float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', 2, 64), 64)
	return v
}

// goalFilters rewrites every event:goal condition of fs into the filters
// on events of the goals it selects (by name: is, contains and matches,
// with case_sensitive false for is and contains, and their _not forms).
// is and is_not must name goals of the site.
func goalFilters(fs []QueryFilter, goals []Goal) ([]QueryFilter, error) {
	out := make([]QueryFilter, 0, len(fs))
	for _, f := range fs {
		g, err := goalNode(f, goals)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

func goalNode(f QueryFilter, goals []Goal) (QueryFilter, error) {
	if len(f.Children) > 0 {
		children, err := goalFilters(f.Children, goals)
		f.Children = children
		return f, err
	}
	if f.Dim != GoalDimension {
		return f, nil
	}
	picked, err := pickGoals(f, goals)
	if err != nil {
		return f, err
	}
	var or []QueryFilter
	for _, g := range picked {
		or = append(or, GoalFilter(g))
	}
	// No goal picked: an empty is, which matches nothing.
	node := QueryFilter{Op: "or", Children: or}
	if len(or) == 0 {
		node = QueryFilter{Op: "is", Dim: "event:name", Values: []string{}}
	}
	if strings.HasSuffix(f.Op, "_not") {
		node = QueryFilter{Op: "not", Children: []QueryFilter{node}}
	}
	return node, nil
}

// pickGoals returns the goals whose names the condition f on event:goal
// names (its _not form: the goals its positive form names). is and
// is_not must name goals of the site.
func pickGoals(f QueryFilter, goals []Goal) ([]Goal, error) {
	op := strings.TrimSuffix(f.Op, "_not")
	fold := func(s string) string {
		if f.Fold {
			return asciiLower(s)
		}
		return s
	}
	var res []*regexp.Regexp
	if op == "matches" {
		for _, v := range f.Values {
			re, err := regexp.Compile(v)
			if err != nil {
				return nil, invalidQuery("a matches pattern is not a valid RE2 regular expression: %v", err)
			}
			res = append(res, re)
		}
	}
	named := map[string]bool{}
	var picked []Goal
	for _, g := range goals {
		hit := false
		for i, v := range f.Values {
			switch op {
			case "is":
				if fold(g.Name) == fold(v) {
					hit, named[fold(v)] = true, true
				}
			case "contains":
				hit = hit || strings.Contains(fold(g.Name), fold(v))
			case "matches":
				hit = hit || res[i].MatchString(g.Name)
			}
		}
		if hit {
			picked = append(picked, g)
		}
	}
	if op == "is" {
		for _, v := range f.Values {
			if !named[fold(v)] {
				return nil, invalidQuery("the goal %q is not configured for this site (GET /v1/sites/:siteId/goals lists them)", v)
			}
		}
	}
	return picked, nil
}

// listedGoals splits fs for a breakdown by goal, as Plausible does: the
// top-level conditions on event:goal choose the goals listed (all must
// hold; a _not form leaves out the goals it names); the rest filter
// events.
func listedGoals(fs []QueryFilter, goals []Goal) ([]Goal, []QueryFilter, error) {
	listed := goals
	var rest []QueryFilter
	for _, f := range fs {
		if f.Dim != GoalDimension {
			rest = append(rest, f)
			continue
		}
		picked, err := pickGoals(f, goals)
		if err != nil {
			return nil, nil, err
		}
		keep := listed[:0:0]
		for _, g := range listed {
			in := slices.ContainsFunc(picked, func(p Goal) bool { return p.ID == g.ID })
			if in != strings.HasSuffix(f.Op, "_not") {
				keep = append(keep, g)
			}
		}
		listed = keep
	}
	return listed, rest, nil
}
