package storage

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tally-analytics/tally/storage/internal/engine"
)

// On PostgreSQL a run's sessions are read and written a statement for all
// its visitors rather than a few statements per visitor
// (docs/postgresql.md#intake): one read of every visitor's newest session
// and of the sessions near its events, then at most one DELETE, two
// UPDATEs and one INSERT ... RETURNING, each over arrays that unnest gives
// as rows. There the memo of newest sessions is off (another instance may
// change a session between two runs), so each visitor of a run is read;
// the visitor's advisory lock, taken before the run writes (lockRun), makes
// the rows read current until the commit. The sessions come out as the
// per-visitor path makes them: the same rows are read, in the same order,
// and merged by the same code (assign).

// sessionSetStmts are the set-based statements of sessionSets.
type sessionSetStmts struct {
	load, insert, update, updateStart, delete *sql.Stmt
}

// prepareSessionSet prepares the set-based session statements on db, the
// write connection: on PostgreSQL only, whose unnest and LATERAL SQLite
// lacks.
func (s *ingestStmts) prepareSessionSet(ctx context.Context, db *sql.DB) error {
	var set sessionSetStmts
	for _, st := range []struct {
		dst **sql.Stmt
		sql string
	}{
		{&set.load, loadSessionSetsSQL},
		{&set.insert, insertSessionSetsSQL},
		{&set.update, updateSessionSetsSQL(false)},
		{&set.updateStart, updateSessionSetsSQL(true)},
		{&set.delete, `DELETE FROM sessions WHERE id = ANY(?::bigint[])`},
	} {
		p, err := db.PrepareContext(ctx, st.sql)
		if err != nil {
			return fmt.Errorf("prepare session sets: %w", err)
		}
		*st.dst = p
	}
	s.set = &set
	return nil
}

// sessionSetColumns are sessionReadColumns with the flag of the old row
// form named, and sessionSetOut the same columns as the read's subqueries
// name them.
const (
	sessionSetColumns = `id, started_ms, ended_ms, start_ms IS NULL AS text_times, event_count, user_id, ` + visitColumns
	sessionSetOut     = `id, started_ms, ended_ms, text_times, event_count, user_id, ` + visitColumns
)

// loadSessionSetsSQL reads what loadSessions reads, for every visitor of a
// run at once. Arguments: the visitors' sites and anon ids (visitor g is
// the g-th, from 1), then the clusters of their events (see
// loadSessions): each cluster's visitor, and its floor and ceiling in ms
// (first event less sessionGap, last event plus sessionGap). Each row is
// a visitor's newest session (k 0) or a session near cluster k (from 1),
// those of a cluster newest first, as loadSessions lists them; a row can
// come twice (the newest, near a cluster too).
//
// A cluster is read only when the visitor's newest session starts after
// its first event (floor + sessionGap): else no event of it precedes the
// newest, and older sessions end more than sessionGap before the newest
// starts, so before floor (the rule the SQLite memo relies on). It reads
// the sessions starting between floor and ceiling and, of those starting
// before floor, only the latest, kept if it ends at floor or later: that
// LIMIT 1 bounds the rows read as readSessions' early stop does, since
// every older one ends more than sessionGap before it starts.
//
// Each read of sessions names the visitor by a range of anon_id of one
// value, and orders by anon_id too, so that only the index on (site_id,
// anon_id, started_ms) gives its rows in order without a sort (with
// anon_id = the planner drops anon_id from the order, which the equality
// fixes), and the statement runs with sorts off (plansByIndex). Otherwise
// the planner may take the index on (site_id, started_ms), filtering on
// anon_id, which reads all of the site's sessions for a visitor without
// any: it did on a young table never analyzed, and kept that plan; the
// read then cost 15 ms a run of single events in BenchmarkInstances
// instead of 0.1 ms.
var loadSessionSetsSQL = `WITH v AS (SELECT * FROM unnest(?::text[], ?::text[]) WITH ORDINALITY AS v(site, anon, g)),
	n AS (SELECT v.g, v.site, v.anon, s.* FROM v CROSS JOIN LATERAL (SELECT ` + sessionSetColumns + ` FROM sessions
		WHERE site_id = v.site AND ` + visitorRange("v.anon") + ` ORDER BY anon_id DESC, started_ms DESC LIMIT 1) s),
	c AS (SELECT * FROM unnest(?::bigint[], ?::bigint[], ?::bigint[]) WITH ORDINALITY AS c(g, floor_ms, ceil_ms, k))
	SELECT g, 0::bigint AS k, ` + sessionSetOut + ` FROM n
	UNION ALL
	SELECT c.g, c.k, r.* FROM c JOIN n ON n.g = c.g AND n.started_ms > c.floor_ms + ` + strconv.FormatInt(sessionGap.Milliseconds(), 10) + `
	CROSS JOIN LATERAL (
		(SELECT ` + sessionSetColumns + ` FROM sessions
			WHERE site_id = n.site AND ` + visitorRange("n.anon") + ` AND started_ms >= c.floor_ms AND started_ms <= c.ceil_ms
			ORDER BY anon_id DESC, started_ms DESC)
		UNION ALL
		(SELECT * FROM (SELECT ` + sessionSetColumns + ` FROM sessions
			WHERE site_id = n.site AND ` + visitorRange("n.anon") + ` AND started_ms < c.floor_ms ORDER BY anon_id DESC, started_ms DESC LIMIT 1) p
			WHERE p.ended_ms >= c.floor_ms)) r
	ORDER BY g, k, started_ms DESC`

