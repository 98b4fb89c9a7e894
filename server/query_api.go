package server

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"math"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// The query API: Plausible's Stats API v2 request and answer
// (docs/query-api.md), over the site's visits and events.

// queryBodyLimit caps a query's JSON body.
const queryBodyLimit = 64 << 10

// Bounds of a query (docs/query-api.md), far above any dashboard's needs.
const (
	maxQueryLimit       = 10000
	maxQueryDimensions  = 8
	maxFilterNodes      = 100
	maxFilterDepth      = 10
	maxFilterClauses    = 100
	maxFilterValueBytes = 1000
	maxPropNameBytes    = 300
	// maxQueryPatterns bounds the matches patterns of a query, all its
	// filters together: each is compiled (up to about 100 KB and 2 ms,
	// storage.MaxPatternInsts) and, on PostgreSQL, matched against every
	// distinct value of its dimension in the range.
	maxQueryPatterns = 20
)

// siteQuery answers POST /v1/sites/:siteId/query: the site is the path's.
// A site_id in the body is not checked (a request copied from Plausible's
// documentation names their demo site); the answer's query.site_id is the
// path's.
func (s *Server) siteQuery(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	_, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeQueryRead)
	if err != nil {
		return err
	}
	body, err := decodeQueryBody(w, r)
	if err != nil {
		return err
	}
	return s.answerQuery(w, r, site, body)
}

// plausibleQuery answers POST /api/v2/query: the site is the body's
// site_id; one the caller cannot read is the ordinary 404.
func (s *Server) plausibleQuery(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if _, err := s.authenticate(r); err != nil {
		return err
	}
	body, err := decodeQueryBody(w, r)
	if err != nil {
		return err
	}
	id, ok := body["site_id"]
	var siteID string
	if !ok || json.Unmarshal(id, &siteID) != nil || siteID == "" {
		return fault.Errorf(fault.InvalidQuery, "site_id is required and must be a string")
	}
	_, site, err := s.site(r, siteID, storage.ScopeQueryRead)
	if err != nil {
		return err
	}
	return s.answerQuery(w, r, site, body)
}

// decodeQueryBody reads the body as a JSON object of known fields.
func decodeQueryBody(w http.ResponseWriter, r *http.Request) (object, error) {
	raw, err := readBody(w, r, queryBodyLimit)
	if err != nil {
		return nil, err
	}
	var body object
	if err := json.Unmarshal(raw, &body); err != nil || body == nil {
		return nil, fault.Errorf(fault.InvalidJSON, "request body must be a JSON object")
	}
	for k := range body {
		switch k {
		case "site_id", "metrics", "date_range", "dimensions", "filters", "order_by", "include", "pagination":
		case "date":
			return nil, fault.Errorf(fault.UnsupportedQuery, "date is not supported: give date_range as [from, to] instead")
		default:
			return nil, fault.Errorf(fault.InvalidQuery, "unknown field %q: a query has site_id, metrics, date_range, dimensions, filters, order_by, include and pagination", k)
		}
	}
	return body, nil
}

// answerQuery parses, runs and encodes a query on site.
// startAtFirstVisit starts the range "all" at the midnight, in the
// site's time zone, of the day of the site's first visit (none: the range
// stays as parsed).
func (s *Server) startAtFirstVisit(ctx context.Context, pq *parsedQuery) error {
	first, ok, err := s.db.FirstVisit(ctx, pq.site.ID)
	if err != nil {
		return err
	}
	if ok {
		f := first.In(pq.loc)
		pq.from = time.Date(f.Year(), f.Month(), f.Day(), 0, 0, 0, 0, pq.loc)
	}
	return s.startAtFirstImportedDay(ctx, pq)
}

func (s *Server) answerQuery(w http.ResponseWriter, r *http.Request, site *storage.Site, body object) error {
	loc, err := storage.LoadTimeZone(site.TimeZone)
	if err != nil {
		return err
	}
	pq, err := parseQuery(body, site, loc, s.now())
	if err != nil {
		return err
	}
	if pq.allRange {
		if err := s.startAtFirstVisit(r.Context(), pq); err != nil {
			return err
		}
		pq.fixTimeUnit()
	}
	answer, err := s.runQuery(r, pq)
	if err != nil {
		return err
	}
	if acceptsCSV(r) {
		return writeQueryCSV(w, pq, answer.Results)
	}
	writeJSON(w, http.StatusOK, answer)
	return nil
}

