package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// undo0016 makes db a database of before migration 0016: sessions with
// their times, source and agent as text (the generated columns' text, so
// every row reads as before), indexes on started_at, no conversion, 0016
// not applied.
func undo0016(t *testing.T, db *DB) {
	t.Helper()
	qs := []string{`DROP INDEX sessions_site_anon_start`, `DROP INDEX sessions_site_start`, `DROP TABLE session_times_conversion`,
		`UPDATE sessions SET start_text = started_at, end_text = ended_at, source_text = source,
			browser_text = browser, os_text = os, device_text = device`}
	for _, col := range []string{"started_at", "ended_at", "started_ms", "ended_ms", "start_ms", "duration_ms", "source", "browser", "os", "device", "agent"} {
		qs = append(qs, `ALTER TABLE sessions DROP COLUMN `+col)
	}
	for old, col := range map[string]string{"start_text": "started_at", "end_text": "ended_at", "source_text": "source",
		"browser_text": "browser", "os_text": "os", "device_text": "device"} {
		qs = append(qs, `ALTER TABLE sessions RENAME COLUMN `+old+` TO `+col)
	}
	qs = append(qs,
		`CREATE INDEX sessions_site_anon_start ON sessions(site_id, anon_id, started_at)`,
		`CREATE INDEX sessions_site_start ON sessions(site_id, started_at)`,
		`DELETE FROM schema_migrations WHERE version = 16`)
	execInWriter(t, db, qs...)
}

// sessionReads is everything read from sessions, as text: every visit
// column by visitor, the query API's visit and event reports (by day,
// by entry page, with a visit filter, the event-to-visit join), the
// first visit, and a subject's GDPR export of sessions.
func sessionReads(t *testing.T, db *DB) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	fmt.Fprintln(&b, allVisitAttrs(t, db))
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []StatsQuery{
		{Metrics: []string{"visitors", "visits", "bounce_rate", "visit_duration", "pageviews"}, Dimensions: []string{"time:day"}},
		{Metrics: []string{"visits", "visit_duration"}, Dimensions: []string{"time:hour"}, Zone: berlin},
		{Metrics: []string{"visitors", "visits", "visit_duration"}, Dimensions: []string{"visit:entry_page"}},
		{Metrics: []string{"visitors", "pageviews", "events"}, Dimensions: []string{"event:page"},
			Filters: []QueryFilter{{Op: "is", Dim: "visit:country", Values: []string{"DE"}}}},
		{Metrics: []string{"visits", "bounce_rate", "visit_duration"}, Dimensions: []string{"time:day"},
			Filters: []QueryFilter{{Op: "contains", Dim: "event:page", Values: []string{"/p/1"}}}},
	} {
		q.Site, q.From, q.To, q.scan = "s", from, from.AddDate(0, 0, 2), true
		if q.Zone == nil {
			q.Zone = time.UTC
		}
		rows, err := db.Stats(ctx, q)
		if err != nil {
			t.Fatalf("%v: %v", q, err)
		}
		fmt.Fprintln(&b, q.Dimensions, rows)
	}
	first, ok, err := db.FirstVisit(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(&b, "first visit", FormatTime(first), ok)
	site, _ := db.Site("s")
	out, err := db.ExportSubject(ctx, Actor{Kind: ActorSystem}, site, Subject{AnonID: "visitor-3"})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(&b, "export", out.Sessions)
	return b.String()
}

// sessionForms counts the sessions rows stored in the old (text) and the
// new (integer) form.
func sessionForms(t *testing.T, db *DB) (text, ints int) {
	t.Helper()
	err := db.read.QueryRow(`SELECT COUNT(*) FILTER (WHERE start_ms IS NULL AND start_text != ''),
		COUNT(*) FILTER (WHERE start_ms IS NOT NULL AND start_text = '' AND end_text = '') FROM sessions`).Scan(&text, &ints)
	if err != nil {
		t.Fatal(err)
	}
	return text, ints
}