// visitorRange is the condition that anon_id is anon, as a range (see
// loadSessionSetsSQL); anon_id's collation "C" makes it equality.
func visitorRange(anon string) string {
	return `anon_id >= ` + anon + ` AND anon_id <= ` + anon
}

// visitStoredNames are visitStoredColumns one by one, and
// visitStoredInts marks those of integer type: the arrays that carry a
// column's values in an unnest are typed as it.
var (
	visitStoredNames = strings.Split(strings.Join(strings.Fields(visitStoredColumns), ""), ",")
	visitStoredInts  = map[string]bool{"pageviews": true, "agent": true, "entry_ms": true, "exit_ms": true, "referrer_ms": true, "visit_ready": true}
)

// unnestSQL is `unnest(?::type[], ...) AS v(names...)` for the columns
// lead (each "name type") and then visitStoredColumns.
func unnestSQL(lead ...string) string {
	var args, names []string
	for _, l := range lead {
		name, typ, _ := strings.Cut(l, " ")
		args, names = append(args, "?::"+typ+"[]"), append(names, name)
	}
	for _, name := range visitStoredNames {
		typ := "text"
		if visitStoredInts[name] {
			typ = "bigint"
		}
		args, names = append(args, "?::"+typ+"[]"), append(names, name)
	}
	return `unnest(` + strings.Join(args, ", ") + `) AS v(` + strings.Join(names, ", ") + `)`
}

// insertSessionSetsSQL inserts sessions from arrays, in their order, and
// returns what tells each new id's session (see insertSessionsSQL).
var insertSessionSetsSQL = `INSERT INTO sessions(site_id, anon_id, user_id, start_text, end_text, start_ms, duration_ms, event_count, ` + visitStoredColumns + `)
	SELECT site_id, anon_id, user_id, '', '', start_ms, duration_ms, event_count, ` + strings.Join(visitStoredNames, ", ") + `
	FROM ` + unnestSQL("site_id text", "anon_id text", "user_id text", "start_ms bigint", "duration_ms bigint", "event_count bigint") + `
	RETURNING id, site_id, anon_id, start_ms`

