package storage

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"

	"github.com/tally-analytics/tally/fault"
)

// Metrics of the query API (docs/query-api.md), Plausible's names.
const (
	MetricVisitors      = "visitors"
	MetricVisits        = "visits"
	MetricPageviews     = "pageviews"
	MetricEvents        = "events"
	MetricViewsPerVisit = "views_per_visit"
	MetricBounceRate    = "bounce_rate"
	MetricVisitDuration = "visit_duration"
	MetricPercentage    = "percentage"
)

// SessionMetric reports whether m is computed from whole visits (bounce
// rate, duration, views per visit) rather than from events.
func SessionMetric(m string) bool {
	return m == MetricBounceRate || m == MetricVisitDuration || m == MetricViewsPerVisit
}

// VisitDimensions maps each visit: dimension to its sessions column.
var VisitDimensions = map[string]string{
	"visit:entry_page":   "entry_page",
	"visit:exit_page":    "exit_page",
	"visit:source":       "source",
	"visit:referrer":     "referrer",
	"visit:utm_source":   "utm_source",
	"visit:utm_medium":   "utm_medium",
	"visit:utm_campaign": "utm_campaign",
	"visit:utm_term":     "utm_term",
	"visit:utm_content":  "utm_content",
	"visit:country":      "country",
	// Read as its code, answered as its name (query_country_names.go).
	"visit:country_name": "country",
	// ISO 3166-2, GeoNames id, English name (migration 0028).
	"visit:region":      "region",
	"visit:region_name": "region",
	"visit:city":        "city_id",
	"visit:city_name":   "city",
	"visit:browser":     "browser",
	"visit:os":          "os",
	"visit:device":      "device",
	// Plausible's versions, of the landing's User-Agent (privacy.Agent).
	"visit:browser_version": "browser_version",
	"visit:os_version":      "os_version",
	// Computed from source and utm_* (query_channels.go).
	ChannelDimension: "source",
}

// Shown values of a missing attribute, as Plausible shows them.
const (
	DirectNone = "Direct / None"
	NotSet     = "(not set)"
	NoneProp   = "(none)"
)

// PropPrefix starts a custom-property dimension: event:props:NAME.
const PropPrefix = "event:props:"

// TimeDimension reports whether d groups by time.
func TimeDimension(d string) bool {
	return d == "time" || strings.HasPrefix(d, "time:")
}

// EventDimension reports whether d is read from each event (event:page,
// event:name, event:props:NAME) rather than from its visit or its time.
func EventDimension(d string) bool { return strings.HasPrefix(d, "event:") }

// QueryFilter is one node of a query's filter tree: a condition on a
// dimension (Op is, is_not, contains, contains_not, matches or
// matches_not; a row matches when any of Values does) or a combination
// (Op and, or, not over Children).
type QueryFilter struct {
	Op       string
	Dim      string
	Values   []string
	Fold     bool // case-insensitive (is, contains and their _not forms)
	Children []QueryFilter
}

// StatsQuery is what the query API asks of storage: metrics over
// [From, To), grouped by Dimensions, where Filters all hold.
type StatsQuery struct {
	Site       string
	From, To   time.Time
	Zone       *time.Location
	Metrics    []string
	Dimensions []string
	// TimeUnit is what the time dimension "time" groups by: hour, day,
	// week or month.
	TimeUnit string
	Filters  []QueryFilter
	// Goals, with GoalDimension in Dimensions: an event counts in the
	// group of each goal whose filter (GoalFilter) it passes, the
	// dimension's value being the goal's index here, so that one read of
	// the range answers every goal (docs/query-api.md#goals-and-funnels).
	Goals []QueryFilter
	// Imports adds the imported rollups of the range's whole days
	// (import_days.go), where they can answer the query.
	Imports bool

	// eventBasis counts visitors from events even without an event
	// dimension or filter: the total of a percentage whose rows do.
	eventBasis bool
	// estimated, when set, is set to true when visitors are estimated
	// from day partials (partial_days.go).
	estimated *bool
	// scan reads the tables even where day partials would answer (tests
	// compare the two).
	scan bool
	// d is the database's SQL fragments (set by statsGroups).
	d dialect
	// matched lists, by matchKey, the values of a matches filter's
	// dimension its pattern matches, where the backend cannot match RE2
	// in SQL (resolveMatches).
	matched map[string][]string
	// byEvents reads events through the site's event index rather than
	// through the range's visits (eventRead; tests compare the two).
	byEvents bool
	// oneRead reads the range's events through its visits in one query
	// rather than in two halves at once (readEvents; tests compare the two).
	oneRead bool
	// pages reads each event's name and page from event_pages rather than
	// from its events row (report_event_pages.go; set by usePages); wideEvents
	// never does (tests compare the two).
	pages, wideEvents bool
}

// StatsRow is one group of a query: its dimension values and its metrics,
// in the query's orders.
type StatsRow struct {
	Dims    []string
	Metrics []float64
}

// filterDims hands each dimension the filters fs name to add, recursively.
func filterDims(fs []QueryFilter, add func(string)) {
	for _, f := range fs {
		if f.Dim != "" {
			add(f.Dim)
		}
		filterDims(f.Children, add)
	}
}

// eventLevel reports whether q reads events (an event dimension or
// filter) rather than visits alone.
func (q *StatsQuery) eventLevel() bool {
	found := q.eventBasis
	for _, d := range q.Dimensions {
		found = found || EventDimension(d)
	}
	filterDims(q.Filters, func(d string) { found = found || EventDimension(d) })
	return found
}