// TestMigration0016ConvertsSessionTimes turns a database back to before
// 0016, opens it (0016 runs) and converts it step by step, with a restart
// in the middle as after a crash: every read is the same before, during
// and after, and every row ends in the integer form.
func TestMigration0016ConvertsSessionTimes(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "converts an old SQLite layout")
	path := filepath.Join(t.TempDir(), "a.db")
	db, err := openTestDB(t, context.Background(), Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	withSites(t, db, "s")
	for _, e := range visitFixture() {
		ingestAll(t, db, e)
	}
	want := sessionReads(t, db)
	undo0016(t, db)
	var total int
	db.read.QueryRow(`SELECT COUNT(*) FROM sessions`).Scan(&total)
	db.Close()
	if total < 10 {
		t.Fatalf("got %d sessions in the fixture, want at least 10", total)
	}

	open := func() *DB {
		db, err := openTestDB(t, context.Background(), Options{Path: path, sessionTimesChunk: -1})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	db = open()
	if text, _ := sessionForms(t, db); text != total {
		t.Fatalf("after migration 0016: got %d rows in text form, want all %d", text, total)
	}
	if got := sessionReads(t, db); got != want {
		t.Fatalf("before the conversion: got reads\n%s\nwant\n%s", got, want)
	}
	// Ids are dense here: a chunk of 4 ids converts 4 rows.
	if n, done, err := db.convertSessionTimes(context.Background(), 4); err != nil || done || n != 4 {
		t.Fatalf("first step: got %d converted, done %v, err %v; want 4, false, nil", n, done, err)
	}
	if text, ints := sessionForms(t, db); text != total-4 || ints != 4 {
		t.Fatalf("after one step: got %d text and %d integer rows, want %d and 4", text, ints, total-4)
	}
	if got := sessionReads(t, db); got != want {
		t.Fatalf("during the conversion: got reads\n%s\nwant\n%s", got, want)
	}
	// A crash: the next start resumes after the last committed step.
	db.Close()
	db = open()
	defer func() { db.Close() }()
	var next int64
	if err := db.read.QueryRow(`SELECT next_id FROM session_times_conversion`).Scan(&next); err != nil || next != 4 {
		t.Fatalf("after a restart: got next_id %d (%v), want 4", next, err)
	}
	converted := int64(4)
	converted += runConversion(t, total, db.convertSessionTimes)
	if converted != int64(total) {
		t.Fatalf("got %d rows converted, want %d", converted, total)
	}
	if text, ints := sessionForms(t, db); text != 0 || ints != total {
		t.Fatalf("after the conversion: got %d text and %d integer rows, want 0 and %d", text, ints, total)
	}
	wantConversionGone(t, db, "session_times_conversion")
	if got := sessionReads(t, db); got != want {
		t.Fatalf("after the conversion: got reads\n%s\nwant\n%s", got, want)
	}
}

// TestSessionTimesConversionRunsAtStart: the background runner converts
// every row by itself and the log's rows are gone.
func TestSessionTimesConversionRunsAtStart(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "converts an old SQLite layout")
	path := filepath.Join(t.TempDir(), "a.db")
	db := openTest(t, path)
	withSites(t, db, "s")
	for _, e := range visitFixture() {
		ingestAll(t, db, e)
	}
	want := sessionReads(t, db)
	undo0016(t, db)
	db.Close()
	db, err := openTestDB(t, context.Background(), Options{Path: path, sessionTimesChunk: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	<-db.conv.done
	if text, _ := sessionForms(t, db); text != 0 {
		t.Fatalf("got %d rows still in text form, want 0", text)
	}
	if got := sessionReads(t, db); got != want {
		t.Fatalf("got reads\n%s\nwant\n%s", got, want)
	}
}

// TestIntakeRewritesTextSessions: an event that extends or moves a session
// the conversion has not reached writes the row in the integer form, with
// the same visit as a database that never had the text form.
func TestIntakeRewritesTextSessions(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "rewrites rows of an old SQLite layout")

	first := []IngestEvent{ev("a1", "v", "pageview", 0, "https://s.test/a", ""), ev("b1", "w", "pageview", 0, "https://s.test/b", "")}
	later := []IngestEvent{
		ev("a2", "v", "pageview", 10, "https://s.test/c", ""), // extends v's visit (its end only)
		ev("b0", "w", "pageview", -5, "https://s.test/d", ""), // moves w's start
	}

	var want string
	for _, old := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "a.db")
		db := openTest(t, path)
		withSites(t, db, "s")
		ingestAll(t, db, first...)
		if old {
			undo0016(t, db)
			db.Close()
			var err error
			if db, err = openTestDB(t, context.Background(), Options{Path: path, sessionTimesChunk: -1}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
		}
		for _, e := range later {
			ingestAll(t, db, e)
		}
		got := fmt.Sprint(visitAttrs(t, db, "s", "v"), visitAttrs(t, db, "s", "w"))
		if !old {
			want = got
			continue
		}
		if text, ints := sessionForms(t, db); text != 0 || ints != 2 {
			t.Fatalf("got %d text and %d integer rows, want 0 and 2", text, ints)
		}
		if got != want {
			t.Fatalf("got visits %s, want %s", got, want)
		}
	}
}