// acceptsCSV reports whether the client asked for text/csv.
func acceptsCSV(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(part, ";")
		if strings.EqualFold(strings.TrimSpace(mt), "text/csv") {
			return true
		}
	}
	return false
}

// parsedQuery is a validated query.
type parsedQuery struct {
	site       *storage.Site
	loc        *time.Location
	metrics    []string
	dimensions []string
	filters    []storage.QueryFilter
	filterEcho []any
	order      [][2]string
	orderGiven bool
	from, to   time.Time // [from, to)
	dateOnly   bool      // the range is whole days
	allRange   bool
	timeUnit   string
	totalRows  bool
	timeLabels bool
	imports    bool   // include.imports
	compare    string // "", previous_period, year_over_year, custom
	compareRng [2]time.Time
	// revenueCurrency is the one currency of the revenue metrics' events
	// (goal_query.go), once read.
	revenueCurrency string
	limit           int
	offset          int
	pagination      bool
}

func invalid(format string, args ...any) error {
	return fault.Errorf(fault.InvalidQuery, format, args...)
}

func unsupported(format string, args ...any) error {
	return fault.Errorf(fault.UnsupportedQuery, format, args...)
}

// Metrics and dimensions Plausible has and Tally does not: named as
// unsupported rather than unknown.
var (
	plausibleOnlyMetrics    = []string{"scroll_depth", "time_on_page", "exit_rate"}
	plausibleOnlyDimensions = []string{"event:hostname", "visit:channel", "visit:browser_version",
		"visit:os_version", "visit:region", "visit:country_name", "visit:region_name", "visit:city_name", "visit:screen",
		"visit:entry_page_hostname", "visit:exit_page_hostname", "segment"}
	queryMetrics = []string{storage.MetricVisitors, storage.MetricVisits, storage.MetricPageviews, storage.MetricEvents,
		storage.MetricViewsPerVisit, storage.MetricBounceRate, storage.MetricVisitDuration, storage.MetricPercentage,
		metricConversionRate, metricGroupConversionRate, metricTotalRevenue, metricAverageRevenue}
	timeDimensions = []string{"time", "time:hour", "time:day", "time:week", "time:month"}
)

// parseQuery validates body as Plausible's Stats API v2 does, for what
// Tally supports.
func parseQuery(body object, site *storage.Site, loc *time.Location, now time.Time) (*parsedQuery, error) {
	pq := &parsedQuery{site: site, loc: loc, limit: maxQueryLimit}
	var err error
	if pq.metrics, err = parseMetrics(body["metrics"]); err != nil {
		return nil, err
	}
	raw, ok := body["date_range"]
	if !ok {
		return nil, invalid("date_range is required")
	}
	if err := pq.parseDateRange(raw, now); err != nil {
		return nil, err
	}
	if raw, ok := body["dimensions"]; ok {
		if pq.dimensions, err = parseDimensions(raw); err != nil {
			return nil, err
		}
	}
	if pq.dimensions == nil {
		pq.dimensions = []string{}
	}
	if raw, ok := body["filters"]; ok {
		if err := pq.parseFilters(raw); err != nil {
			return nil, err
		}
	}
	if pq.filterEcho == nil {
		pq.filterEcho = []any{}
	}
	if raw, ok := body["order_by"]; ok && string(raw) != "null" {
		if err := pq.parseOrderBy(raw); err != nil {
			return nil, err
		}
	}
	if raw, ok := body["include"]; ok {
		if err := pq.parseInclude(raw); err != nil {
			return nil, err
		}
	}
	if raw, ok := body["pagination"]; ok {
		if err := pq.parsePagination(raw); err != nil {
			return nil, err
		}
	}
	if err := pq.validate(); err != nil {
		return nil, err
	}
	if !pq.orderGiven {
		pq.order = defaultOrder(pq.metrics, pq.dimensions)
	}
	pq.fixTimeUnit()
	return pq, nil
}