// needsVisit reports whether an event-level read must join each event to
// its visit.
func (q *StatsQuery) needsVisit() bool {
	found := false
	for _, m := range q.Metrics {
		found = found || m == MetricVisits
	}
	for _, d := range q.Dimensions {
		found = found || strings.HasPrefix(d, "visit:")
	}
	filterDims(q.Filters, func(d string) { found = found || strings.HasPrefix(d, "visit:") })
	return found || hasBehaviour(q.Filters)
}

// aggregate is a group's raw sums, from which every metric is computed.
type aggregate struct {
	visitors, visits, pageviews, events float64
	// Of the visits the session metrics are computed over.
	sVisits, sBounces, sDuration, sPageviews float64
	// entered: bounce_rate is over bVisits, the visits that entered on a
	// page an event:page filter names, and their bounces (entryFilters).
	entered           bool
	bVisits, bBounces float64
}

// Stats answers q: one row per group (one row in all without dimensions),
// in no particular order. See docs/query-api.md for what each metric
// counts.
func (db *DB) Stats(ctx context.Context, q StatsQuery) ([]StatsRow, error) {
	rows, _, err := db.StatsEstimate(ctx, q)
	return rows, err
}

// StatsEstimate is Stats, and whether its visitors (and percentage) are
// estimates (docs/query-api.md#how-reports-stay-fast).
func (db *DB) StatsEstimate(ctx context.Context, q StatsQuery) ([]StatsRow, bool, error) {
	q.Filters = withVisitHosts(q.Filters, q.Dimensions)
	if slices.ContainsFunc(q.Metrics, engagementMetric) {
		return db.statsWithEngagement(ctx, q)
	}
	var estimated bool
	q.estimated = &estimated
	groups, order, err := db.statsGroups(ctx, q)
	if err == nil {
		groups, order, err = db.withImported(ctx, q, groups, order)
	}
	if err != nil {
		return nil, false, err
	}
	var total float64
	if needs(q.Metrics, MetricPercentage) {
		all := q
		all.Dimensions = nil
		all.Metrics = []string{MetricVisitors}
		// Visitors counted as the rows' are.
		all.eventBasis = q.eventLevel() || needs(q.Metrics, MetricPageviews) || needs(q.Metrics, MetricEvents)
		tg, _, err := db.statsGroups(ctx, all)
		if err == nil {
			tg, _, err = db.withImported(ctx, all, tg, nil)
		}
		if err != nil {
			return nil, false, err
		}
		for _, a := range tg {
			total = a.visitors
		}
	}
	rows := make([]StatsRow, 0, len(order))
	for _, key := range order {
		a := groups[key]
		row := StatsRow{Dims: splitKey(key, len(q.Dimensions)), Metrics: make([]float64, len(q.Metrics))}
		for i, m := range q.Metrics {
			row.Metrics[i] = a.metric(m, total)
		}
		rows = append(rows, row)
	}
	if len(q.Dimensions) == 0 && len(rows) == 0 {
		rows = append(rows, StatsRow{Dims: []string{}, Metrics: make([]float64, len(q.Metrics))})
	}
	return rows, estimated, nil
}

func needs(list []string, m string) bool {
	for _, x := range list {
		if x == m {
			return true
		}
	}
	return false
}

// metric computes m from a group's sums; total is the visitors of the
// whole query, for percentage.
func (a *aggregate) metric(m string, total float64) float64 {
	ratio := func(n, d float64) float64 {
		if d == 0 {
			return 0
		}
		return n / d
	}
	switch m {
	case MetricVisitors:
		return a.visitors
	case MetricVisits:
		return a.visits
	case MetricPageviews:
		return a.pageviews
	case MetricEvents:
		return a.events
	case MetricViewsPerVisit:
		return round(ratio(a.sPageviews, a.sVisits), 2)
	case MetricBounceRate:
		if a.entered {
			return math.Round(100 * ratio(a.bBounces, a.bVisits))
		}
		return math.Round(100 * ratio(a.sBounces, a.sVisits))
	case MetricVisitDuration:
		return math.Round(ratio(a.sDuration, a.sVisits))
	case MetricPercentage:
		return round(100*ratio(a.visitors, total), 1)
	}
	return 0
}

func round(x float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(x*p) / p
}

// keySep joins a group's dimension values into a map key; no shown value
// holds it (values are texts from JSON or SQLite, NUL-free in practice,
// and a NUL in one only merges groups, never fails).
const keySep = "\x00"

func splitKey(key string, n int) []string {
	if n == 0 {
		return []string{}
	}
	return strings.SplitN(key, keySep, n)
}

// statsGroups runs q's reads and returns each group's sums by key, keys in
// first-seen order. Event metrics (pageviews, events) count the events in
// the range, visit metrics (visits, bounce_rate, visit_duration,
// views_per_visit) the visits starting in it; visitors counts the
// visitors of the events when the query has an event dimension, filter or
// metric, else of the visits (docs/query-api.md).
func (db *DB) statsGroups(ctx context.Context, q StatsQuery) (map[string]*aggregate, []string, error) {
	q.d = db.d
	if !q.scan {
		groups, order, ok, err := db.partialGroups(ctx, q)
		if err != nil && !errors.Is(err, errBadPartial) || ok && err == nil {
			return groups, order, err
		}
	}
	key, gen, keep, err := db.cachedScan(ctx, &q)
	if err != nil {
		return nil, nil, err
	}
	if keep {
		if r, ok := db.reports.get(key, gen); ok && r.scan != nil {
			return r.scan.groups, r.scan.order, nil
		}
	}
	// Only the scan lists the values of matches filters: the partials and
	// the cache answer without them.
	if err := db.resolveMatches(ctx, &q); err != nil {
		return nil, nil, err
	}
	groups, order, err := db.scanStats(ctx, q)
	if keep && err == nil {
		db.keepScan(key, gen, groups, order)
	}
	return groups, order, err
}