// updateSessionSetsSQL updates sessions by id from arrays: the end,
// count, user and visit of each (updateSessionEnd's columns), and with
// start its start too (updateSession's). Only an update with start sets
// start_ms, start_text or end_text, which the indexes of started_ms
// depend on: the usual one stays a heap-only update (see prepareIngest).
func updateSessionSetsSQL(start bool) string {
	lead := []string{"id bigint", "duration_ms bigint", "event_count bigint", "user_id text"}
	set := []string{"duration_ms = v.duration_ms", "event_count = v.event_count", "user_id = v.user_id"}
	if start {
		lead = append(lead, "start_ms bigint")
		set = append(set, "start_text = ''", "end_text = ''", "start_ms = v.start_ms")
	}
	for _, name := range visitStoredNames {
		set = append(set, name+" = v."+name)
	}
	return `UPDATE sessions s SET ` + strings.Join(set, ", ") + ` FROM ` + unnestSQL(lead...) + ` WHERE s.id = v.id`
}

// plansByIndex and plansAsUsual bracket a run's session statements in
// its transaction. While a table is young and never analyzed (autovacuum
// analyzes it a minute or so after its first 50 changes: on a new
// database, in BenchmarkInstances) the planner does not know how few rows
// a visitor or an id selects: it read a visitor's sessions by (site_id,
// started_ms), through all the site's sessions, and updated and deleted
// by a scan of the whole table; the writer keeps the plan made for a
// statement's sixth run (a generic plan), so such a plan stays as the
// table grows, until autovacuum analyzes it. With sorts off (see
// loadSessionSetsSQL) and sequential scans off, the plan by the right
// index is the only one left that needs neither; a disabled plan is still
// made where nothing else can do, so nothing fails
// (TestSessionSetsUseIndexes). A disabled plan's cost counts 10^10 more,
// and the read always sorts its rows at the end, so JIT is off too: past
// jit_above_cost PostgreSQL compiled the read at each run (4.6 s in one
// EXPLAIN ANALYZE).
// The generic plan is forced too (plan_cache_mode): with sorts off the
// generic plan of the read costs more than the custom ones, so
// PostgreSQL planned the read again at every run, 0.67 ms of a single
// event's 1.3 ms of statements (pg_stat_statements, serial single events;
// TestSessionSetsArePlannedOnce); forced, it is planned once per
// connection, by the indexes as above (TestSessionSetsUseIndexes checks
// the generic plan too).
// Each is one round trip (without arguments the driver sends the
// settings as one simple query), measured on the dev cluster at a load
// of 8 to 12 at about 22 us of PostgreSQL CPU and 33 us of Tally's. The
// settings must not outlast the session statements: a group commit's
// transaction may run other jobs after this run, whose plans they would
// change.
const (
	plansByIndex = `SET LOCAL enable_sort = off; SET LOCAL enable_seqscan = off; SET LOCAL jit = off; SET LOCAL plan_cache_mode = force_generic_plan`
	plansAsUsual = `SET LOCAL enable_sort TO DEFAULT; SET LOCAL enable_seqscan TO DEFAULT; SET LOCAL jit TO DEFAULT; SET LOCAL plan_cache_mode TO DEFAULT`
)

// sessionSets assigns the events of every visitor of the run to sessions,
// as sessions does one visitor's: one read for all, the merge of each,
// then the writes of all, between plansByIndex and plansAsUsual.
func (j *ingestRun) sessionSets() error {
	if len(j.order) == 0 {
		return nil
	}
	if _, err := j.tx.Exec(plansByIndex); err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	err := j.writeSessionSets()
	if _, reset := j.tx.Exec(plansAsUsual); err == nil && reset != nil {
		err = fmt.Errorf("sessions: %w", reset)
	}
	return err
}

