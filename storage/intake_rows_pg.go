package storage

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tally-analytics/tally/storage/internal/engine"
)

// Set-based intake on PostgreSQL (issue 33, docs/postgresql.md#intake).
// Each statement costs PostgreSQL a round trip, a parse-bind-execute and
// its executor start-up whatever it writes, which a statement per event
// (and per rollup key) made the bulk of its CPU per event. On PostgreSQL
// a run therefore collects its events as the works come (addRows) and
// writes them at once at its end (flushRows): one dedup statement for
// every id of the run, one insert of its events and their event_pages
// rows, one of its identity links, one of its DLQ rows, and one statement
// for all of its rollups (rollupsRows). SQLite keeps its prepared
// statement per row, which costs little in-process.
//
// The outcome is the per-row path's: an id repeated within the run is a
// duplicate at its second sight, as the per-row insert found the first;
// the events are inserted in run order, so seqs follow arrival as before;
// an engagement event (which updates a pageview stored earlier, perhaps
// in this run) waits for the events before it to be inserted, and the
// events after it are inserted after it; profiles, links, quota and
// rollups are counted in run order. A failing statement fails the run as
// a failing row did, and the writer then runs each work alone
// (TestMergedIngestIsolatesAFailingRequest).

// runRows is what a run on PostgreSQL has collected and not written yet.
type runRows struct {
	// pending are the run's events in order: engagements, and the events
	// whose id is the run's first of its site (the others are duplicates
	// at once).
	pending []pendingRow
	// seen are the (site, id) of the run's events, as stored.
	seen map[[2]string]bool
	// links are the run's new identity links, created at the receive time
	// (ms) of the first event naming them.
	links map[[3]string]int64
	// dlq are the run's DLQ rows; the last of one (site, id) wins, as it
	// did when each upsert overwrote the one before.
	dlq []pendingDLQ
}

// pendingRow is an event of work w (its index i) waiting for flushRows;
// site and key are its site and id as stored (StoredText).
type pendingRow struct {
	w         *ingestWork
	i         int
	site, key string
}

type pendingDLQ struct {
	w *ingestWork
	q *Quarantined
}

// setRows reports whether intake writes set-based (PostgreSQL).
func (db *DB) setRows() bool {
	_, ok := db.d.(pgDialect)
	return ok
}