// scanStats is statsGroups read from the tables.
func (db *DB) scanStats(ctx context.Context, q StatsQuery) (map[string]*aggregate, []string, error) {
	q.d = db.d
	groups := map[string]*aggregate{}
	var order []string
	get := func(key string) *aggregate {
		a := groups[key]
		if a == nil {
			a = &aggregate{}
			groups[key] = a
			order = append(order, key)
		}
		return a
	}
	eventLevel := q.eventLevel()
	eventMetric := needs(q.Metrics, MetricPageviews) || needs(q.Metrics, MetricEvents)
	sessionMetric := false
	for _, m := range q.Metrics {
		sessionMetric = sessionMetric || SessionMetric(m)
	}
	if eventLevel || eventMetric {
		if err := db.readEvents(ctx, &q, eventLevel, get); err != nil {
			return nil, nil, err
		}
	}
	if eventLevel {
		if !sessionMetric {
			return groups, order, nil
		}
		// Session metrics over the visits starting in the range that hold at
		// least one event that passes the filters; by event:page, over the
		// visits that entered on each page, as Plausible (the server refuses
		// them with other event dimensions, as Plausible does). bounce_rate
		// under an event:page filter counts the visits that entered on the
		// page it names (entryFilters).
		sb := &sqlBuilder{q: &q, visitSide: true}
		dims, err := sb.dims()
		if err != nil {
			return nil, nil, err
		}
		where, err := sb.filterSQL(q.Filters, true)
		if err != nil {
			return nil, nil, err
		}
		d := q.dialect()
		hasEvent := func(cond string) string {
			return `EXISTS (SELECT 1 FROM events e WHERE e.site_id = s.site_id AND e.anon_id = s.anon_id
				AND e.ts_ms >= ` + visitStartMS("s") + ` AND e.ts_ms <= ` + visitEndMS("s") + ` AND ` + cond + `)`
		}
		args := slices.Clone(sb.dimArgs)
		bounceCols, n := "", 4
		entry, entered := entryFilters(q.Filters)
		if entered {
			eb := &sqlBuilder{q: &q}
			ew, err := eb.filterSQL(entry, true)
			if err != nil {
				return nil, nil, err
			}
			cond := hasEvent(ew)
			bounceCols, n = `, COALESCE(SUM(`+d.BoolInt(cond)+`), 0), COALESCE(SUM(`+d.BoolInt(cond+" AND s.event_count = 1")+`), 0)`, 6
			args = append(append(args, eb.whereArgs...), eb.whereArgs...)
		}
		args = append(append(args, q.Site, q.From.UnixMilli(), q.To.UnixMilli()), sb.whereArgs...)
		query := `SELECT ` + dims + `COUNT(*), COALESCE(SUM(` + d.BoolInt("s.event_count = 1") + `), 0), COALESCE(SUM(` + durationSQL + `), 0), COALESCE(SUM(s.pageviews), 0)` + bounceCols + `
			FROM sessions s WHERE ` + visitRangeSQL + ` AND ` + hasEvent(where) + sb.groupBy()
		// By page, the rows are the pages of the events read: an entry
		// page none of whose events passes the filters is no row.
		byPage := slices.Contains(q.Dimensions, "event:page")
		err = db.scanGroups(ctx, query, args, len(q.Dimensions), n, func(key string, v []float64) {
			if _, ok := groups[key]; byPage && !ok {
				return
			}
			a := get(key)
			a.sVisits, a.sBounces, a.sDuration, a.sPageviews = v[0], v[1], v[2], v[3]
			if entered {
				a.entered, a.bVisits, a.bBounces = true, v[4], v[5]
			}
		})
		return groups, order, err
	}
	if eventMetric && !sessionMetric && !needs(q.Metrics, MetricVisits) {
		return groups, order, nil
	}
	// Visit metrics from the visits starting in the range.
	b := &sqlBuilder{q: &q, visitSide: true}
	dims, err := b.dims()
	if err != nil {
		return nil, nil, err
	}
	where, err := b.where()
	if err != nil {
		return nil, nil, err
	}
	query := `SELECT ` + dims + `COUNT(DISTINCT s.anon_id), COUNT(*), COALESCE(SUM(s.pageviews), 0),
		COALESCE(SUM(` + q.dialect().BoolInt("s.event_count = 1") + `), 0), COALESCE(SUM(` + durationSQL + `), 0)
		FROM sessions s WHERE ` + visitRangeSQL + where + b.groupBy()
	err = db.scanGroups(ctx, query, b.args(), len(q.Dimensions), 5, func(key string, v []float64) {
		a := get(key)
		if !eventMetric {
			a.visitors = v[0]
		}
		a.visits = v[1]
		a.sVisits, a.sPageviews, a.sBounces, a.sDuration = v[1], v[2], v[3], v[4]
	})
	return groups, order, err
}