// writeSessionSets is sessionSets' work.
func (j *ingestRun) writeSessionSets() error {
	lists, err := j.loadSessionSets()
	if err != nil {
		return err
	}
	var deletes []int64
	var updates, updatesStart, inserts sessionArrays
	var added []newSession
	for i, g := range j.order {
		site, anon := g[0], g[1]
		list, err := j.assign(site, anon, j.groups[g], lists[i])
		if err != nil {
			return err
		}
		for _, s := range list {
			if s.orig != nil && (s.deleted || s.dirty) {
				j.sessionDelta(site, s.orig, -1)
			}
			switch {
			case s.deleted && s.orig != nil:
				deletes = append(deletes, s.id)
			case s.deleted:
			case s.dirty && s.orig != nil && s.visit.landing == nil:
				// Only a memo's session lacks its landing, and the memo is
				// off here; were it on, its update is updateSessionTail.
				args := append([]any{s.end.Sub(s.start).Milliseconds(), s.count, s.userID}, s.visit.args(s.start, s.end)...)
				if _, err := j.stmt(j.db.ingest.updateSessionTail).Exec(append(args, s.id)...); err != nil {
					return fmt.Errorf("update session: %w", err)
				}
				j.sessionDelta(site, s, 1)
			case s.dirty && s.orig != nil:
				to := &updates
				lead := []any{s.id, s.end.Sub(s.start).Milliseconds(), s.count, s.userID}
				if s.textTimes || !s.start.Equal(s.orig.start) {
					to = &updatesStart
					lead = append(lead, s.start.UnixMilli())
				}
				to.add(lead, s.visit.args(s.start, s.end))
				s.textTimes = false
				j.sessionDelta(site, s, 1)
			case s.dirty:
				inserts.add([]any{site, anon, s.userID, s.start.UnixMilli(), s.end.Sub(s.start).Milliseconds(), s.count},
					s.visit.args(s.start, s.end))
				added = append(added, newSession{site: site, anon: anon, s: s})
				j.sessionDelta(site, s, 1)
			}
		}
	}
	// A visitor's rows are this run's alone (its advisory lock), so the
	// order of the statements does not matter; ids come from a sequence,
	// never reused.
	if len(deletes) > 0 {
		if _, err := j.stmt(j.db.ingest.set.delete).Exec(deletes); err != nil {
			return fmt.Errorf("delete sessions: %w", err)
		}
	}
	for _, u := range []struct {
		stmt *sql.Stmt
		a    *sessionArrays
	}{{j.db.ingest.set.update, &updates}, {j.db.ingest.set.updateStart, &updatesStart}} {
		if u.a.n == 0 {
			continue
		}
		args, err := u.a.args()
		if err != nil {
			return fmt.Errorf("update sessions: %w", err)
		}
		if _, err := j.stmt(u.stmt).Exec(args...); err != nil {
			return fmt.Errorf("update sessions: %w", err)
		}
	}
	return j.insertSessionSets(&inserts, added)
}

