package storage

import (
	"context"
	"math"
	"slices"
	"time"
)

// Plausible's exit_rate (docs/query-api.md#exit-rate): in a breakdown by
// visit:exit_page, the visits that left the site on the page as a
// percentage (one decimal) of the page's pageviews, those counted under
// the query's filters but its top-level visit:exit_page ones (a page's
// views are not only those of the visits that left on it); null for a
// page without pageviews. As Plausible has it, only with the one
// dimension visit:exit_page and no filter on an event dimension.

// MetricExitRate is Plausible's exit_rate.
const MetricExitRate = "exit_rate"

// validateExitRate refuses exit_rate where Plausible does, with its
// messages.
func (pq *parsedQuery) validateExitRate() error {
	if !slices.Contains(pq.metrics, MetricExitRate) {
		return nil
	}
	if !slices.Equal(pq.dimensions, []string{"visit:exit_page"}) {
		return invalidQuery("Metric `exit_rate` requires a `\"visit:exit_page\"` dimension. No other dimensions are allowed.")
	}
	if filtersEvents(pq.filters) {
		return invalidQuery("Metric `exit_rate` cannot be queried when filtering on event dimensions.")
	}
	for _, m := range pq.metrics {
		if goalMetric(m) {
			return unsupportedQuery("the metric exit_rate cannot be queried with %s: ask them in two queries", m)
		}
	}
	return nil
}

// filtersEvents reports whether fs test an event dimension (event:page,
// event:name, event:goal, event:props:*), but within has_done and
// has_not_done, which choose visits.
func filtersEvents(fs []QueryFilter) bool {
	for _, f := range fs {
		if f.Op == "has_done" || f.Op == "has_not_done" {
			continue
		}
		if EventDimension(f.Dim) || filtersEvents(f.Children) {
			return true
		}
	}
	return false
}

// exitRateStats answers a query with exit_rate: its other metrics and
// the visits by exit page, then the pages' pageviews.
func (db *DB) exitRateStats(ctx context.Context, pq *parsedQuery, from, to time.Time) ([]StatsRow, bool, error) {
	q := pq.statsQuery(from, to)
	base := []string{MetricVisits}
	for _, m := range pq.metrics {
		if m != MetricExitRate && !slices.Contains(base, m) {
			base = append(base, m)
		}
	}
	q.Metrics = base
	rows, estimated, err := db.StatsEstimate(ctx, q)
	if err != nil {
		return nil, false, err
	}
	views := pq.statsQuery(from, to)
	views.Dimensions, views.Metrics, views.Filters = []string{"event:page"}, []string{MetricPageviews}, nil
	for _, f := range pq.filters {
		if f.Dim != "visit:exit_page" {
			views.Filters = append(views.Filters, f)
		}
	}
	byPage, _, err := db.StatsEstimate(ctx, views)
	if err != nil {
		return nil, false, err
	}
	pageviews := make(map[string]float64, len(byPage))
	for _, r := range byPage {
		pageviews[r.Dims[0]] = r.Metrics[0]
	}
	for i, row := range rows {
		out := make([]float64, len(pq.metrics))
		for j, m := range pq.metrics {
			if m != MetricExitRate {
				out[j] = row.Metrics[slices.Index(base, m)]
				continue
			}
			out[j] = math.NaN() // a page without pageviews: null
			if pv := pageviews[row.Dims[0]]; pv > 0 {
				out[j] = round(100*row.Metrics[0]/pv, 1)
			}
		}
		rows[i].Metrics = out
	}
	return rows, estimated, nil
}