// TestSessionTimeText: the generated text of a session's times is
// FormatTime's, to the millisecond, before 1970 too.
func TestSessionTimeText(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	times := []time.Time{
		time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC),
		time.Date(2026, 3, 1, 23, 59, 59, 999e6, time.UTC),
		time.Date(2026, 3, 1, 0, 0, 0, 1e6, time.UTC),
		time.Date(2024, 2, 29, 12, 34, 56, 789e6, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999e6, time.UTC),
		time.Date(1960, 1, 1, 0, 0, 0, 1e6, time.UTC),
		time.Date(2100, 12, 31, 23, 59, 59, 999e6, time.UTC),
	}
	for ms := int64(0); ms < 1000; ms += 7 {
		times = append(times, time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC).Add(time.Duration(ms)*time.Millisecond))
	}
	for i, at := range times {
		execInWriter(t, db, fmt.Sprintf(`INSERT INTO sessions(site_id, anon_id, start_text, end_text, start_ms, duration_ms, event_count)
			VALUES ('s', 'v%d', '', '', %d, %d, 1)`, i, at.UnixMilli(), int64(i)*1001))
	}
	for i, at := range times {
		var start, end string
		var startMS, endMS int64
		if err := db.read.QueryRow(`SELECT started_at, ended_at, started_ms, ended_ms FROM sessions WHERE anon_id = ?`, fmt.Sprintf("v%d", i)).
			Scan(&start, &end, &startMS, &endMS); err != nil {
			t.Fatal(err)
		}
		to := at.Add(time.Duration(i) * 1001 * time.Millisecond)
		if start != FormatTime(at) || end != FormatTime(to) || startMS != at.UnixMilli() || endMS != to.UnixMilli() {
			t.Fatalf("got %s %s %d %d, want %s %s %d %d", start, end, startMS, endMS, FormatTime(at), FormatTime(to), at.UnixMilli(), to.UnixMilli())
		}
	}
}

