package storage

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
)

// MaxFunnelSteps bounds a funnel's steps: each is one bit of a mask.
const MaxFunnelSteps = 8

// FunnelQuery is a funnel over [From, To): Steps completed in order within
// one visit, counting only the events that pass Filters (the query API's).
type FunnelQuery struct {
	Site     string
	From, To time.Time
	Zone     *time.Location
	Filters  []QueryFilter
	Steps    []Goal

	// matched is what resolveMatches read for Filters.
	matched map[string][]string

	// visitKey, when set, is the SQL expression (on the visit s) a visit's
	// furthest step is kept under instead of its visitor's id: funnel
	// partials key it by its start day too (partial_funnels.go).
	visitKey string
}

// funnelEvent is how a funnel read hands SQLite's grouping one event:
// its time, arrival order, type and, for a pageview, url (pageview goals
// test its path), then its raw JSON when a step matches a property ({raw};
// else nothing), each text as its byte length, a comma and its bytes ('-'
// for none).
const funnelEvent = `e.ts_ms || ',' || e.seq || ',' || octet_length(e.type) || ',' || e.type ||
	COALESCE(octet_length(CASE WHEN e.type = 'pageview' THEN e.url END) || ',' || e.url, '-'){raw}`

// funnelPageEvent is funnelEvent read from the event's index entry and
// its event_pages row (docs/query-api.md#how-reports-stay-fast): the
// page's path in place of its url, and no raw JSON, so that the wide
// events row is not read.
const funnelPageEvent = `e.ts_ms || ',' || e.seq || ',' || COALESCE(octet_length(p.name) || ',' || p.name, '8,pageview') ||
	COALESCE(octet_length(CASE WHEN p.name IS NULL THEN p.path END) || ',' || p.path, '-')`

// funnelEvents is what a funnel reads: the visits (s) and their events
// (e); funnelPageEvents adds their event_pages rows (p).
const (
	funnelEvents     = `FROM sessions s CROSS JOIN events e`
	funnelPageEvents = `FROM sessions s CROSS JOIN events e CROSS JOIN event_pages p`
)

// Funnel answers q: per step, the distinct visitors who reached it, in
// order, within one visit (docs/query-api.md#goals-and-funnels).
//
// Events are read through the visits that reach the range, as the query
// API's event reads are (docs/query-api.md#how-reports-stay-fast), and
// no event row leaves SQLite: SQLite strings each visit's events together
// (funnelEvent; the grouping follows the visits' index, so it sorts
// nothing), and one Go call a visit (tally_funnel_visit) orders them by
// time and arrival, gives each the mask of the steps it matches (its
// page's steps remembered per url) and walks them to the visit's furthest
// step; a visitor's furthest step is its furthest visit's. Only the
// events of the steps' types are read, in two parts at once
// (funnelBests). The site's default funnel over closed days reads funnel
// partials instead (partial_funnels.go), and a funnel of a closed range
// is kept in the report cache (report_funnel_cache.go).
func (db *DB) Funnel(ctx context.Context, q FunnelQuery) ([]int, error) {
	if len(q.Steps) == 0 || len(q.Steps) > MaxFunnelSteps {
		return nil, fmt.Errorf("a funnel has 1 to %d steps, not %d", MaxFunnelSteps, len(q.Steps))
	}
	m, err := db.funnelMatcher(&q)
	if err != nil {
		return nil, err
	}
	// Where matches filters are matched in Go (PostgreSQL), their values
	// in the range are read once for every part of the funnel.
	mq := &StatsQuery{Site: q.Site, From: q.From, To: q.To, Zone: q.Zone, Filters: q.Filters, d: db.d}
	if err := db.resolveMatches(ctx, mq); err != nil {
		return nil, err
	}
	q.matched = mq.matched
	lo, err := db.visitLookback(ctx, q.Site, q.From)
	if err != nil {
		return nil, err
	}
	key, gen, keep, err := db.funnelKey(ctx, &q, lo)
	if err != nil {
		return nil, err
	}
	if keep {
		if r, ok := db.reports.get(key, gen); ok && r.funnel != nil {
			return slices.Clone(r.funnel), nil
		}
	}
	best, ok, err := db.funnelFromPartials(ctx, &q, m, lo)
	if err != nil {
		return nil, err
	}
	if !ok {
		if best, err = db.funnelBests(ctx, &q, m, lo, ""); err != nil {
			return nil, err
		}
	}
	counts := make([]int, len(q.Steps))
	for _, step := range best {
		for i := 0; i < step; i++ {
			counts[i]++
		}
	}
	if keep {
		db.reports.put(&cachedReport{key: key, gen: gen, funnel: slices.Clone(counts)})
	}
	return counts, nil
}

