package storage

import (
	"context"
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
	var labels []string
	if unit := pq.unit(); unit != "" {
		var ok bool
		if labels, ok = TimeLabels(unit, pq.from, pq.to, pq.loc); !ok {
			return nil, invalidQuery("the date_range holds more than %d buckets of %s; ask for a shorter range or a coarser time dimension", MaxTimeLabels, pq.timeDimension())
		}
	}
	rows, estimated, err := db.statsRows(ctx, pq, pq.from, pq.to)
	if err != nil {
		return nil, err
	}
	pq.nameCodes(rows)
	pq.sort(rows)
	total := len(rows)
	results := []QueryResult{}
	for i := pq.offset; i < len(rows) && len(results) < pq.limit; i++ {
		results = append(results, QueryResult{Dims: rows[i].Dims, Metrics: rows[i].Metrics})
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
	a.Meta.RevenueCurrency = pq.revenueCurrency
	if err := db.addImportsMeta(ctx, pq, a); err != nil {
		return nil, err
	}
	return a, nil
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

func cmpFloat(x, y float64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
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