func parseMetrics(raw json.RawMessage) ([]string, error) {
	var list []string
	if raw == nil || json.Unmarshal(raw, &list) != nil || len(list) == 0 {
		return nil, invalid("metrics is required: a non-empty array of metric names (%s)", strings.Join(queryMetrics, ", "))
	}
	for i, m := range list {
		switch {
		case slices.Contains(list[:i], m):
			return nil, invalid("metrics may not repeat %q", m)
		case slices.Contains(queryMetrics, m):
		case slices.Contains(plausibleOnlyMetrics, m):
			return nil, unsupported("the metric %q is not supported; supported metrics are %s", m, strings.Join(queryMetrics, ", "))
		default:
			return nil, invalid("unknown metric %q; supported metrics are %s", m, strings.Join(queryMetrics, ", "))
		}
	}
	return list, nil
}

// checkDimension validates a dimension or filter key name.
func checkDimension(d string) error {
	if slices.Contains(plausibleOnlyDimensions, d) {
		return unsupported("the dimension %q is not supported", d)
	}
	if _, ok := storage.VisitDimensions[d]; ok || d == "event:page" || d == "event:name" || d == goalDimension || slices.Contains(timeDimensions, d) {
		return nil
	}
	if name, ok := strings.CutPrefix(d, storage.PropPrefix); ok {
		if name == "" || len(name) > maxPropNameBytes {
			return invalid("a custom property dimension is event:props:NAME, NAME of 1 to %d bytes", maxPropNameBytes)
		}
		return nil
	}
	return invalid("unknown dimension %q", d)
}

func parseDimensions(raw json.RawMessage) ([]string, error) {
	var list []string
	if json.Unmarshal(raw, &list) != nil {
		return nil, invalid("dimensions must be an array of dimension names")
	}
	if len(list) > maxQueryDimensions {
		return nil, invalid("at most %d dimensions", maxQueryDimensions)
	}
	times := 0
	for i, d := range list {
		if slices.Contains(list[:i], d) {
			return nil, invalid("dimensions may not repeat %q", d)
		}
		if err := checkDimension(d); err != nil {
			return nil, err
		}
		if storage.TimeDimension(d) {
			times++
		}
	}
	if times > 1 {
		return nil, invalid("at most one time dimension")
	}
	return list, nil
}

// relativeDays are the "Nd" ranges: the N whole days before today, as
// Plausible counts them.
var relativeDays = map[string]int{"7d": 7, "28d": 28, "30d": 30, "91d": 91}

// parseDateRange reads date_range: a relative name in the site's time zone,
// or [from, to] as dates (whole days, both included) or datetimes.
func (pq *parsedQuery) parseDateRange(raw json.RawMessage, now time.Time) error {
	today := now.In(pq.loc)
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, pq.loc) }
	t0 := day(today.Year(), today.Month(), today.Day())
	var name string
	if json.Unmarshal(raw, &name) == nil {
		pq.dateOnly = true
		switch {
		case name == "day":
			pq.from, pq.to = t0, t0.AddDate(0, 0, 1)
		case relativeDays[name] > 0:
			pq.from, pq.to = t0.AddDate(0, 0, -relativeDays[name]), t0
		case name == "month":
			pq.from = day(today.Year(), today.Month(), 1)
			pq.to = pq.from.AddDate(0, 1, 0)
		case name == "6mo", name == "12mo":
			n := 6
			if name == "12mo" {
				n = 12
			}
			pq.to = day(today.Year(), today.Month(), 1).AddDate(0, 1, 0)
			pq.from = pq.to.AddDate(0, -n, 0)
		case name == "year":
			pq.from, pq.to = day(today.Year(), 1, 1), day(today.Year()+1, 1, 1)
		case name == "all":
			// From the first visit (answerQuery reads it) to today.
			pq.allRange = true
			pq.from, pq.to = t0, t0.AddDate(0, 0, 1)
		case name == "realtime", name == "30m", name == "24h":
			return unsupported("the date_range %q is not supported", name)
		default:
			return invalid("unknown date_range %q: use day, 7d, 28d, 30d, 91d, month, 6mo, 12mo, year, all, or [from, to] as ISO 8601 dates or datetimes", name)
		}
		return nil
	}
	from, to, dateOnly, err := parseRangePair(raw, pq.loc)
	if err != nil {
		return err
	}
	pq.from, pq.to, pq.dateOnly = from, to, dateOnly
	return nil
}