// TestSessionQueriesUseIndexes: every read of sessions by time searches an
// index on started_ms, the integer, rather than scanning or sorting: the
// writer's reads of a visitor's sessions, the query API's visits of a
// range and its event-to-visit join, and the first visit.
func TestSessionQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "SQLite's query plans")
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	for _, c := range []struct {
		name, query string
		args        []any
		want        []string
	}{
		{"visitor has a session", hasSessionSQL, []any{"s", "v"}, []string{
			"SEARCH sessions USING COVERING INDEX sessions_site_anon_start (site_id=? AND anon_id=?)"}},
		{"newest session", newestSessionSQL, []any{"s", "v"}, []string{
			"SEARCH sessions USING INDEX sessions_site_anon_start (site_id=? AND anon_id=?)"}},
		{"sessions near events", loadSessionsSQL, []any{"s", "v", 1767225600000}, []string{
			"SEARCH sessions USING INDEX sessions_site_anon_start (site_id=? AND anon_id=? AND started_ms<?)"}},
		{"visits of a range", `SELECT COUNT(*), SUM(` + durationSQL + `) FROM sessions s WHERE ` + visitRangeSQL, []any{"s", 0, 1767225600000}, []string{
			"SEARCH s USING INDEX sessions_site_start (site_id=? AND started_ms>? AND started_ms<?)"}},
		{"event to visit", `SELECT COUNT(DISTINCT s.id) FROM events e LEFT JOIN sessions s ON ` + eventVisitJoin + `
			WHERE e.site_id = ? AND e.ts_ms >= ? AND e.ts_ms < ?`, []any{"s", 0, 1767225600000}, []string{
			"SEARCH x USING INDEX sessions_site_anon_start (site_id=? AND anon_id=? AND started_ms<?)"}},
		{"first visit", `SELECT MIN(started_ms) FROM sessions WHERE site_id = ?`, []any{"s"}, []string{
			"SEARCH sessions USING INDEX sessions_site_start (site_id=?)"}},
		{"visit reach", reachSQL, []any{"s", 0, 1767225600000}, []string{
			"SEARCH sessions USING INDEX sessions_site_start (site_id=? AND started_ms>? AND started_ms<?)"}},
	} {
		plan := queryPlan(t, db, c.query, c.args...)
		for _, step := range plan {
			if strings.HasPrefix(step, "SCAN ") && !strings.HasPrefix(step, "SCAN CONSTANT") || strings.Contains(step, "TEMP B-TREE FOR ORDER BY") {
				t.Errorf("%s: plan %q: got %q, want no scan or sort", c.name, plan, step)
			}
		}
		wantPlanSteps(t, c.name, plan, c.want)
	}
}

// TestVisitTimeBucketsFromMS: the query API's hours and days of visits,
// made from started_ms, are those of the visits' local start times, at
// the edges of hours, days and time zone changes, to the millisecond.
func TestVisitTimeBucketsFromMS(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	dst := time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC) // Berlin: 02:00 CET becomes 03:00 CEST
	var starts []time.Time
	for _, base := range []time.Time{dst, time.Date(2026, 3, 28, 23, 0, 0, 0, time.UTC), time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC)} {
		for _, d := range []time.Duration{-time.Millisecond, 0, time.Millisecond, 999 * time.Millisecond, time.Second} {
			starts = append(starts, base.Add(d))
		}
	}
	for i, at := range starts {
		execInWriter(t, db, fmt.Sprintf(`INSERT INTO sessions(site_id, anon_id, start_text, end_text, start_ms, duration_ms, event_count, visit_ready)
			VALUES ('s', 'v%d', '', '', %d, 0, 1, 1)`, i, at.UnixMilli()))
	}
	for _, zone := range []string{"UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"} {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		for _, unit := range []struct{ dim, layout string }{{"time:hour", "2006-01-02 15:00:00"}, {"time:day", "2006-01-02"}} {
			want := map[string]float64{}
			for _, at := range starts {
				want[at.In(loc).Format(unit.layout)]++
			}
			rows, err := db.Stats(context.Background(), StatsQuery{Site: "s", From: dst.Add(-6 * time.Hour), To: dst.Add(6 * time.Hour), Zone: loc,
				Metrics: []string{"visits"}, Dimensions: []string{unit.dim}, scan: true})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]float64{}
			for _, r := range rows {
				if r.Metrics[0] > 0 {
					got[r.Dims[0]] = r.Metrics[0]
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s by %s: got %v, want %v", zone, unit.dim, got, want)
			}
		}
	}
}

