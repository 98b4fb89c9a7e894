package storage

import (
	"context"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// Running a query of the query API (docs/query-api.md): its reads, the
// comparison's, the order and page of the rows, and the answer.

// Query answers req on site at now: it validates req, reads the figures
// of its range (and of the range compared with) and builds the answer.
// Every refusal is a fault of code invalid_query or unsupported_query.
func (db *DB) Query(ctx context.Context, site *Site, req *QueryRequest, now time.Time) (*QueryAnswer, error) {
	loc, err := LoadTimeZone(site.TimeZone)
	if err != nil {
		return nil, err
	}
	if req, err = db.withSegments(ctx, site, req); err != nil {
		return nil, err
	}
	pq, err := parseQuery(req, site, loc, now)
	if err != nil {
		return nil, err
	}
	if pq.allRange {
		if err := db.startAtFirstVisit(ctx, pq); err != nil {
			return nil, err
		}
		pq.fixTimeUnit()
	}
	return db.runQuery(ctx, pq)
}

// startAtFirstVisit starts the range "all" at the midnight, in the
// site's time zone, of the day of the site's first visit (none: the range
// stays as parsed).
func (db *DB) startAtFirstVisit(ctx context.Context, pq *parsedQuery) error {
	first, ok, err := db.FirstVisit(ctx, pq.site.ID)
	if err != nil {
		return err
	}
	if ok {
		f := first.In(pq.loc)
		pq.from = time.Date(f.Year(), f.Month(), f.Day(), 0, 0, 0, 0, pq.loc)
	}
	return db.startAtFirstImportedDay(ctx, pq)
}

// runQuery runs pq (and its comparison) and builds the answer.
func (db *DB) runQuery(ctx context.Context, pq *parsedQuery) (*QueryAnswer, error) {
	labels, ok := pq.bucketLabels(pq.from, pq.to)
	if !ok {
		return nil, invalidQuery("the date_range holds more than %d buckets of %s; ask for a shorter range or a coarser time dimension", MaxTimeLabels, pq.timeDimension())
	}
	rows, estimated, err := db.rangeRows(ctx, pq, pq.from, pq.to, labels)
	if err != nil {
		return nil, err
	}
	pq.sort(rows)
	total := len(rows)
	results := []QueryResult{}
	for i := pq.offset; i < len(rows) && len(results) < pq.limit; i++ {
		results = append(results, QueryResult{Dims: rows[i].Dims, Metrics: rows[i].Metrics, Currency: pq.resultCurrency(rows[i].Dims)})
	}
	if pq.compare != "" {
		if err := db.addComparison(ctx, pq, labels, results); err != nil {
			return nil, err
		}
	}
	a := &QueryAnswer{Results: results, Query: pq.echo()}
	if pq.totalRows {
		a.Meta.TotalRows = &total
	}
	if pq.timeLabels {
		a.Meta.TimeLabels = labels
	}
	if estimated {
		a.Meta.MetricWarnings = estimateWarnings(pq.metrics)
	}
	pq.addRevenueWarnings(&a.Meta)
	a.Meta.RevenueCurrency = pq.revenueDefault
	if err := db.addImportsMeta(ctx, pq, a); err != nil {
		return nil, err
	}
	return a, nil
}

// bucketLabels are the time buckets of [from, to) as the answer labels
// them (none without a time dimension): a first partial week is labelled
// with the range's first day, as Plausible labels it, not the Monday
// before (docs/query-api.md#query-api). False when there are more than
// MaxTimeLabels.
func (pq *parsedQuery) bucketLabels(from, to time.Time) ([]string, bool) {
	unit := pq.unit()
	if unit == "" {
		return nil, true
	}
	labels, ok := TimeLabels(unit, from, to, pq.loc)
	if ok && unit == "week" && len(labels) > 0 {
		labels[0] = max(labels[0], from.In(pq.loc).Format(time.DateOnly))
	}
	return labels, ok
}

// rangeRows reads pq's rows over [from, to), whose buckets are labels, as
// the answer shows them: countries named, the first partial week labelled
// as bucketLabels does, and for a comparison of a time series (the time
// dimension alone) a row for every bucket, zeros included, as Plausible
// pairs the two periods bucket by bucket.
func (db *DB) rangeRows(ctx context.Context, pq *parsedQuery, from, to time.Time, labels []string) ([]StatsRow, bool, error) {
	rows, estimated, err := db.statsRows(ctx, pq, from, to)
	if err != nil {
		return nil, false, err
	}
	pq.nameCodes(rows)
	timeAt := slices.IndexFunc(pq.dimensions, TimeDimension)
	if timeAt < 0 {
		return rows, estimated, nil
	}
	if pq.unit() == "week" && len(labels) > 0 {
		for i := range rows {
			rows[i].Dims[timeAt] = max(rows[i].Dims[timeAt], labels[0])
		}
	}
	if pq.compare != "" && len(pq.dimensions) == 1 {
		seen := make(map[string]bool, len(rows))
		for _, r := range rows {
			seen[r.Dims[0]] = true
		}
		for _, l := range labels {
			if !seen[l] {
				rows = append(rows, StatsRow{Dims: []string{l}, Metrics: pq.emptyMetrics()})
			}
		}
	}
	return rows, estimated, nil
}

// estimateWarnings marks visitors and percentage as estimates
// (docs/query-api.md#how-reports-stay-fast).
func estimateWarnings(metrics []string) map[string]QueryWarning {
	w := map[string]QueryWarning{}
	for _, m := range metrics {
		if m == MetricVisitors || m == MetricPercentage {
			w[m] = QueryWarning{Code: "estimated", Warning: "an estimate from per-day sketches (standard error under 1%): the range has more than 10,000 visitors"}
		}
	}
	return w
}

// sort orders rows by pq.order, then by every dimension ascending, so the
// order is always the same.
func (pq *parsedQuery) sort(rows []StatsRow) {
	type key struct {
		metric int
		dim    int
		desc   bool
	}
	var keys []key
	for _, o := range pq.order {
		k := key{metric: slices.Index(pq.metrics, o[0]), dim: slices.Index(pq.dimensions, o[0]), desc: o[1] == "desc"}
		if k.metric >= 0 {
			k.dim = -1
		}
		keys = append(keys, k)
	}
	for i := range pq.dimensions {
		keys = append(keys, key{metric: -1, dim: i})
	}
	sort.SliceStable(rows, func(a, b int) bool {
		for _, k := range keys {
			var c int
			if k.metric >= 0 {
				x, y := rows[a].Metrics[k.metric], rows[b].Metrics[k.metric]
				c = cmpFloat(x, y)
			} else {
				c = strings.Compare(rows[a].Dims[k.dim], rows[b].Dims[k.dim])
			}
			if k.desc {
				c = -c
			}
			if c != 0 {
				return c < 0
			}
		}
		return false
	})
}

// cmpFloat orders numbers, NaN (a metric without a value) first.
func cmpFloat(x, y float64) int {
	switch xn, yn := math.IsNaN(x), math.IsNaN(y); {
	case xn || yn:
		return cmpBool(yn, xn)
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// cmpBool orders false before true.
func cmpBool(x, y bool) int {
	switch {
	case x == y:
		return 0
	case y:
		return -1
	}
	return 1
}

// queryTimeLayout is how an answer shows its range, as Plausible does.
const queryTimeLayout = "2006-01-02T15:04:05-07:00"

// shownRange is [from, to) as an answer shows it: its first and last
// second in loc.
func shownRange(from, to time.Time, loc *time.Location) []string {
	return []string{from.In(loc).Format(queryTimeLayout), to.Add(-time.Second).In(loc).Format(queryTimeLayout)}
}

// echo is the query as run: defaults filled in, the range as datetimes in
// the site's time zone.
func (pq *parsedQuery) echo() QueryEcho {
	e := QueryEcho{
		SiteID:     pq.site.ID,
		Metrics:    pq.metrics,
		DateRange:  shownRange(pq.from, pq.to, pq.loc),
		Filters:    pq.filterEcho,
		Dimensions: pq.dimensions,
		OrderBy:    pq.order,
		TotalRows:  pq.totalRows,
		TimeLabels: pq.timeLabels,
		Imports:    pq.imports,
		Limit:      pq.limit,
		Offset:     pq.offset,
	}
	if pq.compare != "" {
		from, to := pq.comparisonRange()
		e.Comparison = &QueryComparisonEcho{Mode: pq.compare, DateRange: shownRange(from, to, pq.loc)}
	}
	return e
}
