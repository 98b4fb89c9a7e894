package storage

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Imported days in the query API (docs/query-api.md, include.imports):
// with include.imports a report adds the imported rollups of the whole
// days of its range to its own figures, as Plausible's Stats API v2 does
// (lib/plausible/stats/imported/imported.ex, merge_imported and
// select_joined_metrics: sums of visitors, visits, pageviews and events;
// bounce rate and visit duration over the visits of both). A query the
// rollups cannot answer is read without them, and says why, as Plausible's
// Imported.Base.decide_tables does: more than one dimension besides time,
// filters on another dimension than the one grouped by, a dimension no
// rollup holds, or hours.

// importedDims are the dimensions imported rollups hold, besides the whole
// site (""): what Plausible's CSV export has of each report
// (lib/plausible/exports.ex, export_queries).
var importedDims = map[string]bool{
	"visit:source": true, "visit:referrer": true, "visit:utm_source": true, "visit:utm_medium": true,
	"visit:utm_campaign": true, "visit:utm_term": true, "visit:utm_content": true,
	"visit:entry_page": true, "visit:exit_page": true, "visit:country": true, "visit:region": true, "visit:device": true,
	"visit:browser": true, "visit:os": true, "event:page": true, "event:name": true,
}

// ImportedSourcesDim is the dimension of the imported rows that keep each
// row of Plausible's imported_sources whole (ImportedSourcesValue), so that
// a query on two of its columns (a breakdown by source filtered on a UTM
// tag, two tags) counts what Plausible's one table counts. The columns
// have their own rows too (visit:source, ...), which the queries on one
// column read.
const ImportedSourcesDim = "sources"

// importedSourceCols are the columns of an ImportedSourcesDim row, in
// order.
var importedSourceCols = []string{"visit:source", "visit:referrer", "visit:utm_source", "visit:utm_medium",
	"visit:utm_campaign", "visit:utm_content", "visit:utm_term"}

// sourcesSep joins the columns of an ImportedSourcesDim row; no column
// holds it (ImportedSourcesValue takes it out).
const sourcesSep = "\x1f"

// sourcesColMax is how many bytes of each column an ImportedSourcesDim row
// keeps, so that the row's value stays well under PostgreSQL's bound on an
// index entry (about 2.7 kB): 7 columns of at most 256 bytes.
const sourcesColMax = 256

// ImportedSourcesValue is the value of an ImportedSourcesDim row: cols are
// the row's shown values in the order of visit:source, visit:referrer,
// visit:utm_source, visit:utm_medium, visit:utm_campaign,
// visit:utm_content, visit:utm_term (missing ones are NotSet).
func ImportedSourcesValue(cols []string) string {
	out := make([]string, len(importedSourceCols))
	for i := range out {
		v := NotSet
		if i < len(cols) {
			v = strings.ReplaceAll(cols[i], sourcesSep, "")
		}
		if len(v) > sourcesColMax {
			v = strings.ToValidUTF8(v[:sourcesColMax], "")
		}
		out[i] = v
	}
	return strings.Join(out, sourcesSep)
}

// sourcesTest is a condition of a query on one column of an
// ImportedSourcesDim row.
type sourcesTest struct {
	col  int
	pass valueFilter
}

// sourcesPlan is how the ImportedSourcesDim rows answer filters fs with
// group (a column, or "") grouped by: a test per top-level condition, each
// on one column; false when they cannot (another dimension, a condition
// over two columns).
func sourcesPlan(fs []QueryFilter, group string) ([]sourcesTest, bool) {
	if group != "" && !slices.Contains(importedSourceCols, group) {
		return nil, false
	}
	var tests []sourcesTest
	for _, f := range fs {
		d, ok := singleFilterDim([]QueryFilter{f})
		col := slices.Index(importedSourceCols, d)
		if !ok || col < 0 {
			return nil, false
		}
		pass, ok := compileValueFilter([]QueryFilter{f})
		if !ok {
			return nil, false
		}
		tests = append(tests, sourcesTest{col: col, pass: pass})
	}
	return tests, true
}

// Reasons a query leaves imported days out, Plausible's
// imports_skip_reason values.
const (
	ImportsNoData              = "no_imported_data"
	ImportsOutOfRange          = "out_of_range"
	ImportsUnsupportedQuery    = "unsupported_query"
	ImportsUnsupportedInterval = "unsupported_interval"
)

// ImportedInclusion is what a query does with imported days: whether it
// includes them, else why not, and the imported days its range holds.
type ImportedInclusion struct {
	Included   bool
	SkipReason string
	// Ranges are the imported days of the range, [first, last] per import
	// (whether included or not), oldest first.
	Ranges [][2]string
}

