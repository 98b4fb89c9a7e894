package storage

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tally-analytics/tally/fault"
)

// Parsing of a query's body (docs/query-api.md): each field read and
// checked as Plausible's Stats API v2 does, for what Tally supports.

// invalidQuery is a query Plausible refuses too: 400 invalid_query.
func invalidQuery(format string, args ...any) error {
	return fault.Errorf(fault.InvalidQuery, format, args...)
}

// unsupportedQuery is a query Plausible answers and Tally does not: 400
// unsupported_query.
func unsupportedQuery(format string, args ...any) error {
	return fault.Errorf(fault.UnsupportedQuery, format, args...)
}

// Metrics and dimensions Plausible has and Tally does not: named as
// unsupported rather than unknown.
var (
	plausibleOnlyDimensions = []string{"visit:screen",
		"visit:entry_page_hostname", "visit:exit_page_hostname"}
	queryMetrics = []string{MetricVisitors, MetricVisits, MetricPageviews, MetricEvents,
		MetricViewsPerVisit, MetricBounceRate, MetricVisitDuration, MetricPercentage,
		metricConversionRate, metricGroupConversionRate, metricTotalRevenue, metricAverageRevenue,
		MetricScrollDepth, MetricTimeOnPage, MetricExitRate}
	timeDimensions = []string{"time", "time:minute", "time:hour", "time:day", "time:week", "time:month"}
)

// parseQuery validates req as Plausible's Stats API v2 does, for what
// Tally supports.
func parseQuery(req *QueryRequest, site *Site, loc *time.Location, now time.Time) (*parsedQuery, error) {
	pq := &parsedQuery{site: site, loc: loc, limit: maxQueryLimit}
	body := req.fields
	var err error
	if pq.metrics, err = parseMetrics(body["metrics"]); err != nil {
		return nil, err
	}
	if err := pq.parseDateRange(body["date_range"], now); err != nil {
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
		return nil, invalidQuery("metrics is required: a non-empty array of metric names (%s)", strings.Join(queryMetrics, ", "))
	}
	for i, m := range list {
		switch {
		case slices.Contains(list[:i], m):
			return nil, invalidQuery("metrics may not repeat %q", m)
		case slices.Contains(queryMetrics, m):
		default:
			return nil, invalidQuery("unknown metric %q; supported metrics are %s", m, strings.Join(queryMetrics, ", "))
		}
	}
	return list, nil
}

// checkDimension validates a dimension or filter key name.
func checkDimension(d string) error {
	if d == SegmentDimension {
		// Resolved before parsing (query_segments.go): one left is a
		// dimension, or a segment's filters naming a segment.
		return invalidQuery("segment is a filter only, [\"is\", \"segment\", [segment ids]], and a segment's filters may not name a segment")
	}
	if slices.Contains(plausibleOnlyDimensions, d) {
		return unsupportedQuery("the dimension %q is not supported", d)
	}
	if _, ok := VisitDimensions[d]; ok || d == "event:page" || d == HostnameDimension || d == "event:name" || d == GoalDimension || slices.Contains(timeDimensions, d) {
		return nil
	}
	if name, ok := strings.CutPrefix(d, PropPrefix); ok {
		if name == "" || len(name) > maxPropNameBytes {
			return invalidQuery("a custom property dimension is event:props:NAME, NAME of 1 to %d bytes", maxPropNameBytes)
		}
		return nil
	}
	return invalidQuery("unknown dimension %q", d)
}

func parseDimensions(raw json.RawMessage) ([]string, error) {
	var list []string
	if json.Unmarshal(raw, &list) != nil {
		return nil, invalidQuery("dimensions must be an array of dimension names")
	}
	if len(list) > maxQueryDimensions {
		return nil, invalidQuery("at most %d dimensions", maxQueryDimensions)
	}
	times := 0
	for i, d := range list {
		if slices.Contains(list[:i], d) {
			return nil, invalidQuery("dimensions may not repeat %q", d)
		}
		if err := checkDimension(d); err != nil {
			return nil, err
		}
		if TimeDimension(d) {
			times++
		}
	}
	if times > 1 {
		return nil, invalidQuery("at most one time dimension")
	}
	return list, nil
}

// relativeDays are the "Nd" ranges: the N whole days before today, as
// Plausible counts them.
var relativeDays = map[string]int{"7d": 7, "28d": 28, "30d": 30, "91d": 91}