// eventRead is the read of q's events, each with its visit: one row per
// group of its distinct visitors, distinct visits, pageviews and events.
//
// It reads the visits that overlap the range through sessions_site_start,
// applies the filters that are on the visit alone to each visit row, and
// only then reads each surviving visit's events in the range through
// events_site_anon_ts (docs/query-api.md#how-reports-stay-fast): a
// filtered report reads the events of the visits it keeps, not every event
// of the site. Visits starting before the range that run into it are
// found from the visit reach (report_visit_reach.go). Every event has a visit (the
// writer assigns it in the same transaction; retention keeps a visit until
// its end passes the cut), so no event is missed.
//
// byEvents reads the site's event index instead, joining each event to its
// visit (the read before; tests compare the two).
func (db *DB) eventRead(ctx context.Context, q *StatsQuery, eventLevel bool) (string, []any, error) {
	if q.byEvents {
		return q.eventIndexRead(eventLevel)
	}
	lo, err := db.visitLookback(ctx, q.Site, q.From)
	if err != nil {
		return "", nil, err
	}
	db.usePages(q)
	return q.visitsEventRead(lo, q.To, false)
}

// eventIndexRead is the read of q's events through the site's event
// index, each joined to its visit where a visit dimension or filter, or
// (event-level) the visits metric, needs it (the read before; tests compare
// the two).
func (q *StatsQuery) eventIndexRead(eventLevel bool) (string, []any, error) {
	b := &sqlBuilder{q: q}
	dims, err := b.dims()
	if err != nil {
		return "", nil, err
	}
	where, err := b.where()
	if err != nil {
		return "", nil, err
	}
	from, visitsSQL := `events e`, `0`
	if q.needsVisit() && (eventLevel || q.visitAttributes()) {
		from = `events e LEFT JOIN sessions s ON ` + eventVisitJoin
		visitsSQL = `COUNT(DISTINCT s.id)`
	}
	from += b.goalRows()
	query := `SELECT ` + dims + `COUNT(DISTINCT e.anon_id), ` + visitsSQL + `, COALESCE(SUM(` + q.dialect().BoolInt("e.type = 'pageview'") + `), 0), COUNT(*)
		FROM ` + from + ` WHERE e.site_id = ? AND e.ts_ms >= ? AND e.ts_ms < ?` + where + b.groupBy()
	return query, b.args(), nil
}

// visitsEventRead is the read of q's events through the visits starting
// in [lo, hi) that reach the range: per group its distinct visitors and
// visits, pageviews and events. byAnon groups by visitor too (the column
// after the dimensions), with the group's visits of that visitor instead
// of the two distinct counts, so that the reads of parts of the visits
// merge (readEvents).
func (q *StatsQuery) visitsEventRead(lo, hi time.Time, byAnon bool) (string, []any, error) {
	b := &sqlBuilder{q: q, pages: q.pages}
	dims, err := b.dims()
	if err != nil {
		return "", nil, err
	}
	where, err := b.where()
	if err != nil {
		return "", nil, err
	}
	counts, groupBy := `COUNT(DISTINCT e.anon_id), COUNT(DISTINCT s.id)`, b.groupBy()
	if byAnon {
		// The visits of one visitor in a group: only when the query
		// counts visits (the distinct costs a sort).
		visits := `0`
		if q.eventLevel() && needs(q.Metrics, MetricVisits) {
			visits = `COUNT(DISTINCT s.id)`
		}
		counts = `e.anon_id, ` + visits
		cols := make([]string, len(q.Dimensions)+1)
		for i := range cols {
			cols[i] = fmt.Sprint(i + 1)
		}
		// Ordered, so that the parts merge as they come (readEvents).
		groupBy = " GROUP BY " + strings.Join(cols, ", ") + " ORDER BY " + strings.Join(cols, ", ")
	}
	// CROSS JOIN keeps the visits outside: SQLite then tests the filters
	// on the visit alone once per visit, before reading its events.
	d := q.dialect()
	pageview, from := `e.type = 'pageview'`, `sessions s CROSS JOIN events e`
	if b.pages {
		// The event's index entry and its event_pages row: the events
		// row is not read.
		pageview, from = `p.name IS NULL`, from+` CROSS JOIN event_pages p`
		where = ` AND p.seq = e.seq` + where
	}
	from += b.goalRows()
	query := `SELECT ` + dims + counts + `, COALESCE(SUM(` + d.BoolInt(pageview) + `), 0), COUNT(*)
		FROM ` + from + `
		WHERE s.site_id = ? AND s.started_ms >= ? AND s.started_ms < ? AND s.ended_ms >= ?
		AND e.site_id = s.site_id AND e.anon_id = s.anon_id
		AND e.ts_ms >= ` + d.Greatest("?", visitStartMS("s")) + ` AND e.ts_ms <= ` + d.Least("?", visitEndMS("s")) + where + groupBy
	args := append([]any{}, b.dimArgs...)
	args = append(args, q.Site, visitTimeArg(lo), visitTimeArg(hi), visitTimeArg(q.From), q.From.UnixMilli(), q.To.UnixMilli()-1)
	return query, append(args, b.whereArgs...), nil
}

// visitAttributes reports whether q has a visit dimension or filter.
func (q *StatsQuery) visitAttributes() bool {
	found := false
	for _, d := range q.Dimensions {
		found = found || strings.HasPrefix(d, "visit:")
	}
	filterDims(q.Filters, func(d string) { found = found || strings.HasPrefix(d, "visit:") })
	return found
}