// loadSessionSets reads, for each visitor of j.order, what loadSessions
// reads (loadSessionSetsSQL), in one statement: the lists it returns are
// in j.order's order, each as loadSessions gives it.
func (j *ingestRun) loadSessionSets() ([][]*session, error) {
	sites, anons := make([]string, len(j.order)), make([]string, len(j.order))
	clusterOf, floors, ceils := []int64{}, []int64{}, []int64{}
	var times []time.Time
	for i, g := range j.order {
		sites[i], anons[i] = g[0], g[1]
		times = times[:0]
		for _, e := range j.groups[g] {
			times = append(times, e.TS.Truncate(time.Millisecond))
		}
		slices.SortFunc(times, time.Time.Compare)
		for a := 0; a < len(times); {
			b := a + 1
			for b < len(times) && times[b].Sub(times[b-1]) <= 2*sessionGap {
				b++
			}
			clusterOf = append(clusterOf, int64(i+1))
			floors = append(floors, times[a].Add(-sessionGap).UnixMilli())
			ceils = append(ceils, times[b-1].Add(sessionGap).UnixMilli())
			a = b
		}
	}
	rows, err := j.stmt(j.db.ingest.set.load).Query(sites, anons, clusterOf, floors, ceils)
	if err != nil {
		return nil, fmt.Errorf("load sessions: %w", err)
	}
	defer rows.Close()
	lists := make([][]*session, len(j.order))
	seen := map[int64]bool{} // session ids are unique across visitors
	for rows.Next() {
		var g, k int64
		s, err := j.scanSession(rows, &g, &k)
		if err != nil {
			return nil, fmt.Errorf("load sessions: %w", err)
		}
		if g < 1 || g > int64(len(lists)) {
			return nil, fmt.Errorf("load sessions: visitor %d of %d", g, len(lists))
		}
		if seen[s.id] {
			continue
		}
		seen[s.id] = true
		orig := *s
		s.orig = &orig
		lists[g-1] = append(lists[g-1], s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load sessions: %w", err)
	}
	return lists, nil
}

// insertSessionSets inserts the new sessions of arrays a, added in their
// order, in one statement, and gives each its id.
func (j *ingestRun) insertSessionSets(a *sessionArrays, added []newSession) error {
	if a.n == 0 {
		return nil
	}
	args, err := a.args()
	if err != nil {
		return fmt.Errorf("insert sessions: %w", err)
	}
	byKey := make(map[sessionKey]*session, len(added))
	for _, n := range added {
		// RETURNING gives anon_id back as stored (StoredText).
		byKey[sessionKey{n.site, j.db.d.StoredText(n.anon), n.s.start.UnixMilli()}] = n.s
	}
	rows, err := j.stmt(j.db.ingest.set.insert).Query(args...)
	if err != nil {
		return fmt.Errorf("insert sessions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var k sessionKey
		if err := rows.Scan(&id, &k.site, &k.anon, &k.startMS); err != nil {
			return fmt.Errorf("insert sessions: %w", err)
		}
		if s := byKey[k]; s != nil {
			s.id = id
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("insert sessions: %w", err)
	}
	for _, n := range added {
		if n.s.id == 0 {
			return fmt.Errorf("insert sessions: no id returned")
		}
	}
	return nil
}

// sessionArrays gathers rows of values, column by column, as the arrays
// an unnest of unnestSQL takes: the lead columns, then visit.args'
// (visitStoredColumns). A column's type is that of its values (text or
// integer; nil is NULL), and of a visit column its stored type, so that a
// column of NULLs only is typed still.
type sessionArrays struct {
	n    int
	cols []sessionArray
	err  error
}

// sessionArray is one column's values: text or integers.
type sessionArray struct {
	text []*string
	ints []*int64
	int  bool
}

// add appends a row: lead's values, then visit's (visit.args with a
// landing).
func (a *sessionArrays) add(lead, visit []any) {
	if a.cols == nil {
		a.cols = make([]sessionArray, len(lead)+len(visitStoredNames))
		for i, v := range lead {
			switch v.(type) {
			case int64, int:
				a.cols[i].int = true
			}
		}
		for i, name := range visitStoredNames {
			a.cols[len(lead)+i].int = visitStoredInts[name]
		}
	}
	if len(lead)+len(visit) != len(a.cols) {
		a.err = fmt.Errorf("a row of %d values, want %d", len(lead)+len(visit), len(a.cols))
		return
	}
	for i, v := range lead {
		a.cols[i].add(v, &a.err)
	}
	for i, v := range visit {
		a.cols[len(lead)+i].add(v, &a.err)
	}
	a.n++
}

// add appends v, setting *err to a value of neither type.
func (c *sessionArray) add(v any, err *error) {
	if c.int {
		var p *int64
		switch x := v.(type) {
		case int64:
			p = &x
		case int:
			n := int64(x)
			p = &n
		case nil:
		default:
			*err = fmt.Errorf("%T in an integer column", v)
		}
		c.ints = append(c.ints, p)
		return
	}
	var p *string
	switch x := v.(type) {
	case string:
		p = &x
	case *string:
		p = x
	case nil:
	default:
		*err = fmt.Errorf("%T in a text column", v)
	}
	if p != nil {
		// The driver makes a string argument, and a list of strings,
		// text PostgreSQL takes (engine.PGText), not a list of
		// pointers: done here.
		s := engine.PGString(*p)
		p = &s
	}
	c.text = append(c.text, p)
}

// args are the arrays, in column order.
func (a *sessionArrays) args() ([]any, error) {
	if a.err != nil {
		return nil, a.err
	}
	out := make([]any, len(a.cols))
	for i, c := range a.cols {
		if c.int {
			out[i] = c.ints
		} else {
			out[i] = c.text
		}
	}
	return out, nil
}