// funnelMatcher is the matcher of q's steps, reading the narrow rows when
// event_pages is complete and no step or filter needs more of an event
// than its name and page (usePages); decided once, so every part of a
// funnel reads alike.
func (db *DB) funnelMatcher(q *FunnelQuery) (*funnelMatcher, error) {
	m, err := newFunnelMatcher(q.Steps)
	if err != nil {
		return nil, err
	}
	sq := &StatsQuery{Site: q.Site, Filters: q.Filters, wideEvents: m.props}
	db.usePages(sq)
	m.paths = sq.pages
	return m, nil
}

// funnelBests reads the visits of q starting from lo that also pass
// extra (a condition on the visit s, "" for none) and returns each
// visitor's furthest step (visitors of none left out). The visitors are
// read in two parts at once, on two read connections, split by the last
// character of their id, so each visitor is in one part.
func (db *DB) funnelBests(ctx context.Context, q *FunnelQuery, m *funnelMatcher, lo time.Time, extra string) (map[string]int, error) {
	parts := []string{""}
	if db.readConns >= 2 {
		last := db.d.LastChar("s.anon_id")
		parts = []string{" AND COALESCE(" + last + ", 0) % 2 = 0", " AND COALESCE(" + last + ", 0) % 2 = 1"}
	}
	// Each part runs on its own connection of the read pool; neither holds
	// one while waiting for another, so two funnels cannot wait on each
	// other.
	reached := make([]map[string]int, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, part := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reached[i], errs[i] = db.funnelPart(ctx, q, m, lo, part+extra)
		}()
	}
	wg.Wait()
	best := reached[0]
	for i, r := range reached {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if i > 0 {
			maps.Copy(best, r) // the parts' visitors differ
		}
	}
	return best, nil
}

// funnelPart returns the furthest step of each visitor of one part (part:
// its condition on the visit) who reached one.
func (db *DB) funnelPart(ctx context.Context, q *FunnelQuery, m *funnelMatcher, lo time.Time, part string) (map[string]int, error) {
	sq := &StatsQuery{Site: q.Site, From: q.From, To: q.To, Zone: q.Zone, Filters: q.Filters, pages: m.paths, d: db.d, matched: q.matched}
	fb := &sqlBuilder{q: sq, pages: m.paths}
	where, err := fb.where()
	if err != nil {
		return nil, err
	}
	from := funnelEvents
	var typeArgs []any
	var typeCond string
	if m.paths {
		from = funnelPageEvents
	}
	// The types as a chain of ORs, not IN: SQLite tests an IN list of a
	// column without an index by a seek in a temporary B-tree, a seek per
	// event.
	conds := make([]string, len(m.types))
	for i, t := range m.types {
		switch {
		case !m.paths:
			conds[i] = "e.type = ?"
		case t == "pageview":
			// A pageview's name is NULL in event_pages.
			conds[i] = "p.name IS NULL"
			continue
		default:
			conds[i] = "p.name = ?"
		}
		typeArgs = append(typeArgs, t)
	}
	typeCond = "(" + strings.Join(conds, " OR ") + ")"
	if m.paths {
		typeCond = "p.seq = e.seq AND " + typeCond
	}
	key := "s.anon_id"
	if q.visitKey != "" {
		key = q.visitKey
	}
	r := &funnelRead{key: key, pages: m.paths, props: m.props,
		body: from + `
		WHERE s.site_id = ? AND s.started_ms >= ? AND s.started_ms < ? AND s.ended_ms >= ?` + part + `
		AND e.site_id = s.site_id AND e.anon_id = s.anon_id
		AND e.ts_ms >= ` + db.d.Greatest("?", visitStartMS("s")) + ` AND e.ts_ms <= ` + db.d.Least("?", visitEndMS("s")) + `
		AND ` + typeCond + where}
	r.args = []any{q.Site, visitTimeArg(lo), visitTimeArg(q.To), visitTimeArg(q.From), q.From.UnixMilli(), q.To.UnixMilli() - 1}
	r.args = append(r.args, typeArgs...)
	r.args = append(r.args, fb.whereArgs...)
	w := &funnelWalk{m: m, best: map[string]int{}}
	if err := db.d.walkFunnel(ctx, db.read, w, r); err != nil {
		return nil, err
	}
	if w.err != nil {
		return nil, w.err
	}
	return w.best, nil
}