// eventVisitJoin finds an event's visit (e, s): the visit of its anon id
// whose span holds its ts. The latest visit starting at or before ts is
// one step of the (site_id, anon_id, started_ms) index, however many
// visits the anon id has (a regular's thousands); it is the event's when
// it has not ended before ts, as visits never overlap.
const eventVisitJoin = `s.id = (SELECT x.id FROM sessions x WHERE x.site_id = e.site_id AND x.anon_id = e.anon_id
	AND x.started_ms <= e.ts_ms ORDER BY x.started_ms DESC LIMIT 1) AND s.ended_ms >= e.ts_ms`

// scanGroups runs query and hands each row's key (its first dims columns)
// and its n numbers to add.
func (db *DB) scanGroups(ctx context.Context, query string, args []any, dims, n int, add func(string, []float64)) error {
	rows, err := db.read.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	texts := make([]string, dims)
	nums := make([]float64, n)
	dest := make([]any, 0, dims+n)
	for i := range texts {
		dest = append(dest, &texts[i])
	}
	for i := range nums {
		dest = append(dest, &nums[i])
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		add(strings.Join(texts, keySep), nums)
	}
	return rows.Err()
}

// sqlBuilder writes one read of a query: its dimension columns, filter
// and arguments, in the order they appear in the SQL.
type sqlBuilder struct {
	q *StatsQuery
	// visitSide: the read is of sessions s alone (time is the visit's
	// start), not of events e (time is the event's ts).
	visitSide bool
	// pages: an event's name and page are read from event_pages p, its
	// time from the index's ts_ms (usePages).
	pages     bool
	dimArgs   []any
	whereArgs []any
}

// dialect is the query's SQL fragments: SQLite's unless set.
func (q *StatsQuery) dialect() dialect {
	if q.d == nil {
		return sqliteDialect{}
	}
	return q.d
}

// args are the read's arguments: the dimensions', the site and range,
// then the filter's.
func (b *sqlBuilder) args() []any {
	a := append([]any{}, b.dimArgs...)
	// Events are bounded by ts_ms, visits by started_ms, which their
	// indexes hold (docs/storage.md#event-bytes).
	a = append(a, b.q.Site, b.q.From.UnixMilli(), b.q.To.UnixMilli())
	return append(a, b.whereArgs...)
}

// dims returns the dimension columns, each followed by a comma.
func (b *sqlBuilder) dims() (string, error) {
	var sb strings.Builder
	for _, d := range b.q.Dimensions {
		expr, args, err := b.dimExpr(d)
		if err != nil {
			return "", err
		}
		b.dimArgs = append(b.dimArgs, args...)
		sb.WriteString(expr + ", ")
	}
	return sb.String(), nil
}

func (b *sqlBuilder) groupBy() string {
	if len(b.q.Dimensions) == 0 {
		return ""
	}
	cols := make([]string, len(b.q.Dimensions))
	for i := range cols {
		cols[i] = fmt.Sprint(i + 1)
	}
	return " GROUP BY " + strings.Join(cols, ", ")
}

// where returns the filters as " AND (...)" on the read's rows, or "";
// with goals, the condition that the row's goal (g) holds too.
func (b *sqlBuilder) where() (string, error) {
	var sql string
	if len(b.q.Filters) > 0 {
		f, err := b.filterSQL(b.q.Filters, false)
		if err != nil {
			return "", err
		}
		sql = " AND " + f
	}
	if b.goals() {
		var sb strings.Builder
		sb.WriteString(" AND CASE g.column1")
		for i, g := range b.q.Goals {
			f, err := b.filterNode(g, false)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&sb, " WHEN %d THEN %s", i, f)
		}
		sb.WriteString(" ELSE " + b.q.dialect().BoolLit(false) + " END")
		sql += sb.String()
	}
	return sql, nil
}

// GoalDimension groups a query's events by the Goals they complete.
const GoalDimension = "event:goal"

// goals reports whether the read groups by goal.
func (b *sqlBuilder) goals() bool {
	return len(b.q.Goals) > 0 && slices.Contains(b.q.Dimensions, GoalDimension)
}

// goalRows is the join that repeats each event once per goal (g), the
// innermost loop, so that each event is read once.
func (b *sqlBuilder) goalRows() string {
	if !b.goals() {
		return ""
	}
	rows := make([]string, len(b.q.Goals))
	for i := range rows {
		rows[i] = fmt.Sprintf("(%d)", i)
	}
	return " CROSS JOIN (VALUES " + strings.Join(rows, ", ") + ") g"
}

// filterSQL is fs (all must hold) as one SQL condition. inner: the
// condition is on events e of a visit s (the session side's EXISTS), so
// event dimensions are read from e even though the read is of visits.
func (b *sqlBuilder) filterSQL(fs []QueryFilter, inner bool) (string, error) {
	if len(fs) == 0 {
		return b.q.dialect().BoolLit(true), nil
	}
	parts := make([]string, 0, len(fs))
	for _, f := range fs {
		p, err := b.filterNode(f, inner)
		if err != nil {
			return "", err
		}
		parts = append(parts, p)
	}
	return "(" + strings.Join(parts, " AND ") + ")", nil
}