// addRows is add on PostgreSQL: it checks the work's sites, sorts its
// repeated ids out and queues the rest for flushRows.
func (j *ingestRun) addRows(w *ingestWork) error {
	if err := j.checkSites(w); err != nil {
		return err
	}
	if j.rows == nil {
		j.rows = &runRows{seen: map[[2]string]bool{}, links: map[[3]string]int64{}}
	}
	r := j.rows
	for i := range w.events {
		e := &w.events[i]
		if e.Engagement != nil {
			r.pending = append(r.pending, pendingRow{w: w, i: i})
			continue
		}
		key := engine.PGString(e.ID)
		if w.imported {
			// An imported id is known for good, not 48 hours
			// (import_events.go). Row by row, in order: imports are rare,
			// and lockRun locks their ids.
			res, err := j.stmt(j.db.ingest.imported).Exec(e.SiteID, key)
			if err != nil {
				return fmt.Errorf("imported ids: %w", err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				w.dup[i] = true
				continue
			}
		}
		k := [2]string{engine.PGString(e.SiteID), key}
		if r.seen[k] {
			w.dup[i] = true
			continue
		}
		r.seen[k] = true
		r.pending = append(r.pending, pendingRow{w: w, i: i, site: k[0], key: key})
	}
	for i := range w.dlq {
		r.dlq = append(r.dlq, pendingDLQ{w, &w.dlq[i]})
	}
	return nil
}

// dedupRowsSQL inserts the run's ids, in the order given, and returns
// those that were new.
const dedupRowsSQL = `INSERT INTO event_ids(site_id, id, received_ms)
	SELECT * FROM unnest(?::text[], ?::text[], ?::bigint[])
	ON CONFLICT DO NOTHING RETURNING site_id, id`

// eventRowsInsert inserts the events of eventRows' arrays (those that
// follow the statement's earlier ones), in the arrays' order: unnest keeps
// it, and ORDER BY ord holds it through a filter, so seqs follow it. The
// columns are insertEventSQL's and pgEventColumns'; %s is the filter.
const eventRowsInsert = `INSERT INTO events(id_text, site_id, type, url, ts, anon_id, user_id, referrer, country, city,
		agent, browser_text, os_text, device_type_text, raw, received_at, credential, path, props, received_ms)
	SELECT id_text, site_id, type, url, ts, anon_id, user_id, referrer, country, city,
		agent, browser_text, os_text, device_type_text, raw, received_at, credential::bigint, path, props::json, received_ms
	FROM unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[],
		?::bigint[], ?::text[], ?::text[], ?::text[], ?::bytea[], ?::text[], ?::text[], ?::text[], ?::text[], ?::bigint[])
		WITH ORDINALITY AS u(id_text, site_id, type, url, ts, anon_id, user_id, referrer, country, city,
			agent, browser_text, os_text, device_type_text, raw, received_at, credential, path, props, received_ms, ord)
	%s ORDER BY ord
	RETURNING seq, type, path, site_id, id_text`

// eventPagesOfE writes the event_pages rows of the events e inserted.
const eventPagesOfE = `p AS (
	INSERT INTO event_pages(seq, name, path) SELECT seq, CASE WHEN type = 'pageview' THEN NULL ELSE type END, path FROM e
)`

// insertRowsSQL inserts events and their event_pages rows, and returns
// the lowest seq.
var insertRowsSQL = `WITH e AS (` + fmt.Sprintf(eventRowsInsert, "") + `), ` + eventPagesOfE + ` SELECT min(seq) FROM e`

// storeRowsSQL is dedupRowsSQL, then insertRowsSQL of the events whose
// ids were new, in one statement: the arguments are dedupRowsSQL's, then
// eventRows'. It returns the (site, id) and seq of each event inserted.
// The ids' collation is the columns' ("C"), unnest's text the default.
var storeRowsSQL = `WITH d AS (` + dedupRowsSQL + `), e AS (` +
	fmt.Sprintf(eventRowsInsert, `WHERE (u.site_id COLLATE "C", u.id_text COLLATE "C") IN (SELECT site_id, id FROM d)`) + `), ` +
	eventPagesOfE + ` SELECT site_id, id_text, seq FROM e`

// flushRows writes what addRows queued: first whether each id is new, in
// one statement; then the new events in order, an engagement between
// them applied where it came; then the links and DLQ rows.
//
// Locks: the dedup statement inserts the run's ids sorted by (site, id),
// so two instances' runs that share ids wait on each other's in one
// order and cannot deadlock on them, and a run's only wait on another's
// uncommitted id is there, before it writes anything else that another
// run may need (lockRun takes every other contended key first). That is
// why an alone run takes no advisory lock per event id (lockRun); a
// transaction of several units, which makes one dedup statement per unit,
// still does, in LockAll.
func (j *ingestRun) flushRows() error {
	r := j.rows
	if r == nil {
		return nil
	}
	j.rows = nil
	if !slices.ContainsFunc(r.pending, func(p pendingRow) bool { return p.w.events[p.i].Engagement != nil }) {
		return j.storeRows(r)
	}
	stored, err := j.dedupRows(r.pending)
	if err != nil {
		return err
	}
	var seg eventRows
	for _, p := range r.pending {
		w := p.w
		e := &w.events[p.i]
		if e.Engagement != nil {
			if err := j.insertRows(&seg); err != nil {
				return err
			}
			if err := j.engage(e); err != nil {
				return err
			}
			w.accepted++
			continue
		}
		if !stored[[2]string{p.site, p.key}] {
			w.dup[p.i] = true
			continue
		}
		ts := FormatTime(e.TS)
		cred, err := j.credentialCode(e.Credential)
		if err != nil {
			return err
		}
		seg.add(j.db.d, p, e, ts, cred)
		if err := j.countRow(r, w, p.i, ts); err != nil {
			return err
		}
	}
	if err := j.insertRows(&seg); err != nil {
		return err
	}
	if err := j.linkRows(r.links); err != nil {
		return err
	}
	return j.dlqRows(r.dlq)
}

// storeRows is flushRows for a run without engagements: the dedup and
// the insert of the new events in one statement, the time of a round trip
// and a statement less per run, which single events feel.
func (j *ingestRun) storeRows(r *runRows) error {
	if len(r.pending) > 0 {
		var seg eventRows
		ts := make([]string, len(r.pending))
		for n, p := range r.pending {
			e := &p.w.events[p.i]
			ts[n] = FormatTime(e.TS)
			cred, err := j.credentialCode(e.Credential)
			if err != nil {
				return err
			}
			seg.add(j.db.d, p, e, ts[n], cred)
		}
		args := append(dedupArgs(r.pending), seg.args()...)
		rows, err := j.tx.Query(storeRowsSQL, args...)
		if err != nil {
			return fmt.Errorf("insert events: %w", err)
		}
		stored := make(map[[2]string]bool, len(r.pending))
		first := int64(0)
		for rows.Next() {
			var k [2]string
			var seq int64
			if err := rows.Scan(&k[0], &k[1], &seq); err != nil {
				rows.Close()
				return fmt.Errorf("insert events: %w", err)
			}
			stored[k] = true
			if first == 0 || seq < first {
				first = seq
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("insert events: %w", err)
		}
		if j.firstSeq == 0 {
			j.firstSeq = first
		}
		for n, p := range r.pending {
			if !stored[[2]string{p.site, p.key}] {
				p.w.dup[p.i] = true
				continue
			}
			if err := j.countRow(r, p.w, p.i, ts[n]); err != nil {
				return err
			}
		}
	}
	if err := j.linkRows(r.links); err != nil {
		return err
	}
	return j.dlqRows(r.dlq)
}

// dedupArgs are dedupRowsSQL's arguments for the events of pending, in
// the order of their (site, id) (see flushRows).
func dedupArgs(pending []pendingRow) []any {
	keys := make([]pendingRow, 0, len(pending))
	for _, p := range pending {
		if p.w.events[p.i].Engagement == nil {
			keys = append(keys, p)
		}
	}
	slices.SortFunc(keys, func(a, b pendingRow) int {
		if c := strings.Compare(a.site, b.site); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	sites, ids, recv := make([]string, len(keys)), make([]string, len(keys)), make([]int64, len(keys))
	for n, p := range keys {
		sites[n], ids[n], recv[n] = p.site, p.key, p.w.received.UnixMilli()
	}
	return []any{sites, ids, recv}
}

// dedupRows inserts the ids of pending into event_ids, sorted (see
// flushRows), and returns those that were new.
func (j *ingestRun) dedupRows(pending []pendingRow) (map[[2]string]bool, error) {
	args := dedupArgs(pending)
	if len(args[0].([]string)) == 0 {
		return nil, nil
	}
	rows, err := j.tx.Query(dedupRowsSQL, args...)
	if err != nil {
		return nil, fmt.Errorf("dedup: %w", err)
	}
	defer rows.Close()
	stored := map[[2]string]bool{}
	for rows.Next() {
		var k [2]string
		if err := rows.Scan(&k[0], &k[1]); err != nil {
			return nil, fmt.Errorf("dedup: %w", err)
		}
		stored[k] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("dedup: %w", err)
	}
	return stored, nil
}

// eventRows are the columns of events to insert, one array each, in
// insertRowsSQL's order.
type eventRows struct {
	n                                            int
	id, site, typ, ts, anon, received            []string
	url, user, referrer, country, city           []*string
	browser, os, device, credential, path, props []*string
	agent                                        []*int64
	raw                                          [][]byte
	receivedMS                                   []int64
}

// add appends event p (e, its time as stored ts, its credential's code
// cred) as the per-row insert's arguments would give it (insertEventSQL,
// eventArgs).
func (s *eventRows) add(d dialect, p pendingRow, e *IngestEvent, ts string, cred any) {
	w := p.w
	s.n++
	s.id = append(s.id, p.key)
	s.site = append(s.site, p.site)
	s.typ = append(s.typ, e.Type)
	s.ts = append(s.ts, ts)
	s.anon = append(s.anon, e.AnonID)
	s.received = append(s.received, w.receivedAt[p.i])
	s.url = append(s.url, pgText(e.URL))
	s.user = append(s.user, pgText(e.UserID))
	s.referrer = append(s.referrer, pgText(e.Referrer))
	s.country = append(s.country, pgNullable(e.Country))
	s.city = append(s.city, pgNullable(e.City))
	agent, browser, osName, device := eventAgent(e)
	var code *int64
	if c, ok := agent.(int64); ok {
		code = &c
	}
	s.agent = append(s.agent, code)
	s.browser = append(s.browser, pgAny(browser))
	s.os = append(s.os, pgAny(osName))
	s.device = append(s.device, pgAny(device))
	switch raw := w.stored[p.i].(type) {
	case []byte:
		s.raw = append(s.raw, raw)
	case string:
		s.raw = append(s.raw, []byte(raw))
	default:
		s.raw = append(s.raw, nil)
	}
	s.credential = append(s.credential, pgAny(cred))
	args := d.eventArgs(nil, e, w.received)
	s.path = append(s.path, pgAny(args[0]))
	s.props = append(s.props, pgAny(args[1]))
	s.receivedMS = append(s.receivedMS, args[2].(int64))
}

// args are s's arrays as eventRowsInsert takes them.
func (s *eventRows) args() []any {
	return []any{s.id, s.site, s.typ, s.url, s.ts, s.anon, s.user, s.referrer, s.country, s.city,
		s.agent, s.browser, s.os, s.device, s.raw, s.received, s.credential, s.path, s.props, s.receivedMS}
}

// insertRows inserts the events of s, if any, and empties it.
func (j *ingestRun) insertRows(s *eventRows) error {
	if s.n == 0 {
		return nil
	}
	var first int64
	err := j.tx.QueryRow(insertRowsSQL, s.args()...).Scan(&first)
	if err != nil {
		return fmt.Errorf("insert events: %w", err)
	}
	if j.firstSeq == 0 {
		j.firstSeq = first
	}
	*s = eventRows{}
	return nil
}

// countRow counts stored event i of w as add does after its insert: its
// identity link (queued in r), its user's profile, the quota, the
// rollups, partials and its visitor's events for the sessions.
func (j *ingestRun) countRow(r *runRows, w *ingestWork, i int, ts string) error {
	e := &w.events[i]
	if e.UserID != nil {
		k := [3]string{e.SiteID, e.AnonID, *e.UserID}
		if !j.linked[k] {
			j.linked[k] = true
			m := [3]string{engine.PGString(k[0]), engine.PGString(k[1]), engine.PGString(k[2])}
			if _, ok := r.links[m]; !ok {
				r.links[m] = w.received.UnixMilli()
			}
		}
		if e.Type == "identify" {
			dropped, err := j.identify(e, FormatTime(w.received))
			if err != nil {
				return fmt.Errorf("user profile: %w", err)
			}
			w.traitsDropped[i] = dropped
		}
	}
	j.countStored(w, e, ts, w.received.Format(monthLayout))
	return nil
}

// linkRows inserts the run's new identity links, sorted by key, in one
// statement (their visitors are locked by lockRun).
func (j *ingestRun) linkRows(links map[[3]string]int64) error {
	if len(links) == 0 {
		return nil
	}
	keys := sortedKeys(links, func(a, b [3]string) int { return slices.Compare(a[:], b[:]) })
	sites, anons, users, created := make([]string, len(keys)), make([]string, len(keys)), make([]string, len(keys)), make([]int64, len(keys))
	for n, k := range keys {
		sites[n], anons[n], users[n], created[n] = k[0], k[1], k[2], links[k]
	}
	if _, err := j.tx.Exec(`INSERT INTO identity_links(site_id, anon_id, user_id, created_at)
		SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::bigint[]) ON CONFLICT DO NOTHING`, sites, anons, users, created); err != nil {
		return fmt.Errorf("identity link: %w", err)
	}
	return nil
}

// dlqRowsSQL upserts DLQ rows as the per-row statement does (ingestStmts.dlq).
const dlqRowsSQL = `INSERT INTO dlq(id, site_id, payload, error, received_at, anon_id, user_id, endpoint, user_agent,
	cookieless, browser, os, device_type)
	SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[],
		?::integer[], ?::text[], ?::text[], ?::text[])
	ON CONFLICT(site_id, id) DO UPDATE SET payload = excluded.payload, error = excluded.error,
	received_at = excluded.received_at, anon_id = excluded.anon_id, user_id = excluded.user_id,
	endpoint = excluded.endpoint, user_agent = excluded.user_agent, cookieless = excluded.cookieless,
	browser = excluded.browser, os = excluded.os, device_type = excluded.device_type`

// dlqRows upserts the run's DLQ rows in one statement, sorted by key, the
// last of each (site, id) only: one statement cannot update a row twice.
func (j *ingestRun) dlqRows(rows []pendingDLQ) error {
	if len(rows) == 0 {
		return nil
	}
	last := make(map[[2]string]int, len(rows))
	for n, r := range rows {
		last[[2]string{engine.PGString(r.q.SiteID), engine.PGString(r.q.ID)}] = n
	}
	keys := sortedKeys(last, comparePairs)
	var ids, sites, payloads, errs, recv []string
	var anons, users, endpoints, agents, browsers, oses, devices []*string
	var cookieless []int32
	for _, k := range keys {
		r := rows[last[k]]
		q := r.q
		ids, sites = append(ids, k[1]), append(sites, k[0])
		payloads, errs = append(payloads, string(q.Payload)), append(errs, q.Errors)
		recv = append(recv, FormatTime(r.w.received))
		anon := q.AnonID
		anons = append(anons, pgText(&anon))
		users = append(users, pgText(q.UserID))
		endpoint := q.Endpoint
		endpoints = append(endpoints, pgText(&endpoint))
		// A DLQ row's user_agent is re-sent only as the header of an
		// /events replay, which can never carry NUL, so an s2s row
		// (replayed with its payload, verbatim) loses nothing.
		agents = append(agents, pgNullable(q.UserAgent))
		c := int32(0)
		if q.Cookieless {
			c = 1
		}
		cookieless = append(cookieless, c)
		browsers = append(browsers, pgNullable(q.Agent.Browser))
		oses = append(oses, pgNullable(q.Agent.OS))
		devices = append(devices, pgNullable(q.Agent.DeviceType))
	}
	if _, err := j.tx.Exec(dlqRowsSQL, ids, sites, payloads, errs, recv, anons, users, endpoints, agents,
		cookieless, browsers, oses, devices); err != nil {
		return fmt.Errorf("insert dlq: %w", err)
	}
	return nil
}

// pgText is s as PostgreSQL's text holds it (engine.PGText, which the
// driver applies to a string or *string argument but not to the elements
// of a []*string).
func pgText(s *string) *string {
	if s == nil {
		return nil
	}
	if t := engine.PGString(*s); t != *s {
		return &t
	}
	return s
}

// pgNullable is nullable(s) as an element of a []*string.
func pgNullable(s string) *string {
	if s == "" {
		return nil
	}
	return pgText(&s)
}

// pgAny is v, nil or a string, as an element of a []*string.
func pgAny(v any) *string {
	switch t := v.(type) {
	case string:
		return pgText(&t)
	case *string:
		return pgText(t)
	}
	return nil
}

// rollupRowsSQL adds rows to this instance's slot (the statement's
// first argument, ?1) of table's _slots table: the next arguments are one
// array per key column, then one per sum, in the rows' order. %s is where
// rollupsRows puts the condition that orders it after the table before
// (rollupsRows); it returns a row per row written, for the next.
func rollupRowsSQL(table string, keys, sums []string) string {
	cols := strings.Join(keys, ", ")
	set := make([]string, len(sums))
	for i, c := range sums {
		set[i] = c + " = " + table + "_slots." + c + " + excluded." + c
	}
	arrays := strings.Repeat("?::text[], ", len(keys)) + strings.TrimSuffix(strings.Repeat("?::bigint[], ", len(sums)), ", ")
	return `INSERT INTO ` + table + `_slots(` + cols + `, slot, ` + strings.Join(sums, ", ") + `)
		SELECT ` + cols + `, ?1::smallint, ` + strings.Join(sums, ", ") + ` FROM unnest(` + arrays + `) AS u(` + cols + `, ` + strings.Join(sums, ", ") + `)%s
		ON CONFLICT(` + cols + `, slot) DO UPDATE SET ` + strings.Join(set, ", ") + `
		RETURNING 1`
}

// rollupTableRows is a rollup table as rollupsRows writes it.
type rollupTableRows struct {
	nkeys, nsums int
	sql          string
}

// The rollup tables, in the order rollupsRows writes them.
var (
	dailyEventsRows   = rollupTableRows{3, 1, rollupRowsSQL("daily_events", []string{"site_id", "day", "type"}, []string{"count"})}
	dailyDimsRows     = rollupTableRows{4, 1, rollupRowsSQL("daily_dimensions", []string{"site_id", "day", "dimension", "value"}, []string{"count"})}
	dailySessionsRows = rollupTableRows{2, 4, rollupRowsSQL("daily_sessions", []string{"site_id", "day"}, []string{"sessions", "duration_ms", "events", "bounces"})}
	siteUsageRows     = rollupTableRows{2, 1, rollupRowsSQL("site_usage", []string{"site_id", "month"}, []string{"accepted"})}
)

// rollupRow is one key of a rollup and its sums.
type rollupRow struct {
	keys []string
	sums []int64
}

// rollupArgs are the arrays of rows (their keys as Go holds them) for
// t's statement: keys as stored (two keys of Go may be one there: their
// sums are added), sorted (intake_lock_order.go), those whose sums are
// all 0 left out; nil when no row is left.
func rollupArgs(t rollupTableRows, rows []rollupRow) []any {
	for _, r := range rows {
		for i, k := range r.keys {
			r.keys[i] = engine.PGString(k)
		}
	}
	slices.SortFunc(rows, func(a, b rollupRow) int { return slices.Compare(a.keys, b.keys) })
	keys, sums := make([][]string, t.nkeys), make([][]int64, t.nsums)
	for n := 0; n < len(rows); {
		r := rows[n]
		total := slices.Clone(r.sums)
		for n++; n < len(rows) && slices.Equal(rows[n].keys, r.keys); n++ {
			for i, s := range rows[n].sums {
				total[i] += s
			}
		}
		if !slices.ContainsFunc(total, func(s int64) bool { return s != 0 }) {
			continue
		}
		for i, k := range r.keys {
			keys[i] = append(keys[i], k)
		}
		for i, s := range total {
			sums[i] = append(sums[i], s)
		}
	}
	if len(keys[0]) == 0 {
		return nil
	}
	var args []any
	for _, k := range keys {
		args = append(args, k)
	}
	for _, s := range sums {
		args = append(args, s)
	}
	return args
}

// rollupsRows is rollups on PostgreSQL: every rollup table's rows in one
// statement, a data-modifying WITH per table (the same text on every
// instance, so the tables are written in one order everywhere), then the
// day partials.
func (j *ingestRun) rollupsRows() error {
	days := make([]rollupRow, 0, len(j.days))
	for k, n := range j.days {
		days = append(days, rollupRow{[]string{k.site, k.day, k.typ}, []int64{int64(n)}})
	}
	dims := make([]rollupRow, 0, len(j.dims))
	for k, n := range j.dims {
		dims = append(dims, rollupRow{[]string{k.site, k.day, k.dim, k.value}, []int64{int64(n)}})
	}
	sess := make([]rollupRow, 0, len(j.sessDays))
	for k, d := range j.sessDays {
		sess = append(sess, rollupRow{[]string{k[0], k[1]}, []int64{d.sessions, d.durationMS, d.events, d.bounces}})
	}
	usage := make([]rollupRow, 0, len(j.usage))
	for k, n := range j.usage {
		usage = append(usage, rollupRow{[]string{k[0], k[1]}, []int64{int64(n)}})
	}
	// PostgreSQL runs a statement's data-modifying WITHs in an order of
	// its own (it ran the last first), so each table's WITH waits for the
	// one before by reading all its rows first: the tables are then
	// written in the order an erasure's unroll locks them (daily_events,
	// daily_dimensions, daily_sessions), and the two cannot deadlock
	// (TestRollupsLockTablesInOrder; without it, an erasure beside another
	// instance's intake lost a deadlock in 3 runs of 4).
	var with []string
	args := []any{j.db.pg.slot}
	for _, t := range []struct {
		table rollupTableRows
		rows  []rollupRow
	}{{dailyEventsRows, days}, {dailyDimsRows, dims}, {dailySessionsRows, sess}, {siteUsageRows, usage}} {
		if a := rollupArgs(t.table, t.rows); a != nil {
			after := ""
			if n := len(with); n > 0 {
				after = fmt.Sprintf("\n\t\tWHERE (SELECT count(*) FROM r%d) >= 0", n-1)
			}
			with = append(with, fmt.Sprintf("r%d AS (%s)", len(with), fmt.Sprintf(t.table.sql, after)))
			args = append(args, a...)
		}
	}
	if len(with) > 0 {
		if _, err := j.tx.Exec(`WITH `+strings.Join(with, ", ")+` SELECT 1`, args...); err != nil {
			return fmt.Errorf("rollups: %w", err)
		}
	}
	// The day partials as rollups drops them (one statement per site and
	// hour: a run's events mostly share one).
	dp := j.stmt(j.db.ingest.dropPartials)
	if err := dropDays(j.tx, func(args ...any) error { _, err := dp.Exec(args...); return err }, j.hours); err != nil {
		return fmt.Errorf("day partials: %w", err)
	}
	return nil
}