// parseRangePair reads [from, to]: two dates (whole days in loc, both
// included) or two ISO 8601 datetimes with an offset (both included).
func parseRangePair(raw json.RawMessage, loc *time.Location) (from, to time.Time, dateOnly bool, err error) {
	var pair []string
	bad := invalid("date_range must be a relative name or [from, to]: two ISO 8601 dates (2024-01-01) or datetimes (2024-01-01T12:00:00+02:00)")
	if json.Unmarshal(raw, &pair) != nil || len(pair) != 2 {
		return from, to, false, bad
	}
	if a, err1 := time.ParseInLocation(time.DateOnly, pair[0], loc); err1 == nil {
		b, err2 := time.ParseInLocation(time.DateOnly, pair[1], loc)
		if err2 != nil {
			return from, to, false, bad
		}
		from, to, dateOnly = a, b.AddDate(0, 0, 1), true
	} else {
		a, err1 := time.Parse(time.RFC3339Nano, pair[0])
		b, err2 := time.Parse(time.RFC3339Nano, pair[1])
		if err1 != nil || err2 != nil {
			return from, to, false, bad
		}
		// The end is included: to the end of its second (or millisecond,
		// the precision of stored times).
		step := time.Second
		if b.Nanosecond() != 0 {
			step = time.Millisecond
		}
		from, to = a, b.Truncate(step).Add(step)
	}
	if !from.Before(to) {
		return from, to, false, invalid("date_range: from (%s) is after to (%s)", pair[0], pair[1])
	}
	return from, to, dateOnly, nil
}

// parseFilters reads filters: an array of filter trees, all of which must
// hold.
func (pq *parsedQuery) parseFilters(raw json.RawMessage) error {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return invalid("filters must be an array of filters such as [\"is\", \"visit:country\", [\"DE\"]]")
	}
	var n filterCount
	for _, item := range list {
		f, echo, err := parseFilter(item, 1, &n)
		if err != nil {
			return err
		}
		pq.filters = append(pq.filters, f)
		pq.filterEcho = append(pq.filterEcho, echo)
	}
	return nil
}

// filterCount is what a query's filters hold so far.
type filterCount struct{ nodes, patterns int }