// liveRanges are the ranges that end now, by their length.
var liveRanges = map[string]time.Duration{"realtime": 5 * time.Minute, "30m": 30 * time.Minute, "24h": 24 * time.Hour}

// parseDateRange reads date_range (required: raw nil is its absence): a
// relative name in the site's time zone, or [from, to] as dates (whole
// days, both included) or datetimes.
func (pq *parsedQuery) parseDateRange(raw json.RawMessage, now time.Time) error {
	if raw == nil {
		return invalidQuery("date_range is required")
	}
	today := now.In(pq.loc)
	day := func(y int, m time.Month, d int) time.Time { return dayStart(y, m, d, pq.loc) }
	y, m, d := today.Date()
	t0 := day(y, m, d)
	var name string
	if json.Unmarshal(raw, &name) == nil {
		pq.dateOnly = true
		switch {
		case name == "day":
			pq.from, pq.to = t0, day(y, m, d+1)
		case relativeDays[name] > 0:
			pq.from, pq.to = day(y, m, d-relativeDays[name]), t0
		case name == "month":
			pq.from, pq.to = day(y, m, 1), day(y, m+1, 1)
		case name == "6mo", name == "12mo":
			n := 6
			if name == "12mo" {
				n = 12
			}
			pq.from, pq.to = day(y, m+1-time.Month(n), 1), day(y, m+1, 1)
		case name == "year":
			pq.from, pq.to = day(y, 1, 1), day(y+1, 1, 1)
		case name == "all":
			// From the first visit (Query reads it) to today.
			pq.allRange = true
			pq.from, pq.to = t0, day(y, m, d+1)
		case liveRanges[name] > 0:
			// Plausible's: realtime the last 5 minutes and 30m the last
			// 30, both to 5 seconds after now; 24h the last 24 hours to
			// now; the end's second included, as a datetime range's.
			pq.dateOnly = false
			end := now
			if name != "24h" {
				end = now.Add(5 * time.Second)
			}
			pq.from, pq.to = now.Add(-liveRanges[name]), end.Truncate(time.Second).Add(time.Second)
		default:
			return invalidQuery("unknown date_range %q: use realtime, 30m, 24h, day, 7d, 28d, 30d, 91d, month, 6mo, 12mo, year, all, or [from, to] as ISO 8601 dates or datetimes", name)
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

// dayStart is the first instant of the day y-m-d (normalised as time.Date
// does) in loc, as Plausible takes a day's start: where a clock change skips
// midnight (America/Santiago, 2022-09-11) the first instant after the gap,
// not time.Date's hour before it; where midnight happens twice (America/
// Havana, 2023-11-05) the later one (TestQueryPlausiblePort's time zone
// cases).
func dayStart(y int, m time.Month, d int, loc *time.Location) time.Time {
	y, m, d = time.Date(y, m, d, 12, 0, 0, 0, time.UTC).Date()
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	_, end := t.ZoneBounds()
	if t.Day() != d {
		return end // in the zone before the gap: the gap's end starts the day
	}
	if end.IsZero() {
		return t
	}
	_, before := t.Zone()
	_, after := end.Zone()
	if back := time.Duration(before-after) * time.Second; back > 0 && end.Sub(t) <= back {
		return t.Add(back) // the clock goes back over midnight: its second time
	}
	return t
}

// parseRangePair reads [from, to]: two dates (whole days in loc, both
// included) or two ISO 8601 datetimes with an offset (both included).
func parseRangePair(raw json.RawMessage, loc *time.Location) (from, to time.Time, dateOnly bool, err error) {
	var pair []string
	bad := invalidQuery("date_range must be a relative name or [from, to]: two ISO 8601 dates (2024-01-01) or datetimes (2024-01-01T12:00:00+02:00)")
	if json.Unmarshal(raw, &pair) != nil || len(pair) != 2 {
		return from, to, false, bad
	}
	// Dates are read as calendar days (in UTC, where every midnight
	// exists), then started in loc by dayStart.
	if a, err1 := time.Parse(time.DateOnly, pair[0]); err1 == nil {
		b, err2 := time.Parse(time.DateOnly, pair[1])
		if err2 != nil {
			return from, to, false, bad
		}
		from, to, dateOnly = dayStart(a.Year(), a.Month(), a.Day(), loc), dayStart(b.Year(), b.Month(), b.Day()+1, loc), true
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
		return from, to, false, invalidQuery("date_range: from (%s) is after to (%s)", pair[0], pair[1])
	}
	return from, to, dateOnly, nil
}

// parseFilters reads filters: an array of filter trees, all of which must
// hold.
func (pq *parsedQuery) parseFilters(raw json.RawMessage) error {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return invalidQuery("filters must be an array of filters such as [\"is\", \"visit:country\", [\"DE\"]]")
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
func parseFilter(raw json.RawMessage, depth int, n *filterCount) (QueryFilter, any, error) {
	var f QueryFilter
	n.nodes++
	if n.nodes > maxFilterNodes {
		return f, nil, invalidQuery("filters may hold at most %d conditions", maxFilterNodes)
	}
	if depth > maxFilterDepth {
		return f, nil, invalidQuery("filters may nest at most %d deep", maxFilterDepth)
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil || len(parts) < 2 {
		return f, nil, invalidQuery("invalid filter %s: a filter is [operator, dimension, [values]] or [\"and\"|\"or\", [filters]] or [\"not\", filter]", clip(raw))
	}
	if json.Unmarshal(parts[0], &f.Op) != nil {
		return f, nil, invalidQuery("invalid filter %s: its operator must be a string", clip(raw))
	}
	switch f.Op {
	case "and", "or":
		var children []json.RawMessage
		if len(parts) != 2 || json.Unmarshal(parts[1], &children) != nil || len(children) == 0 {
			return f, nil, invalidQuery("invalid filter %s: %s takes a non-empty array of filters", clip(raw), f.Op)
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
			return f, nil, invalidQuery("invalid filter %s: not takes one filter", clip(raw))
		}
		cf, ce, err := parseFilter(parts[1], depth+1, n)
		if err != nil {
			return f, nil, err
		}
		f.Children = []QueryFilter{cf}
		return f, []any{"not", ce}, nil
	case "has_done", "has_not_done":
		// Plausible's behavioural filters: the visits with (without) an
		// event that passes the inner filter, which tests events only.
		if len(parts) != 2 {
			return f, nil, invalidQuery("invalid filter %s: %s takes one filter on events, such as [%q, [\"is\", \"event:name\", [\"Signup\"]]]", clip(raw), f.Op, f.Op)
		}
		cf, ce, err := parseFilter(parts[1], depth+1, n)
		if err != nil {
			return f, nil, err
		}
		if bad := nonEventFilter(cf); bad != "" {
			return f, nil, invalidQuery("invalid filter %s: %s tests events only (event:name, event:page, event:goal, event:props:*), not %s", clip(raw), f.Op, bad)
		}
		f.Children = []QueryFilter{cf}
		return f, []any{f.Op, ce}, nil
	case "is", "is_not", "contains", "contains_not", "matches", "matches_not":
	case "matches_wildcard", "matches_wildcard_not":
		return f, nil, unsupportedQuery("the filter operator %q is not supported", f.Op)
	default:
		return f, nil, invalidQuery("unknown filter operator %q: use is, is_not, contains, contains_not, matches, matches_not, and, or, not, has_done, has_not_done", f.Op)
	}
	if len(parts) != 3 && len(parts) != 4 {
		return f, nil, invalidQuery("invalid filter %s: a filter is [operator, dimension, [values]] with optional modifiers", clip(raw))
	}
	if json.Unmarshal(parts[1], &f.Dim) != nil {
		return f, nil, invalidQuery("invalid filter %s: its dimension must be a string", clip(raw))
	}
	if TimeDimension(f.Dim) {
		return f, nil, invalidQuery("time dimensions cannot be filtered on: set date_range instead")
	}
	if err := checkDimension(f.Dim); err != nil {
		return f, nil, err
	}
	if json.Unmarshal(parts[2], &f.Values) != nil || f.Values == nil {
		if f.Dim != "visit:city" || !cityIDValues(parts[2], &f.Values) {
			return f, nil, invalidQuery("invalid filter %s: its values must be an array of strings", clip(raw))
		}
	}
	if len(f.Values) > maxFilterClauses {
		return f, nil, invalidQuery("a filter may list at most %d values", maxFilterClauses)
	}
	if strings.HasPrefix(f.Op, "matches") {
		// Counted before any is compiled.
		if n.patterns += len(f.Values); n.patterns > maxQueryPatterns {
			return f, nil, invalidQuery("a query may hold at most %d matches patterns in all its filters", maxQueryPatterns)
		}
	}
	for _, v := range f.Values {
		if len(v) > maxFilterValueBytes {
			return f, nil, invalidQuery("a filter value may be at most %d bytes", maxFilterValueBytes)
		}
		if strings.HasPrefix(f.Op, "matches") {
			if err := CheckPattern(v); err != nil {
				return f, nil, err
			}
		}
		if f.Dim == "visit:country" && (f.Op == "is" || f.Op == "is_not") && len(v) != 2 {
			return f, nil, invalidQuery("invalid visit:country filter: visit:country needs to be a valid 2-letter country code, not %q", v)
		}
	}
	echo := []any{f.Op, f.Dim, f.Values}
	if len(parts) == 4 {
		var mods map[string]json.RawMessage
		if json.Unmarshal(parts[3], &mods) != nil || mods == nil {
			return f, nil, invalidQuery("invalid filter %s: its modifiers must be an object", clip(raw))
		}
		for k, v := range mods {
			if k != "case_sensitive" {
				return f, nil, invalidQuery("unknown filter modifier %q: the one modifier is case_sensitive", k)
			}
			var cs bool
			if json.Unmarshal(v, &cs) != nil {
				return f, nil, invalidQuery("case_sensitive must be true or false")
			}
			if !cs && strings.HasPrefix(f.Op, "matches") {
				return f, nil, invalidQuery("case_sensitive: false applies to is, is_not, contains and contains_not only: write a matches pattern case-insensitive with (?i)")
			}
			f.Fold = !cs
			echo = append(echo, map[string]bool{"case_sensitive": cs})
		}
	}
	if t, ok := namedDimension(f.Dim); ok {
		f = t.filter(f)
	}
	return f, echo, nil
}

// nonEventFilter names what in f a behavioural filter cannot test: a
// dimension that is not an event's, or a behavioural filter; "" when
// there is none.
func nonEventFilter(f QueryFilter) string {
	switch {
	case f.Op == "has_done" || f.Op == "has_not_done":
		return f.Op
	case f.Dim != "" && !EventDimension(f.Dim):
		return f.Dim
	}
	for _, c := range f.Children {
		if bad := nonEventFilter(c); bad != "" {
			return bad
		}
	}
	return ""
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
		return invalidQuery("order_by must be an array of [metric or dimension, \"asc\" or \"desc\"]")
	}
	for _, e := range list {
		if len(e) != 2 || (e[1] != "asc" && e[1] != "desc") {
			return invalidQuery("invalid order_by entry %q: it is [metric or dimension, \"asc\" or \"desc\"]", e)
		}
		pq.order = append(pq.order, [2]string{e[0], e[1]})
	}
	pq.orderGiven = true
	return nil
}

func (pq *parsedQuery) parseInclude(raw json.RawMessage) error {
	var inc map[string]json.RawMessage
	if json.Unmarshal(raw, &inc) != nil || inc == nil {
		return invalidQuery("include must be an object")
	}
	flag := func(k string, dst *bool) error {
		if json.Unmarshal(inc[k], dst) != nil {
			return invalidQuery("include.%s must be true or false", k)
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
			return invalidQuery("unknown include option %q: use total_rows, time_labels, comparisons, imports", k)
		}
	}
	return nil
}

func (pq *parsedQuery) parseComparisons(raw json.RawMessage) error {
	var c map[string]json.RawMessage
	if json.Unmarshal(raw, &c) != nil || c == nil {
		return invalidQuery("include.comparisons must be an object such as {\"mode\": \"previous_period\"}")
	}
	var mode string
	if json.Unmarshal(c["mode"], &mode) != nil {
		return invalidQuery("include.comparisons.mode is required: previous_period, year_over_year or custom")
	}
	for k, v := range c {
		switch k {
		case "mode":
		case "match_day_of_week":
			var on bool
			if json.Unmarshal(v, &on) != nil {
				return invalidQuery("include.comparisons.match_day_of_week must be true or false")
			}
			if on {
				return unsupportedQuery("include.comparisons.match_day_of_week is not supported")
			}
		case "date_range":
			if mode != "custom" {
				return invalidQuery("include.comparisons.date_range goes with mode custom only")
			}
		default:
			return invalidQuery("unknown include.comparisons option %q", k)
		}
	}
	switch mode {
	case "previous_period", "year_over_year":
	case "custom":
		raw, ok := c["date_range"]
		if !ok {
			return invalidQuery("include.comparisons.date_range is required with mode custom")
		}
		from, to, _, err := parseRangePair(raw, pq.loc)
		if err != nil {
			return err
		}
		pq.compareRng = [2]time.Time{from, to}
	default:
		return invalidQuery("unknown include.comparisons.mode %q: use previous_period, year_over_year or custom", mode)
	}
	pq.compare = mode
	return nil
}

func (pq *parsedQuery) parsePagination(raw json.RawMessage) error {
	var p map[string]json.RawMessage
	if json.Unmarshal(raw, &p) != nil || p == nil {
		return invalidQuery("pagination must be an object such as {\"limit\": 100, \"offset\": 0}")
	}
	for k, v := range p {
		var n int
		if json.Unmarshal(v, &n) != nil {
			return invalidQuery("pagination.%s must be a whole number", k)
		}
		switch k {
		case "limit":
			if n < 1 || n > maxQueryLimit {
				return invalidQuery("pagination.limit must be from 1 to %d", maxQueryLimit)
			}
			pq.limit = n
		case "offset":
			if n < 0 {
				return invalidQuery("pagination.offset must not be negative")
			}
			pq.offset = n
		default:
			return invalidQuery("unknown pagination option %q: use limit and offset", k)
		}
	}
	pq.pagination = true
	return nil
}

// cityIDValues reads a visit:city filter's values given as numbers, as
// Plausible's clients send GeoNames ids ([588409, 689123]), into their
// text; false when any is not a whole number.
func cityIDValues(raw json.RawMessage, values *[]string) bool {
	var ids []json.Number
	if json.Unmarshal(raw, &ids) != nil || ids == nil {
		return false
	}
	*values = make([]string, len(ids))
	for i, id := range ids {
		if _, err := strconv.ParseUint(id.String(), 10, 64); err != nil {
			return false
		}
		(*values)[i] = id.String()
	}
	return true
}

// validate checks the rules between fields, as Plausible has them.
func (pq *parsedQuery) validate() error {
	for _, o := range pq.order {
		if !slices.Contains(pq.metrics, o[0]) && !slices.Contains(pq.dimensions, o[0]) {
			return invalidQuery("invalid order_by entry %q: it is not a queried metric or dimension", o[0])
		}
	}
	eventDim := ""
	for _, d := range pq.dimensions {
		// Session metrics by event:page are the entering visits' (query_plan.go).
		if EventDimension(d) && d != "event:page" {
			eventDim = d
		}
	}
	for _, m := range pq.metrics {
		// Plausible's rule: pageviews per visit under a page filter would
		// divide the page's views by visits that saw it, a figure of no use.
		if m == MetricViewsPerVisit && slices.ContainsFunc(pq.filters, func(f QueryFilter) bool { return f.Dim == "event:page" }) {
			return invalidQuery("the metric views_per_visit cannot be queried with a filter on event:page: drop the filter or ask pageviews and visits")
		}
		if SessionMetric(m) && eventDim != "" {
			return unsupportedQuery("the session metric %q cannot be queried with the event dimension %q", m, eventDim)
		}
		if m == MetricPercentage && len(pq.dimensions) == 0 {
			return invalidQuery("the metric percentage requires non-empty dimensions")
		}
	}
	if pq.timeLabels && pq.timeDimension() == "" {
		return invalidQuery("include.time_labels requires a time dimension")
	}
	if err := pq.validateEngagement(); err != nil {
		return err
	}
	if err := pq.validateExitRate(); err != nil {
		return err
	}
	// By minute is the dashboard's realtime graph (Plausible's too): a day
	// at most, so 1,440 buckets at most (docs/query-api.md).
	if pq.timeDimension() == "time:minute" && (pq.allRange || pq.to.Sub(pq.from) > 25*time.Hour) {
		return invalidQuery("time:minute needs a date_range of a day or less (\"day\" or two datetimes)")
	}
	return pq.validateGoals()
}