// TestEventsThroughVisitsUseIndexes: a filtered report's read of events
// through the range's visits finds the visits by sessions_site_start and
// each visit's events by events_site_anon_ts
// (docs/query-api.md#how-reports-stay-fast), never scanning either table. With
// event_pages complete, a read of names and pages reads the index entry and the
// event_pages row by seq, and no column of the events row: SQLite defers the
// seek of a row from an index until a column of it is read, so the row is never
// looked up (the plan says INDEX, not COVERING INDEX: an index over a virtual
// column never counts as covering). One that reads a property keeps reading the
// events row.
func TestEventsThroughVisitsUseIndexes(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "SQLite's query plans")
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	if !db.EventPagesReady() {
		t.Fatal("got event_pages not ready on a new database, want ready")
	}
	pageFilter := []QueryFilter{{Op: "is", Dim: "visit:country", Values: []string{"DE"}}, {Op: "contains", Dim: "event:page", Values: []string{"/p/1"}}}
	sessions := "SEARCH s USING INDEX sessions_site_start (site_id=? AND started_ms>? AND started_ms<?)"
	wideEvents := "SEARCH e USING INDEX events_site_anon_ts (site_id=? AND anon_id=? AND ts_ms>? AND ts_ms<?)"
	pages := "SEARCH p USING INTEGER PRIMARY KEY (rowid=?)"
	for _, c := range []struct {
		name       string
		dims       []string
		filters    []QueryFilter
		wideEvents bool
		want       []string
		wantNot    string
		rowsRead   bool // events rows are read
	}{
		{"page filter", nil, pageFilter, false, []string{sessions, wideEvents, pages}, "", false},
		{"by name and page", []string{"event:name", "event:page"}, pageFilter[:1], false, []string{sessions, wideEvents, pages}, "", false},
		{"by visitor's name filter", []string{"visit:source"}, []QueryFilter{{Op: "is_not", Dim: "event:name", Values: []string{"pageview"}}}, false,
			[]string{sessions, wideEvents, pages}, "", false},
		{"page filter, wide", nil, pageFilter, true, []string{sessions, wideEvents}, pages, true},
		{"by property", []string{"event:props:plan"}, pageFilter, false, []string{sessions, wideEvents}, pages, true},
		{"by day", []string{"time:day"}, pageFilter, false, []string{sessions, wideEvents, pages}, "", false},
		{"by hour, wide", []string{"time:hour"}, pageFilter, true, []string{sessions, wideEvents}, pages, true},
	} {
		q := &StatsQuery{Site: "s", From: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 1, 31, 0, 0, 0, 0, time.UTC),
			Zone: time.UTC, Metrics: []string{MetricVisitors, MetricPageviews}, Dimensions: c.dims, Filters: c.filters, wideEvents: c.wideEvents}
		query, args, err := db.eventRead(context.Background(), q, true)
		if err != nil {
			t.Fatal(err)
		}
		plan := queryPlan(t, db, query, args...)
		for _, step := range plan {
			if strings.HasPrefix(step, "SCAN ") && !strings.HasPrefix(step, "SCAN CONSTANT") {
				t.Errorf("%s: plan %q: got %q, want no scan", c.name, plan, step)
			}
			if step == c.wantNot {
				t.Errorf("%s: plan %q: got %q, want not", c.name, plan, step)
			}
		}
		wantPlanSteps(t, c.name, plan, c.want)
		if got := tableReaders(t, db, "events", query, args...); (got > 0) != c.rowsRead {
			t.Errorf("%s: got %d cursors reading events rows, want them %v", c.name, got, c.rowsRead)
		}
	}
}

// runConversion runs a conversion's steps of 4 rows to its end, failing
// after more steps than total rows, and returns the rows it converted.
func runConversion(t *testing.T, total int, step func(context.Context, int) (int64, bool, error)) int64 {
	t.Helper()
	var converted int64
	for steps := 0; ; steps++ {
		n, done, err := step(context.Background(), 4)
		if err != nil {
			t.Fatal(err)
		}
		converted += n
		if done {
			return converted
		}
		if steps > total {
			t.Fatal("the conversion does not end")
		}
	}
}

// wantConversionGone fails unless the conversion's table of where to
// resume is empty: a finished conversion deletes its row.
func wantConversionGone(t *testing.T, db *DB, table string) {
	t.Helper()
	var left int
	if err := db.read.QueryRow(`SELECT COUNT(*) FROM ` + table).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("got %d %s rows after it finished, want 0", left, table)
	}
}