// parseFilter reads one filter tree and returns it with its normalised
// echo.
func parseFilter(raw json.RawMessage, depth int, n *filterCount) (storage.QueryFilter, any, error) {
	var f storage.QueryFilter
	n.nodes++
	if n.nodes > maxFilterNodes {
		return f, nil, invalid("filters may hold at most %d conditions", maxFilterNodes)
	}
	if depth > maxFilterDepth {
		return f, nil, invalid("filters may nest at most %d deep", maxFilterDepth)
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil || len(parts) < 2 {
		return f, nil, invalid("invalid filter %s: a filter is [operator, dimension, [values]] or [\"and\"|\"or\", [filters]] or [\"not\", filter]", clip(raw))
	}
	if json.Unmarshal(parts[0], &f.Op) != nil {
		return f, nil, invalid("invalid filter %s: its operator must be a string", clip(raw))
	}
	switch f.Op {
	case "and", "or":
		var children []json.RawMessage
		if len(parts) != 2 || json.Unmarshal(parts[1], &children) != nil || len(children) == 0 {
			return f, nil, invalid("invalid filter %s: %s takes a non-empty array of filters", clip(raw), f.Op)
		}
		echo := []any{}
		for _, c := range children {
			cf, ce, err := parseFilter(c, depth+1, n)
			if err != nil {
				return f, nil, err
			}
			f.Children = append(f.Children, cf)
			echo = append(echo, ce)
		}
		return f, []any{f.Op, echo}, nil
	case "not":
		if len(parts) != 2 {
			return f, nil, invalid("invalid filter %s: not takes one filter", clip(raw))
		}
		cf, ce, err := parseFilter(parts[1], depth+1, n)
		if err != nil {
			return f, nil, err
		}
		f.Children = []storage.QueryFilter{cf}
		return f, []any{"not", ce}, nil
	case "is", "is_not", "contains", "contains_not", "matches", "matches_not":
	case "has_done", "has_not_done", "matches_wildcard", "matches_wildcard_not":
		return f, nil, unsupported("the filter operator %q is not supported", f.Op)
	default:
		return f, nil, invalid("unknown filter operator %q: use is, is_not, contains, contains_not, matches, matches_not, and, or, not", f.Op)
	}
	if len(parts) != 3 && len(parts) != 4 {
		return f, nil, invalid("invalid filter %s: a filter is [operator, dimension, [values]] with optional modifiers", clip(raw))
	}
	if json.Unmarshal(parts[1], &f.Dim) != nil {
		return f, nil, invalid("invalid filter %s: its dimension must be a string", clip(raw))
	}
	if storage.TimeDimension(f.Dim) {
		return f, nil, invalid("time dimensions cannot be filtered on: set date_range instead")
	}
	if err := checkDimension(f.Dim); err != nil {
		return f, nil, err
	}
	if json.Unmarshal(parts[2], &f.Values) != nil || f.Values == nil {
		return f, nil, invalid("invalid filter %s: its values must be an array of strings", clip(raw))
	}
	if len(f.Values) > maxFilterClauses {
		return f, nil, invalid("a filter may list at most %d values", maxFilterClauses)
	}
	if strings.HasPrefix(f.Op, "matches") {
		// Counted before any is compiled.
		if n.patterns += len(f.Values); n.patterns > maxQueryPatterns {
			return f, nil, invalid("a query may hold at most %d matches patterns in all its filters", maxQueryPatterns)
		}
	}
	for _, v := range f.Values {
		if len(v) > maxFilterValueBytes {
			return f, nil, invalid("a filter value may be at most %d bytes", maxFilterValueBytes)
		}
		if strings.HasPrefix(f.Op, "matches") {
			if err := storage.CheckPattern(v); err != nil {
				return f, nil, err
			}
		}
		if f.Dim == "visit:country" && (f.Op == "is" || f.Op == "is_not") && len(v) != 2 {
			return f, nil, invalid("invalid visit:country filter: visit:country needs to be a valid 2-letter country code, not %q", v)
		}
	}
	echo := []any{f.Op, f.Dim, f.Values}
	if len(parts) == 4 {
		var mods map[string]json.RawMessage
		if json.Unmarshal(parts[3], &mods) != nil || mods == nil {
			return f, nil, invalid("invalid filter %s: its modifiers must be an object", clip(raw))
		}
		for k, v := range mods {
			if k != "case_sensitive" {
				return f, nil, invalid("unknown filter modifier %q: the one modifier is case_sensitive", k)
			}
			var cs bool
			if json.Unmarshal(v, &cs) != nil {
				return f, nil, invalid("case_sensitive must be true or false")
			}
			if !cs && f.Op != "is" && f.Op != "contains" {
				return f, nil, invalid("case_sensitive: false applies to is and contains only")
			}
			f.Fold = !cs
			echo = append(echo, map[string]bool{"case_sensitive": cs})
		}
	}
	return f, echo, nil
}

// clip shortens raw JSON for an error message.
func clip(raw json.RawMessage) string {
	const most = 120
	if len(raw) > most {
		return string(raw[:most]) + "..."
	}
	return string(raw)
}

func (pq *parsedQuery) parseOrderBy(raw json.RawMessage) error {
	var list [][]string
	if json.Unmarshal(raw, &list) != nil {
		return invalid("order_by must be an array of [metric or dimension, \"asc\" or \"desc\"]")
	}
	for _, e := range list {
		if len(e) != 2 || (e[1] != "asc" && e[1] != "desc") {
			return invalid("invalid order_by entry %q: it is [metric or dimension, \"asc\" or \"desc\"]", e)
		}
		pq.order = append(pq.order, [2]string{e[0], e[1]})
	}
	pq.orderGiven = true
	return nil
}

func (pq *parsedQuery) parseInclude(raw json.RawMessage) error {
	var inc map[string]json.RawMessage
	if json.Unmarshal(raw, &inc) != nil || inc == nil {
		return invalid("include must be an object")
	}
	flag := func(k string, dst *bool) error {
		if json.Unmarshal(inc[k], dst) != nil {
			return invalid("include.%s must be true or false", k)
		}
		return nil
	}
	for k, v := range inc {
		switch k {
		case "total_rows":
			if err := flag(k, &pq.totalRows); err != nil {
				return err
			}
		case "time_labels":
			if err := flag(k, &pq.timeLabels); err != nil {
				return err
			}
		case "imports":
			if err := flag(k, &pq.imports); err != nil {
				return err
			}
		case "comparisons":
			if string(v) == "null" {
				continue
			}
			if err := pq.parseComparisons(v); err != nil {
				return err
			}
		default:
			return invalid("unknown include option %q: use total_rows, time_labels, comparisons, imports", k)
		}
	}
	return nil
}

func (pq *parsedQuery) parseComparisons(raw json.RawMessage) error {
	var c map[string]json.RawMessage
	if json.Unmarshal(raw, &c) != nil || c == nil {
		return invalid("include.comparisons must be an object such as {\"mode\": \"previous_period\"}")
	}
	var mode string
	if json.Unmarshal(c["mode"], &mode) != nil {
		return invalid("include.comparisons.mode is required: previous_period, year_over_year or custom")
	}
	for k, v := range c {
		switch k {
		case "mode":
		case "match_day_of_week":
			var on bool
			if json.Unmarshal(v, &on) != nil {
				return invalid("include.comparisons.match_day_of_week must be true or false")
			}
			if on {
				return unsupported("include.comparisons.match_day_of_week is not supported")
			}
		case "date_range":
			if mode != "custom" {
				return invalid("include.comparisons.date_range goes with mode custom only")
			}
		default:
			return invalid("unknown include.comparisons option %q", k)
		}
	}
	switch mode {
	case "previous_period", "year_over_year":
	case "custom":
		raw, ok := c["date_range"]
		if !ok {
			return invalid("include.comparisons.date_range is required with mode custom")
		}
		from, to, _, err := parseRangePair(raw, pq.loc)
		if err != nil {
			return err
		}
		pq.compareRng = [2]time.Time{from, to}
	default:
		return invalid("unknown include.comparisons.mode %q: use previous_period, year_over_year or custom", mode)
	}
	pq.compare = mode
	return nil
}

func (pq *parsedQuery) parsePagination(raw json.RawMessage) error {
	var p map[string]json.RawMessage
	if json.Unmarshal(raw, &p) != nil || p == nil {
		return invalid("pagination must be an object such as {\"limit\": 100, \"offset\": 0}")
	}
	for k, v := range p {
		var n int
		if json.Unmarshal(v, &n) != nil {
			return invalid("pagination.%s must be a whole number", k)
		}
		switch k {
		case "limit":
			if n < 1 || n > maxQueryLimit {
				return invalid("pagination.limit must be from 1 to %d", maxQueryLimit)
			}
			pq.limit = n
		case "offset":
			if n < 0 {
				return invalid("pagination.offset must not be negative")
			}
			pq.offset = n
		default:
			return invalid("unknown pagination option %q: use limit and offset", k)
		}
	}
	pq.pagination = true
	return nil
}

// validate checks the rules between fields, as Plausible has them.
func (pq *parsedQuery) validate() error {
	for _, o := range pq.order {
		if !slices.Contains(pq.metrics, o[0]) && !slices.Contains(pq.dimensions, o[0]) {
			return invalid("invalid order_by entry %q: it is not a queried metric or dimension", o[0])
		}
	}
	eventDim := ""
	for _, d := range pq.dimensions {
		if storage.EventDimension(d) {
			eventDim = d
		}
	}
	for _, m := range pq.metrics {
		if storage.SessionMetric(m) && eventDim != "" {
			return unsupported("the session metric %q cannot be queried with the event dimension %q", m, eventDim)
		}
		if m == storage.MetricPercentage && len(pq.dimensions) == 0 {
			return invalid("the metric percentage requires non-empty dimensions")
		}
	}
	if pq.timeLabels && pq.timeDimension() == "" {
		return invalid("include.time_labels requires a time dimension")
	}
	return pq.validateGoals()
}

// timeDimension is the query's time dimension, or "".
func (pq *parsedQuery) timeDimension() string {
	for _, d := range pq.dimensions {
		if storage.TimeDimension(d) {
			return d
		}
	}
	return ""
}

// fixTimeUnit picks what the dimension "time" groups by, from the range's
// length: hours for a day or less, days up to 93 days, months beyond.
func (pq *parsedQuery) fixTimeUnit() {
	switch span := pq.to.Sub(pq.from); {
	case span <= 25*time.Hour:
		pq.timeUnit = "hour"
	case span <= 94*24*time.Hour:
		pq.timeUnit = "day"
	default:
		pq.timeUnit = "month"
	}
}

// unit is the bucket of the query's time dimension.
func (pq *parsedQuery) unit() string {
	d := pq.timeDimension()
	if d == "time" {
		return pq.timeUnit
	}
	return strings.TrimPrefix(d, "time:")
}

// defaultOrder is Plausible's: the time dimension ascending, then the
// first metric descending.
func defaultOrder(metrics, dims []string) [][2]string {
	var o [][2]string
	for _, d := range dims {
		if storage.TimeDimension(d) {
			o = append(o, [2]string{d, "asc"})
		}
	}
	return append(o, [2]string{metrics[0], "desc"})
}

// storageQuery is pq over [from, to).
func (pq *parsedQuery) storageQuery(from, to time.Time) storage.StatsQuery {
	return storage.StatsQuery{Site: pq.site.ID, From: from, To: to, Zone: pq.loc, Metrics: pq.metrics,
		Dimensions: pq.dimensions, TimeUnit: pq.timeUnit, Filters: pq.filters, Imports: pq.imports && !pq.goalQuery()}
}

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

// runQuery runs pq (and its comparison) and builds the answer.
func (s *Server) runQuery(r *http.Request, pq *parsedQuery) (*queryAnswer, error) {
	var labels []string
	if unit := pq.unit(); unit != "" {
		var ok bool
		if labels, ok = storage.TimeLabels(unit, pq.from, pq.to, pq.loc); !ok {
			return nil, invalid("the date_range holds more than %d buckets of %s; ask for a shorter range or a coarser time dimension", storage.MaxTimeLabels, pq.timeDimension())
		}
	}
	rows, estimated, err := s.statsRows(r, pq, pq.from, pq.to)
	if err != nil {
		return nil, err
	}
	pq.sort(rows)
	total := len(rows)
	results := []queryResult{}
	for i := pq.offset; i < len(rows) && len(results) < pq.limit; i++ {
		results = append(results, queryResult{Dimensions: rows[i].Dims, Metrics: rows[i].Metrics})
	}
	if pq.compare != "" {
		if err := s.addComparison(r, pq, labels, results); err != nil {
			return nil, err
		}
	}
	a := &queryAnswer{Results: results, Query: pq.echo()}
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
	if err := s.addImportsMeta(r, pq, a); err != nil {
		return nil, err
	}
	return a, nil
}

// estimateWarnings marks visitors and percentage as estimates
// (docs/query-api.md#how-reports-stay-fast).
func estimateWarnings(metrics []string) map[string]queryMetricWarning {
	w := map[string]queryMetricWarning{}
	for _, m := range metrics {
		if m == storage.MetricVisitors || m == storage.MetricPercentage {
			w[m] = queryMetricWarning{Code: "estimated", Warning: "an estimate from per-day sketches (standard error under 1%): the range has more than 10,000 visitors"}
		}
	}
	return w
}

// addComparison gives each result the figures of its counterpart in the
// comparison range: the same dimension values, the time bucket at the same
// position in the range.
func (s *Server) addComparison(r *http.Request, pq *parsedQuery, labels []string, results []queryResult) error {
	from, to := pq.comparisonRange()
	timeAt := slices.IndexFunc(pq.dimensions, storage.TimeDimension)
	var cLabels []string
	if timeAt >= 0 {
		var ok bool
		if cLabels, ok = storage.TimeLabels(pq.unit(), from, to, pq.loc); !ok {
			return invalid("the comparison range holds more than %d time buckets", storage.MaxTimeLabels)
		}
	}
	rows, _, err := s.statsRows(r, pq, from, to)
	if err != nil {
		return err
	}
	byKey := map[string]storage.StatsRow{}
	for _, row := range rows {
		byKey[strings.Join(row.Dims, "\x00")] = row
	}
	for i := range results {
		dims := slices.Clone(results[i].Dimensions)
		if timeAt >= 0 {
			dims[timeAt] = ""
			if at := slices.Index(labels, results[i].Dimensions[timeAt]); at >= 0 && at < len(cLabels) {
				dims[timeAt] = cLabels[at]
			}
		}
		c := &queryComparison{Dimensions: dims, Metrics: make([]float64, len(pq.metrics)), Change: make([]*float64, len(pq.metrics))}
		if row, ok := byKey[strings.Join(dims, "\x00")]; ok {
			copy(c.Metrics, row.Metrics)
		}
		for j, m := range pq.metrics {
			c.Change[j] = change(m, c.Metrics[j], results[i].Metrics[j])
		}
		results[i].Comparison = c
	}
	return nil
}

// change is Plausible's: the difference in points for bounce_rate (none
// when there was none before), else the percentage change, rounded; 100
// from nothing to something, 0 from nothing to nothing.
func change(metric string, before, now float64) *float64 {
	var v float64
	switch {
	case metric == storage.MetricBounceRate:
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

// sort orders rows by pq.order, then by every dimension ascending, so the
// order is always the same.
func (pq *parsedQuery) sort(rows []storage.StatsRow) {
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

// queryTimeLayout is how the answer's query shows its range, as Plausible
// does.
const queryTimeLayout = "2006-01-02T15:04:05-07:00"

// echo is the query as run: defaults filled in, the range as datetimes in
// the site's time zone.
func (pq *parsedQuery) echo() queryEcho {
	order := make([][]string, len(pq.order))
	for i, o := range pq.order {
		order[i] = []string{o[0], o[1]}
	}
	e := queryEcho{
		SiteID:     pq.site.ID,
		Metrics:    pq.metrics,
		DateRange:  []string{pq.from.In(pq.loc).Format(queryTimeLayout), pq.to.Add(-time.Second).In(pq.loc).Format(queryTimeLayout)},
		Filters:    pq.filterEcho,
		Dimensions: pq.dimensions,
		OrderBy:    order,
		Include:    queryInclude{TotalRows: pq.totalRows, TimeLabels: pq.timeLabels, Imports: pq.imports},
		Pagination: queryPagination{Limit: pq.limit, Offset: pq.offset},
	}
	if pq.compare != "" {
		from, to := pq.comparisonRange()
		e.Include.Comparisons = &queryComparisons{Mode: pq.compare,
			DateRange: []string{from.In(pq.loc).Format(queryTimeLayout), to.Add(-time.Second).In(pq.loc).Format(queryTimeLayout)}}
	}
	return e
}

// csvUnsafe matches a cell a spreadsheet would run as a formula.
var csvUnsafe = regexp.MustCompile(`^[=+\-@\t\r]`)

// writeQueryCSV writes the results as CSV: a header row of the dimension
// and metric names, then one row per result.
func writeQueryCSV(w http.ResponseWriter, pq *parsedQuery, results []queryResult) error {
	var buf bytes.Buffer
	cw := csv.NewWriter(&buf)
	header := append(slices.Clone(pq.dimensions), pq.metrics...)
	_ = cw.Write(header)
	for _, r := range results {
		rec := make([]string, 0, len(header))
		for _, d := range r.Dimensions {
			// A value starting like a formula is quoted with a leading
			// apostrophe, so opening the file cannot run it.
			if csvUnsafe.MatchString(d) {
				d = "'" + d
			}
			rec = append(rec, d)
		}
		for _, m := range r.Metrics {
			rec = append(rec, strconv.FormatFloat(m, 'f', -1, 64))
		}
		_ = cw.Write(rec)
	}
	cw.Flush()
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
	return nil
}
