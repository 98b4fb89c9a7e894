package storage

import (
	"context"
	"math"
	"slices"
	"strings"
	"time"
)

// Comparisons in the query API (docs/query-api.md, include.comparisons):
// the range compared with, each result's counterpart in it, and the
// change of each metric, as Plausible computes them.

// comparisonRange is the range compared with: the same length just
// before, the same days a year before, or the one given.
func (pq *parsedQuery) comparisonRange() (time.Time, time.Time) {
	switch pq.compare {
	case "year_over_year":
		return pq.from.AddDate(-1, 0, 0), pq.to.AddDate(-1, 0, 0)
	case "custom":
		return pq.compareRng[0], pq.compareRng[1]
	}
	if pq.dateOnly {
		// Whole days: a day with a DST change is 23 or 25 hours.
		days := int(math.Round(pq.to.Sub(pq.from).Hours() / 24))
		return pq.from.AddDate(0, 0, -days), pq.from
	}
	return pq.from.Add(-pq.to.Sub(pq.from)), pq.from
}

// addComparison gives each result the figures of its counterpart in the
// comparison range: the same dimension values, the time bucket at the same
// position in the range.
func (db *DB) addComparison(ctx context.Context, pq *parsedQuery, labels []string, results []QueryResult) error {
	from, to := pq.comparisonRange()
	timeAt := slices.IndexFunc(pq.dimensions, TimeDimension)
	cLabels, ok := pq.bucketLabels(from, to)
	if !ok {
		return invalidQuery("the comparison range holds more than %d time buckets", MaxTimeLabels)
	}
	rows, _, err := db.rangeRows(ctx, pq, from, to, cLabels)
	if err != nil {
		return err
	}
	byKey := map[string]StatsRow{}
	for _, row := range rows {
		byKey[strings.Join(row.Dims, "\x00")] = row
	}
	for i := range results {
		dims := slices.Clone(results[i].Dims)
		if timeAt >= 0 {
			dims[timeAt] = ""
			if at := slices.Index(labels, results[i].Dims[timeAt]); at >= 0 && at < len(cLabels) {
				dims[timeAt] = cLabels[at]
			}
		}
		c := &QueryComparison{Dims: dims, Metrics: pq.emptyMetrics(), Change: make([]*float64, len(pq.metrics))}
		if row, ok := byKey[strings.Join(dims, "\x00")]; ok {
			copy(c.Metrics, row.Metrics)
		}
		for j, m := range pq.metrics {
			c.Change[j] = metricChange(m, c.Metrics[j], results[i].Metrics[j])
		}
		results[i].Comparison = c
	}
	return nil
}

// metricChange is Plausible's change: the difference in points for
// bounce_rate (none when there was none before) and conversion_rate (to
// one decimal), else the percentage change of the figures as shown
// (percentage to one decimal), rounded; 100 from nothing to something, 0
// from nothing to nothing; none where a side has no value.
func metricChange(metric string, before, now float64) *float64 {
	var v float64
	switch {
	case math.IsNaN(before) || math.IsNaN(now):
		// A revenue metric without revenue on one side.
		return nil
	case metric == metricConversionRate:
		v = round(now-before, 1)
	case metric == MetricBounceRate:
		if before == 0 {
			return nil
		}
		v = now - before
	case before == 0 && now > 0:
		v = 100
	case before == 0:
		v = 0
	default:
		v = math.Round((now - before) / before * 100)
	}
	return &v
}