// funnelRead is one part's read of a funnel's events, for a backend's
// walkFunnel: body is the read from FROM on (the visits s, their events
// e, event_pages p when pages), args its arguments; key is the SQL
// expression a visit's furthest step is kept under; props: the walk needs
// each event's properties.
type funnelRead struct {
	key, body    string
	args         []any
	pages, props bool
}

// walkFunnel is SQLite's funnel read: no event row leaves SQLite. It
// strings each visit's events together (funnelEvent; the grouping follows
// the visits' index, so it sorts nothing) and hands them to w in one Go
// call a visit (tally_funnel_visit).
func (sqliteDialect) walkFunnel(ctx context.Context, read *sql.DB, w *funnelWalk, r *funnelRead) error {
	raw := ""
	if r.props {
		raw = ` || COALESCE(octet_length(` + eventRawSQL + `) || ',' || ` + eventRawSQL + `, '-')`
	}
	event := strings.Replace(funnelEvent, "{raw}", raw, 1)
	if r.pages {
		event = funnelPageEvent
	}
	id := funnelIDs.Add(1)
	funnelWalks.Store(id, w)
	defer funnelWalks.Delete(id)
	query := `SELECT COUNT(v) FROM (
		SELECT tally_funnel_visit(?, ` + r.key + `, group_concat(` + event + `, '')) AS v
		` + r.body + `
		GROUP BY s.started_ms, s.id)`
	var visits int64
	return read.QueryRowContext(ctx, query, append([]any{id}, r.args...)...).Scan(&visits)
}

// funnelWalk is one funnel read's walk of its visits.
type funnelWalk struct {
	m    *funnelMatcher
	best map[string]int // visitor -> furthest step
	err  error
	evs  []funnelEventRow
}

// funnelEventRow is one event of a visit.
type funnelEventRow struct {
	ts, seq       int64
	typ, url, raw string
	hasURL        bool
}

// visit walks one visit of visitor anon, its events as funnelEvent wrote
// them.
func (w *funnelWalk) visit(anon, events string) {
	evs, err := parseFunnelEvents(events, w.m.props, w.evs[:0])
	w.evs = evs
	if err != nil {
		w.err = err
		return
	}
	w.walk(anon, evs)
}