// importedPlan is the dimension whose rollups answer q ("" for the whole
// site's), or the reason none can.
func (q *StatsQuery) importedPlan() (string, string) {
	dim := ""
	for _, d := range q.Dimensions {
		switch {
		case d == "time:hour" || d == "time:minute" || d == "time" && q.TimeUnit == "hour":
			return "", ImportsUnsupportedInterval
		case TimeDimension(d):
		case !importedDims[d] || dim != "":
			return "", ImportsUnsupportedQuery
		default:
			dim = d
		}
	}
	if len(q.Goals) > 0 {
		return "", ImportsUnsupportedQuery
	}
	if len(q.Filters) == 0 {
		return dim, ""
	}
	fd, ok := singleFilterDim(q.Filters)
	if ok && importedDims[fd] && (dim == "" || fd == dim) {
		if _, ok := compileValueFilter(q.Filters); ok {
			return fd, ""
		}
		return "", ImportsUnsupportedQuery
	}
	if _, ok := sourcesPlan(q.Filters, dim); ok {
		return ImportedSourcesDim, ""
	}
	return "", ImportsUnsupportedQuery
}

// importedGroup is the dimension besides time q groups by, "" for none.
func (q *StatsQuery) importedGroup() string {
	for _, d := range q.Dimensions {
		if !TimeDimension(d) {
			return d
		}
	}
	return ""
}

// importedDays are the local days wholly inside [q.From, q.To): the first,
// and the one after the last.
func (q *StatsQuery) importedDays() (string, string) {
	zone := q.Zone
	if zone == nil {
		zone = time.UTC
	}
	f := q.From.In(zone)
	first := time.Date(f.Year(), f.Month(), f.Day(), 0, 0, 0, 0, zone)
	if first.Before(q.From) {
		first = first.AddDate(0, 0, 1)
	}
	t := q.To.In(zone)
	end := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, zone)
	return first.Format(time.DateOnly), end.Format(time.DateOnly)
}

// dayBefore is the date (YYYY-MM-DD) before day, as SQLite's
// date(day, '-1 day') gives it: NULL (nil) for a day that is not a date.
func dayBefore(day string) any {
	d, err := time.Parse(time.DateOnly, day)
	if err != nil {
		return nil
	}
	return d.AddDate(0, 0, -1).Format(time.DateOnly)
}

// ImportedInclusion tells whether q (its Imports set) includes imported
// days, and which imported days its range holds.
func (db *DB) ImportedInclusion(ctx context.Context, q StatsQuery) (ImportedInclusion, error) {
	var in ImportedInclusion
	first, end := q.importedDays()
	// One read of the site's imports (a few rows): those the range holds
	// days of, clipped to it (CASE rather than SQLite's two-argument MAX
	// and MIN, for PostgreSQL: issue 17), and whether there is any.
	last := dayBefore(end)
	rows, err := db.read.QueryContext(ctx, `SELECT first_day < ?1 AND last_day >= ?2,
			CASE WHEN first_day > ?2 THEN first_day ELSE ?2 END, CASE WHEN last_day < ?3 THEN last_day ELSE ?3 END
		FROM imports WHERE site_id = ?4 AND complete = 1 AND first_day IS NOT NULL ORDER BY first_day, id`,
		end, first, last, q.Site)
	if err != nil {
		return in, err
	}
	defer rows.Close()
	found := false
	for rows.Next() {
		var inRange bool
		var r [2]string
		if err := rows.Scan(&inRange, &r[0], &r[1]); err != nil {
			return in, err
		}
		found = true
		if inRange {
			in.Ranges = append(in.Ranges, r)
		}
	}
	if err := rows.Err(); err != nil {
		return in, err
	}
	// Plausible's order: no import at all, then none in the range, then a
	// query the rollups cannot answer.
	switch _, reason := q.importedPlan(); {
	case !found:
		in.SkipReason = ImportsNoData
	case len(in.Ranges) == 0:
		in.SkipReason = ImportsOutOfRange
	case reason != "":
		in.SkipReason = reason
	default:
		in.Included = true
	}
	return in, nil
}

