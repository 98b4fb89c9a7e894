package storage

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Plausible's engagement metrics, read from what its engagement events
// added to pageviews (intake_engagement.go; docs/query-api.md#scroll-depth-and-time-on-page).
const (
	MetricScrollDepth = "scroll_depth"
	MetricTimeOnPage  = "time_on_page"
)

// engagementMetric reports whether m is read from the pageviews'
// engagement.
func engagementMetric(m string) bool { return m == MetricScrollDepth || m == MetricTimeOnPage }

// validateEngagement refuses the engagement metrics without an event:page
// dimension or top-level filter, as Plausible does: they measure pages.
func (pq *parsedQuery) validateEngagement() error {
	for _, m := range pq.metrics {
		if !engagementMetric(m) || slices.Contains(pq.dimensions, "event:page") {
			continue
		}
		if !slices.ContainsFunc(pq.filters, func(f QueryFilter) bool { return f.Dim == "event:page" }) {
			return invalidQuery("the metric %q can only be queried with an event:page filter or dimension: add \"dimensions\": [\"event:page\"] or a filter such as [\"is\", \"event:page\", [\"/\"]]", m)
		}
	}
	return nil
}

// statsWithEngagement is StatsEstimate of a query with engagement
// metrics: the other metrics as usual (pageviews when there are none, for
// the groups), then each group's scroll depth and time on page.
func (db *DB) statsWithEngagement(ctx context.Context, q StatsQuery) ([]StatsRow, bool, error) {
	base := q
	base.Metrics = nil
	for _, m := range q.Metrics {
		if !engagementMetric(m) {
			base.Metrics = append(base.Metrics, m)
		}
	}
	if len(base.Metrics) == 0 {
		base.Metrics = []string{MetricPageviews}
	}
	rows, estimated, err := db.StatsEstimate(ctx, base)
	if err != nil {
		return nil, false, err
	}
	eng, err := db.engagementGroups(ctx, q)
	if err != nil {
		return nil, false, err
	}
	for i, row := range rows {
		got := eng[strings.Join(row.Dims, keySep)]
		out := make([]float64, len(q.Metrics))
		for j, m := range q.Metrics {
			switch m {
			case MetricScrollDepth:
				out[j] = got.scrollDepth()
			case MetricTimeOnPage:
				out[j] = got.timeOnPage()
			default:
				out[j] = row.Metrics[slices.Index(base.Metrics, m)]
			}
		}
		rows[i].Metrics = out
	}
	return rows, estimated, nil
}

// engagementSums is a group's engagement: the sum over its visitors of
// each one's deepest scroll, their engaged milliseconds, and how many.
type engagementSums struct{ depth, ms, visitors float64 }

// scrollDepth is Plausible's scroll_depth: the visitors' deepest scroll
// of the group's pages, averaged, in whole percent; NaN (null) without engagement.
func (s engagementSums) scrollDepth() float64 {
	if s.visitors == 0 {
		return math.NaN() // no engagement: null, as Plausible answers
	}
	return math.Round(s.depth / s.visitors)
}

// timeOnPage is the engaged time per visitor, in whole seconds.
func (s engagementSums) timeOnPage() float64 {
	if s.visitors == 0 {
		return 0
	}
	return math.Round(s.ms / s.visitors / 1000)
}

// engagementGroups reads q's pageviews that hold an engagement, per group
// and visitor (the deepest scroll, the time summed), and sums them per
// group, keyed as statsGroups keys its groups. It reads the events of the
// range through the site's event index, as the event reads do.
func (db *DB) engagementGroups(ctx context.Context, q StatsQuery) (map[string]engagementSums, error) {
	q.d = db.d
	if err := db.resolveMatches(ctx, &q); err != nil {
		return nil, err
	}
	b := &sqlBuilder{q: &q}
	dims, err := b.dims()
	if err != nil {
		return nil, err
	}
	where, err := b.where()
	if err != nil {
		return nil, err
	}
	from := `events e`
	if q.needsVisit() {
		from = `events e LEFT JOIN sessions s ON ` + eventVisitJoin
	}
	from += b.goalRows()
	n := len(q.Dimensions)
	cols := make([]string, n+1)
	for i := range cols {
		cols[i] = fmt.Sprint(i + 1)
	}
	query := `SELECT ` + dims + `e.anon_id, MAX(e.scroll_depth), COALESCE(SUM(e.engaged_ms), 0)
		FROM ` + from + ` WHERE e.site_id = ? AND e.ts_ms >= ? AND e.ts_ms < ? AND e.type = 'pageview' AND e.scroll_depth IS NOT NULL` +
		where + ` GROUP BY ` + strings.Join(cols, ", ")
	out := map[string]engagementSums{}
	err = db.scanGroups(ctx, query, b.args(), n+1, 2, func(key string, v []float64) {
		group := ""
		if n > 0 {
			group = key[:strings.LastIndex(key, keySep)]
		}
		s := out[group]
		s.depth, s.ms, s.visitors = s.depth+v[0], s.ms+v[1], s.visitors+1
		out[group] = s
	})
	return out, err
}