// walk walks one visit of visitor anon, its events in any order; anon's
// furthest step becomes the visit's when it is further.
func (w *funnelWalk) walk(anon string, evs []funnelEventRow) {
	slices.SortFunc(evs, func(a, b funnelEventRow) int {
		if c := cmp.Compare(a.ts, b.ts); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	step, n := 0, len(w.m.steps)
	for i := range evs {
		if step < n && w.m.bits(&evs[i])&(1<<step) != 0 {
			step++
		}
	}
	if step > w.best[anon] {
		w.best[anon] = step
	}
}

// parseFunnelEvents reads funnelEvent's strings, appended to dst.
func parseFunnelEvents(s string, props bool, dst []funnelEventRow) ([]funnelEventRow, error) {
	bad := errors.New("funnel: a visit's events could not be read")
	num := func() (int64, bool) {
		i := strings.IndexByte(s, ',')
		if i < 0 {
			return 0, false
		}
		n, err := strconv.ParseInt(s[:i], 10, 64)
		s = s[i+1:]
		return n, err == nil
	}
	text := func() (string, bool, bool) {
		if strings.HasPrefix(s, "-") {
			s = s[1:]
			return "", false, true
		}
		n, ok := num()
		if !ok || n < 0 || int(n) > len(s) {
			return "", false, false
		}
		t := s[:n]
		s = s[n:]
		return t, true, true
	}
	for s != "" {
		var e funnelEventRow
		var ok1, ok2, ok3, ok4 bool
		e.ts, ok1 = num()
		e.seq, ok2 = num()
		e.typ, _, ok3 = text()
		e.url, e.hasURL, ok4 = text()
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return dst, bad
		}
		if props {
			var ok bool
			if e.raw, _, ok = text(); !ok {
				return dst, bad
			}
		}
		dst = append(dst, e)
	}
	return dst, nil
}

// funnelMatcher gives an event the mask of the steps it matches, as
// GoalFilter's filters would.
type funnelMatcher struct {
	steps []Goal
	pats  []*regexp.Regexp // of page path steps with a *; nil otherwise
	props bool             // some step matches a property
	paths bool             // events carry their page's path, not its url (funnelPageEvent)
	types []string         // the event types the steps match
	mu    sync.Mutex
	pages map[string]int64 // url -> the page path steps its path matches
}

func newFunnelMatcher(steps []Goal) (*funnelMatcher, error) {
	m := &funnelMatcher{steps: steps, pats: make([]*regexp.Regexp, len(steps)), pages: map[string]int64{}}
	for i, g := range steps {
		if g.PropName != "" {
			m.props = true
		}
		typ := g.EventName
		if g.PagePath != "" {
			typ = "pageview"
		}
		if !slices.Contains(m.types, typ) {
			m.types = append(m.types, typ)
		}
		if g.PagePath != "" && strings.Contains(g.PagePath, "*") {
			re, err := compilePattern(PagePattern(g.PagePath))
			if err != nil {
				return nil, err
			}
			m.pats[i] = re
		}
	}
	return m, nil
}

// funnelPageMemo bounds a matcher's memo of urls.
const funnelPageMemo = 50000

// pageBits is the mask of the page path steps that url's path matches.
func (m *funnelMatcher) pageBits(url string) int64 {
	m.mu.Lock()
	bits, ok := m.pages[url]
	m.mu.Unlock()
	if ok {
		return bits
	}
	path := url
	if !m.paths {
		path = pagePaths.get(url)
	}
	for i, g := range m.steps {
		if g.PagePath == "" {
			continue
		}
		if re := m.pats[i]; re != nil && re.MatchString(path) || re == nil && path == g.PagePath {
			bits |= 1 << i
		}
	}
	m.mu.Lock()
	if len(m.pages) >= funnelPageMemo {
		clear(m.pages)
	}
	m.pages[url] = bits
	m.mu.Unlock()
	return bits
}

// bits is the mask of the steps event e matches.
func (m *funnelMatcher) bits(e *funnelEventRow) int64 {
	var page int64
	if e.hasURL && e.typ == "pageview" {
		page = m.pageBits(e.url)
	}
	var bits int64
	for i, g := range m.steps {
		if g.EventName != "" && g.EventName != e.typ || g.PagePath != "" && page&(1<<i) == 0 {
			continue
		}
		if g.PropName != "" {
			if v, ok := propText(e.raw, g.PropName).(string); !ok || v != g.PropValue {
				continue
			}
		}
		bits |= 1 << i
	}
	return bits
}

// Walks of the funnel reads running, by id (tally_funnel_visit's first
// argument).
var (
	funnelIDs   atomic.Int64
	funnelWalks sync.Map // int64 -> *funnelWalk
)

func init() {
	// tally_funnel_visit(id, anon, events) hands one visit of visitor anon,
	// its events as funnelEvent wrote them, to the walk id; NULL.
	sqlite.MustRegisterScalarFunction("tally_funnel_visit", 3, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		id, _ := args[0].(int64)
		w, ok := funnelWalks.Load(id)
		anon, ok2 := textArg(args[1])
		events, ok3 := textArg(args[2])
		if ok && ok2 && ok3 {
			w.(*funnelWalk).visit(anon, events)
		}
		return nil, nil
	})
}