// withImported adds to groups (keyed and ordered as statsGroups gives
// them) the imported rollups of q's whole days, when q.Imports is set and
// the rollups can answer q. groups is not changed (the report cache may
// hold it): the answer is a copy.
func (db *DB) withImported(ctx context.Context, q StatsQuery, groups map[string]*aggregate, order []string) (map[string]*aggregate, []string, error) {
	if !q.Imports {
		return groups, order, nil
	}
	dim, reason := q.importedPlan()
	if reason != "" {
		return groups, order, nil
	}
	first, end := q.importedDays()
	if first >= end {
		return groups, order, nil
	}
	bucket := "''"
	timeAt := -1
	for i, d := range q.Dimensions {
		if !TimeDimension(d) {
			continue
		}
		timeAt = i
		unit := strings.TrimPrefix(d, "time:")
		if d == "time" {
			unit = q.TimeUnit
		}
		// The labels of the time dimensions (timeExpr) of a local day.
		switch unit {
		case "day":
			bucket = "day"
		case "week":
			bucket = db.d.WeekStart("day")
		case "month":
			bucket = "substr(day, 1, 7) || '-01'"
		default:
			return nil, nil, fmt.Errorf("storage: imported rows by %q", unit)
		}
	}
	pass := func(string) bool { return true }
	group := q.importedGroup()
	var colTests []sourcesTest
	switch {
	case dim == ImportedSourcesDim:
		colTests, _ = sourcesPlan(q.Filters, group)
	case len(q.Filters) > 0:
		pass, _ = compileValueFilter(q.Filters)
	}
	// Complete imports only: an import being written is not counted yet.
	// Asked for pageviews, a day's row without any is left out, as
	// Plausible's select_imported_metrics does (but for custom events,
	// which have none).
	minPageviews := 0
	if dim != "event:name" && (needs(q.Metrics, MetricPageviews) || needs(q.Metrics, MetricViewsPerVisit)) {
		minPageviews = 1
	}
	rows, err := db.read.QueryContext(ctx, `SELECT `+bucket+`, value, SUM(visitors), SUM(visits), SUM(pageviews),
		SUM(events), SUM(bounces), SUM(duration) FROM imported_rows
		WHERE site_id = ? AND dim = ? AND day >= ? AND day < ? AND pageviews >= ?
		AND import_id IN (SELECT id FROM imports WHERE site_id = ? AND complete = 1)
		GROUP BY 1, 2`, q.Site, dim, first, end, minPageviews, q.Site)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	out := make(map[string]*aggregate, len(groups))
	for k, a := range groups {
		c := *a
		out[k] = &c
	}
	order = append([]string(nil), order...)
	// Sessions metrics come from the reports of visits; pages and custom
	// events have none (Plausible's select_imported_metrics gives them 0
	// bounces and visits).
	sessions := dim != "event:page" && dim != "event:name"
	// Grouped by a UTM tag, the visits without one are left out, as
	// Plausible's filter_group_values does: the export keeps them as an
	// empty tag, the site's own visits have no row for them either.
	grouped := strings.HasPrefix(group, "visit:utm_")
	for rows.Next() {
		var label, value string
		var v [6]float64
		if err := rows.Scan(&label, &value, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]); err != nil {
			return nil, nil, err
		}
		if dim == ImportedSourcesDim {
			var ok bool
			if value, ok = sourcesRow(value, group, colTests); !ok {
				continue
			}
		} else {
			value = plausibleName(dim, value)
			if dim != "" && !pass(value) {
				continue
			}
		}
		if grouped && value == NotSet {
			continue
		}
		key := make([]string, len(q.Dimensions))
		for i := range key {
			if i == timeAt {
				key[i] = label
			} else {
				key[i] = value
			}
		}
		k := strings.Join(key, keySep)
		a, ok := out[k]
		if !ok {
			a = &aggregate{}
			out[k] = a
			order = append(order, k)
		}
		a.visitors += v[0]
		a.visits += v[1]
		a.pageviews += v[2]
		a.events += v[3]
		if sessions {
			a.sVisits += v[1]
			a.sPageviews += v[2]
			a.sBounces += v[4]
			a.sDuration += v[5]
		}
	}
	return out, order, rows.Err()
}

// sourcesRow reads an ImportedSourcesDim row's value: the shown value of
// column group ("" for none), and whether the row passes tests.
func sourcesRow(value, group string, tests []sourcesTest) (string, bool) {
	cols := strings.Split(value, sourcesSep)
	if len(cols) != len(importedSourceCols) {
		return "", false
	}
	for i, c := range cols {
		cols[i] = plausibleName(importedSourceCols[i], c)
	}
	for _, t := range tests {
		if !t.pass(cols[t.col]) {
			return "", false
		}
	}
	if i := slices.Index(importedSourceCols, group); i >= 0 {
		return cols[i], true
	}
	return "", true
}

// FirstImportedDay is the first day of the site's complete imports, or
// false when it has none: with include.imports, the query API's range
// "all" starts there when it is earlier than the first visit.
func (db *DB) FirstImportedDay(ctx context.Context, site string) (string, bool, error) {
	var day *string
	err := db.read.QueryRowContext(ctx, `SELECT MIN(first_day) FROM imports WHERE site_id = ? AND complete = 1`, site).Scan(&day)
	if err != nil || day == nil {
		return "", false, err
	}
	return *day, true, nil
}