func (b *sqlBuilder) filterNode(f QueryFilter, inner bool) (string, error) {
	switch f.Op {
	case "and", "or":
		parts := make([]string, 0, len(f.Children))
		for _, c := range f.Children {
			p, err := b.filterNode(c, inner)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		if len(parts) == 0 {
			return b.q.dialect().BoolLit(true), nil
		}
		return "(" + strings.Join(parts, " "+strings.ToUpper(f.Op)+" ") + ")", nil
	case "not":
		p, err := b.filterSQL(f.Children, inner)
		if err != nil {
			return "", err
		}
		return "NOT " + p, nil
	case "has_done", "has_not_done":
		return b.behaviourSQL(f)
	}
	saved := b.visitSide
	if inner {
		// In the EXISTS of the session side both e and s are there; time
		// dimensions are never filters.
		b.visitSide = false
	}
	expr, args, err := b.dimExpr(f.Dim)
	b.visitSide = saved
	if err != nil {
		return "", err
	}
	value, shown := "?", expr
	if f.Fold {
		expr, value = b.q.dialect().Fold(expr), b.q.dialect().Fold("?")
	}
	var each []string
	if (f.Op == "is" || f.Op == "is_not") && len(f.Values) > 0 {
		// One IN list, not a chain of ORs: a filter on names stands for
		// the codes of every name it matches (all ~5,000 regions for a
		// matches_not of ""), past SQLite's expression depth of 1,000.
		each = append(each, expr+" IN ("+strings.Repeat(value+", ", len(f.Values)-1)+value+")")
		b.whereArgs = append(b.whereArgs, args...)
		for _, v := range f.Values {
			b.whereArgs = append(b.whereArgs, v)
		}
	}
	for _, v := range f.Values {
		switch f.Op {
		case "is", "is_not":
			// The IN list above.
		case "contains", "contains_not":
			each = append(each, b.q.dialect().Contains(expr, value))
			b.whereArgs = append(append(b.whereArgs, args...), v)
		case "matches", "matches_not":
			if _, err := compilePattern(v); err != nil {
				return "", err
			}
			if list := b.q.dialect().matchList(expr); list != "" {
				each = append(each, list)
				b.whereArgs = append(append(b.whereArgs, args...), b.q.matched[matchKey(f.Dim, v, f.Fold)])
				continue
			}
			each = append(each, "tally_match(?, "+expr+")")
			b.whereArgs = append(append(b.whereArgs, v), args...)
		default:
			return "", fault.Errorf(fault.InvalidQuery, "unknown filter operator %q", f.Op)
		}
	}
	// An empty list of clauses matches nothing, so its negation all.
	cond := b.q.dialect().BoolLit(false)
	if len(each) > 0 {
		cond = "(" + strings.Join(each, " OR ") + ")"
	}
	if strings.HasSuffix(f.Op, "_not") {
		cond = "NOT " + cond
	}
	if propMustExist(f) {
		// After cond, as its arguments are.
		cond = "(" + cond + " AND " + shown + " <> '" + NoneProp + "')"
		b.whereArgs = append(b.whereArgs, args...)
	}
	return cond, nil
}

// entryFilters is fs with each condition on event:page made one on the
// visit's entry page, and whether fs has one: Plausible's bounce_rate
// under an event:page filter counts the visits that entered on the page.
func entryFilters(fs []QueryFilter) ([]QueryFilter, bool) {
	out := make([]QueryFilter, len(fs))
	found := false
	for i, f := range fs {
		if f.Dim == "event:page" {
			f.Dim, found = "visit:entry_page", true
		}
		var inner bool
		f.Children, inner = entryFilters(f.Children)
		found = found || inner
		out[i] = f
	}
	return out, found
}

// propMustExist reports whether f passes only events that have its custom
// property, as Plausible's contains_not and matches_not do (is_not passes
// events without it: docs/query-api.md#query-api).
func propMustExist(f QueryFilter) bool {
	return strings.HasPrefix(f.Dim, PropPrefix) && (f.Op == "contains_not" || f.Op == "matches_not")
}

// behaviourSQL is a has_done (has_not_done) filter as a condition on the
// read's visit s: it has (has not) an event e that passes the inner
// filter (docs/query-api.md#query-api). Every read that tests filters has
// s: the visit side's, the event reads through visits, the funnels', and
// the event index's when hasBehaviour makes it join the visit.
func (b *sqlBuilder) behaviourSQL(f QueryFilter) (string, error) {
	side, pages := b.visitSide, b.pages
	b.visitSide, b.pages = false, false
	inner, err := b.filterSQL(f.Children, false)
	b.visitSide, b.pages = side, pages
	if err != nil {
		return "", err
	}
	cond := "EXISTS (SELECT 1 FROM events e WHERE e.site_id = s.site_id AND e.anon_id = s.anon_id AND e.ts_ms >= " +
		visitStartMS("s") + " AND e.ts_ms <= " + visitEndMS("s") + " AND " + inner + ")"
	if f.Op == "has_not_done" {
		cond = "NOT " + cond
	}
	return cond, nil
}

// hasBehaviour reports whether fs hold a has_done or has_not_done filter.
func hasBehaviour(fs []QueryFilter) bool {
	for _, f := range fs {
		if f.Op == "has_done" || f.Op == "has_not_done" || hasBehaviour(f.Children) {
			return true
		}
	}
	return false
}

// dimExpr is the shown value of dimension d on a row of the read, never
// NULL, and its arguments.
func (b *sqlBuilder) dimExpr(d string) (string, []any, error) {
	if d == anonDim {
		if b.visitSide {
			return "s.anon_id", nil, nil
		}
		return "e.anon_id", nil, nil
	}
	if TimeDimension(d) {
		col := timeCol{expr: "e.ts"}
		if b.pages {
			// The index's ts_ms: the events row is not read.
			col = timeCol{expr: "e.ts_ms", ms: true}
		}
		if b.visitSide {
			col = timeCol{expr: "s.started_ms", ms: true}
		}
		return b.timeExpr(d, col)
	}
	if d == entryHostDim || d == exitHostDim {
		return b.visitHostSQL(d == exitHostDim), nil, nil
	}
	if col, ok := VisitDimensions[d]; ok {
		if d == ChannelDimension {
			return channelSQL(), nil, nil
		}
		if d == "visit:source" || d == "visit:referrer" {
			// A visit without one is Plausible's "Direct / None"
			// (docs/query-api.md#value-names).
			return "COALESCE(NULLIF(s." + col + ", ''), '" + DirectNone + "')", nil, nil
		}
		return plausibleNameSQL(d, "COALESCE(s."+col+", '"+NotSet+"')"), nil, nil
	}
	if b.visitSide && d == "event:page" {
		// Session metrics by page are the visits' that entered there.
		return "COALESCE(s.entry_page, '" + NotSet + "')", nil, nil
	}
	if b.visitSide {
		return "", nil, fault.Errorf(fault.InvalidQuery, "%s is read from events, not visits", d)
	}
	switch {
	case d == GoalDimension && b.goals():
		return "g.column1", nil, nil
	case d == "event:page" && b.pages:
		return "COALESCE(p.path, '" + NotSet + "')", nil, nil
	case d == "event:page":
		return "COALESCE(" + b.q.dialect().pagePath() + ", '" + NotSet + "')", nil, nil
	case d == HostnameDimension:
		return "COALESCE(" + b.q.dialect().pageHost() + ", '" + NotSet + "')", nil, nil
	case d == "event:name" && b.pages:
		return "COALESCE(p.name, 'pageview')", nil, nil
	case d == "event:name":
		return "e.type", nil, nil
	case strings.HasPrefix(d, PropPrefix):
		return "COALESCE(" + b.q.dialect().prop() + ", '" + NoneProp + "')", []any{strings.TrimPrefix(d, PropPrefix)}, nil
	}
	return "", nil, fault.Errorf(fault.InvalidQuery, "unknown dimension %q", d)
}

// eventRawSQL is rawSQL on events aliased e (sessions share some column
// names).
const eventRawSQL = `event_raw(e.raw, e.id, e.site_id, e.type, e.anon_id, e.user_id, e.url, e.referrer)`

// timeExpr is the bucket of col in the site's time zone: the local time
// is the UTC time shifted by the zone's offset of each period of the range
// (a CASE over its offset changes, so the query never leaves SQLite), then
// cut to the unit.
func (b *sqlBuilder) timeExpr(d string, col timeCol) (string, []any, error) {
	unit := strings.TrimPrefix(d, "time:")
	if d == "time" {
		unit = b.q.TimeUnit
	}
	local, args, err := localTimeSQL(b.q.dialect(), col, b.q.Zone, b.q.From, b.q.To)
	if err != nil {
		return "", nil, err
	}
	switch unit {
	case "minute":
		return "substr(" + local + ", 1, 16) || ':00'", args, nil
	case "hour":
		return "substr(" + local + ", 1, 13) || ':00:00'", args, nil
	case "day":
		return "substr(" + local + ", 1, 10)", args, nil
	case "week":
		return b.q.dialect().WeekStart("substr(" + local + ", 1, 10)"), args, nil
	case "month":
		return "substr(" + local + ", 1, 7) || '-01'", args, nil
	}
	return "", nil, fault.Errorf(fault.InvalidQuery, "unknown time dimension %q", d)
}

// maxZonePeriods bounds the CASE of a time expression: about two offset
// changes a year, so centuries of range.
const maxZonePeriods = 500

// timeCol is a time column as time buckets read it: an ISO UTC text as
// FormatTime writes it (events.ts), or integer milliseconds since the
// epoch (a visit's started_ms, docs/intake.md#visits, Stored form), from which
// SQLite makes the local text with one datetime() call.
type timeCol struct {
	expr string
	ms   bool
}

// arg is t as a value compared with col.
func (c timeCol) arg(t time.Time) any {
	if c.ms {
		return t.UnixMilli()
	}
	return FormatTime(t)
}

// localTimeSQL is col as local time text ("YYYY-MM-DD HH:MM:SS") in loc,
// exact for every instant in [from, to).
func localTimeSQL(d dialect, col timeCol, loc *time.Location, from, to time.Time) (string, []any, error) {
	if loc == nil {
		loc = time.UTC
	}
	var whens []string
	var args []any
	t := from
	for {
		_, off := t.In(loc).Zone()
		_, end := t.In(loc).ZoneBounds()
		shift := d.LocalTime(col.expr, col.ms, off)
		if end.IsZero() || !end.Before(to) {
			if len(whens) == 0 {
				return shift, nil, nil
			}
			return "(CASE " + strings.Join(whens, " ") + " ELSE " + shift + " END)", args, nil
		}
		if len(whens) >= maxZonePeriods {
			return "", nil, fault.Errorf(fault.InvalidQuery, "the date range spans too many time zone changes; ask for a shorter range")
		}
		whens = append(whens, fmt.Sprintf("WHEN %s < ? THEN %s", col.expr, shift))
		args = append(args, col.arg(end))
		t = end
	}
}

// propText is a custom property of an event's raw JSON as text, nil when
// the event has none: strings as they are, true and false as words,
// numbers as JSON writes them, objects and arrays as their JSON.
func propText(raw, name string) any {
	var ev struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal([]byte(raw), &ev) != nil {
		return nil
	}
	v, ok := ev.Properties[name]
	if !ok {
		return nil
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	if string(v) == "null" {
		return nil
	}
	return string(v)
}

// pathMemo remembers PagePath of recent urls; it is emptied when full, so
// it never holds more than pathMemoSize.
type pathMemo struct {
	mu sync.Mutex
	m  map[string]string
}

const pathMemoSize = 50000

var pagePaths = &pathMemo{m: map[string]string{}}

func (p *pathMemo) get(u string) string {
	p.mu.Lock()
	path, ok := p.m[u]
	p.mu.Unlock()
	if ok {
		return path
	}
	path = PagePath(u)
	p.mu.Lock()
	if len(p.m) >= pathMemoSize {
		clear(p.m)
	}
	p.m[u] = path
	p.mu.Unlock()
	return path
}

func textArg(v driver.Value) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case []byte:
		return string(x), true
	}
	return "", false
}

func init() {
	// tally_page_path(url) is PagePath, remembered: a site has few
	// distinct urls and a query reads each many times, while parsing one
	// costs more than reading its row.
	sqlite.MustRegisterDeterministicScalarFunction("tally_page_path", 1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		if s, ok := textArg(args[0]); ok {
			return pagePaths.get(s), nil
		}
		return nil, nil
	})
	// tally_page_host(url) is PageHost.
	sqlite.MustRegisterDeterministicScalarFunction("tally_page_host", 1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		if s, ok := textArg(args[0]); ok {
			if h := PageHost(s); h != "" {
				return h, nil
			}
		}
		return nil, nil
	})
	// tally_prop(raw json, name) is propText.
	sqlite.MustRegisterDeterministicScalarFunction("tally_prop", 2, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		raw, ok := textArg(args[0])
		name, ok2 := textArg(args[1])
		if !ok || !ok2 {
			return nil, nil
		}
		return propText(raw, name), nil
	})
	// tally_match(pattern, value) is 1 when value matches the RE2 pattern.
	sqlite.MustRegisterDeterministicScalarFunction("tally_match", 2, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		p, ok := textArg(args[0])
		s, ok2 := textArg(args[1])
		if !ok || !ok2 {
			return int64(0), nil
		}
		re, err := compilePattern(p)
		if err != nil {
			return nil, err
		}
		if re.MatchString(s) {
			return int64(1), nil
		}
		return int64(0), nil
	})
}

// MaxTimeLabels bounds TimeLabels (a year of hours is 8,784).
const MaxTimeLabels = 50000

// TimeLabels lists every bucket of unit (minute, hour, day, week, month) in
// [from, to), as the time dimensions show them in loc; false when there
// would be more than MaxTimeLabels.
func TimeLabels(unit string, from, to time.Time, loc *time.Location) ([]string, bool) {
	if loc == nil {
		loc = time.UTC
	}
	var out []string
	add := func(s string) bool {
		if len(out) > 0 && out[len(out)-1] == s {
			return true
		}
		out = append(out, s)
		return len(out) <= MaxTimeLabels
	}
	if !from.Before(to) {
		return []string{}, true
	}
	if unit == "hour" || unit == "minute" {
		// Hours are walked in absolute time, so a day with a DST change has
		// 23 or 25 of them, as the data does.
		step, layout := time.Hour, "2006-01-02 15:00:00"
		if unit == "minute" {
			step, layout = time.Minute, "2006-01-02 15:04:00"
			from = from.Truncate(time.Minute)
		}
		for t := from; t.Before(to); t = t.Add(step) {
			if !add(t.In(loc).Format(layout)) {
				return nil, false
			}
		}
		add(to.Add(-time.Nanosecond).In(loc).Format(layout))
		return out, true
	}
	last := to.Add(-time.Nanosecond).In(loc)
	lastDay := time.Date(last.Year(), last.Month(), last.Day(), 0, 0, 0, 0, time.UTC)
	f := from.In(loc)
	d := time.Date(f.Year(), f.Month(), f.Day(), 0, 0, 0, 0, time.UTC)
	switch unit {
	case "week":
		d = d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7))
	case "month":
		d = time.Date(d.Year(), d.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	for !d.After(lastDay) {
		if !add(d.Format(time.DateOnly)) {
			return nil, false
		}
		switch unit {
		case "week":
			d = d.AddDate(0, 0, 7)
		case "month":
			d = d.AddDate(0, 1, 0)
		default:
			d = d.AddDate(0, 0, 1)
		}
	}
	return out, true
}

// FirstVisit is the start of the site's earliest visit, or false when it
// has none (the query API's "all" range starts there).
func (db *DB) FirstVisit(ctx context.Context, site string) (time.Time, bool, error) {
	var ms *int64
	if err := db.read.QueryRowContext(ctx, `SELECT MIN(started_ms) FROM sessions WHERE site_id = ?`, site).Scan(&ms); err != nil || ms == nil {
		return time.Time{}, false, err
	}
	return msTime(*ms), true, nil
}
