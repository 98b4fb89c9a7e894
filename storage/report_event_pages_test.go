package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// eventPagesFixture is events of every shape a page or name takes:
// pageviews and custom events, a NULL url, a percent-encoded path, a
// path in capitals, an event without a page of its own (signup), from
// visitors of two countries and sources.
func eventPagesFixture() []IngestEvent {
	day := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	str := func(s string) *string { return &s }
	var out []IngestEvent
	add := func(anon, typ string, url *string, country, referrer string, minute int) {
		e := IngestEvent{ID: fmt.Sprintf("ep-%d", len(out)), SiteID: "s", Type: typ, AnonID: anon, URL: url,
			TS: day.Add(time.Duration(minute) * time.Minute), Country: country, Raw: []byte(`{"properties":{"plan":"pro"}}`)}
		if referrer != "" {
			e.Referrer = str(referrer)
		}
		out = append(out, e)
	}
	add("a", "pageview", str("https://a.test/blog/one"), "DE", "https://search.test/", 0)
	add("a", "pageview", str("https://a.test/blog/two?x=1#top"), "DE", "", 2)
	add("a", "click", str("https://a.test/blog/one"), "DE", "", 3)
	add("a", "signup", nil, "DE", "", 4)
	add("b", "pageview", str("https://a.test/caf%C3%A9/Men%C3%BC?q=1"), "FR", "", 60)
	add("b", "Download", str("https://a.test/docs"), "FR", "", 61)
	add("b", "pageview", str("https://a.test/Blog/Three"), "FR", "", 62)
	add("c", "pageview", nil, "US", "https://news.test/", 200)
	add("c", "pageview", str("/blog/one"), "US", "", 201)
	add("d", "click", str("https://a.test/"), "", "", 400)
	return out
}

// eventPagesQueries are reports of every event dimension and filter shape
// that reads event_pages: is, is_not, contains, matches, their case-folding
// forms, on the page and the name, with visit filters and dimensions.
func eventPagesQueries() []StatsQuery {
	from := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	page := func(op string, fold bool, v ...string) QueryFilter {
		return QueryFilter{Op: op, Dim: "event:page", Values: v, Fold: fold}
	}
	name := func(op string, v ...string) QueryFilter { return QueryFilter{Op: op, Dim: "event:name", Values: v} }
	filters := [][]QueryFilter{nil,
		{page("is", false, "/blog/one")}, {page("is_not", false, "/blog/one", "/docs")}, {page("contains", false, "blog")},
		{page("contains", true, "BLOG")}, {page("matches", false, "^/caf")}, {page("matches_not", false, "é")},
		{page("is", false, NotSet)}, {page("is", false, "/café/Menü")}, {page("contains_not", false, "/")},
		{name("is", "signup")}, {name("is_not", "pageview")}, {name("contains", "load")}, {name("matches", "^[A-Z]")},
		{{Op: "is", Dim: "visit:country", Values: []string{"DE", "FR"}}, {Op: "is_not", Dim: "visit:source", Values: []string{DirectNone}}, page("contains", false, "/")},
		{{Op: "or", Children: []QueryFilter{page("is", false, "/docs"), name("is", "click")}}},
		{{Op: "not", Children: []QueryFilter{page("contains", false, "blog")}}},
	}
	var out []StatsQuery
	for _, fs := range filters {
		for _, dims := range [][]string{nil, {"event:page"}, {"event:name"}, {"event:name", "event:page"}, {"visit:source"}, {"visit:country", "event:page"},
			{"time:hour", "event:page"}} {
			out = append(out, StatsQuery{Site: "s", From: from, To: from.AddDate(0, 0, 1), Zone: time.UTC,
				Metrics: []string{MetricVisitors, MetricVisits, MetricPageviews, MetricEvents}, Dimensions: dims, Filters: fs})
		}
	}
	return out
}

// TestEventPagesAnswerAsTheEventsRows: every report that reads names and
// pages from event_pages answers exactly what the read of the events rows
// does, in two halves and in one query; and it does read event_pages (a
// changed row changes the answer).
func TestEventPagesAnswerAsTheEventsRows(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	ingestBatches(t, db, eventPagesFixture())
	if !db.EventPagesReady() {
		t.Fatal("got event_pages not ready on a new database, want ready")
	}
	for _, q := range eventPagesQueries() {
		wide := q
		wide.wideEvents = true
		want, wantV, _ := statsText(t, db, wide, true)
		for _, one := range []bool{false, true} {
			q.oneRead = one
			got, gotV, _ := statsText(t, db, q, true)
			if !slices.Equal(got, want) || !slices.Equal(gotV, wantV) {
				t.Errorf("one read %v, %v by %v: got %v %v, want %v %v", one, q.Filters, q.Dimensions, got, gotV, want, wantV)
			}
		}
	}
	// Hand-counted: the pages containing "blog" (case-insensitive), by
	// name: a's two pageviews and click, b's /Blog/Three, c's /blog/one.
	q := StatsQuery{Site: "s", From: time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC), Zone: time.UTC,
		Metrics: []string{MetricVisitors, MetricPageviews, MetricEvents}, Dimensions: []string{"event:name"},
		Filters: []QueryFilter{{Op: "contains", Dim: "event:page", Values: []string{"BLOG"}, Fold: true}}}
	if got, gotV, _ := statsText(t, db, q, true); fmt.Sprint(got, gotV) != "[click: [-1 0 1] pageview: [-1 4 4]] [1 3]" {
		t.Errorf("got %v %v, want [click: [-1 0 1] pageview: [-1 4 4]] [1 3]", got, gotV)
	}
	execInWriter(t, db, `UPDATE event_pages SET path = '/changed' WHERE path = '/docs'`)
	q.Dimensions, q.Filters = []string{"event:page"}, []QueryFilter{{Op: "is", Dim: "event:name", Values: []string{"Download"}}}
	if got, _, _ := statsText(t, db, q, true); fmt.Sprint(got) != "[/changed: [-1 0 1]]" {
		t.Errorf("after changing its event_pages row: got %v, want [/changed: [-1 0 1]]", got)
	}
}

// eventPagesMismatch counts the events without their event_pages row as
// the insert trigger writes it, and the event_pages rows without their
// event.
func eventPagesMismatch(t *testing.T, db *DB) int {
	t.Helper()
	var n int
	err := db.read.QueryRow(`SELECT
		(SELECT COUNT(*) FROM events e LEFT JOIN event_pages p ON p.seq = e.seq
			WHERE p.seq IS NULL OR p.name IS NOT (CASE WHEN e.type = 'pageview' THEN NULL ELSE e.type END)
				OR p.path IS NOT tally_page_path(e.url))
		+ (SELECT COUNT(*) FROM event_pages p WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.seq = p.seq))`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestEventPagesFollowEveryWrite: the triggers keep event_pages in step
// with events through intake, an erasure, a retention purge, a site's
// deletion, and plain SQL updates and deletes (as from a shell).
func TestEventPagesFollowEveryWrite(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "SQLite's triggers keep event_pages in step; on PostgreSQL the event's insert writes its row and a foreign key deletes it")
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	ws := withSites(t, db, "s")
	if _, err := db.CreateSite(context.Background(), Actor{Kind: ActorSystem}, ws, "t", "t"); err != nil {
		t.Fatal(err)
	}
	events := eventPagesFixture()
	user := "user-a"
	for i := range events {
		if events[i].AnonID == "a" {
			events[i].UserID = &user
		}
		other := events[i]
		other.SiteID, other.ID = "t", "t-"+other.ID
		events = append(events, other)
	}
	ingestBatches(t, db, events)
	count := func() (events, pages int) {
		db.read.QueryRow(`SELECT (SELECT COUNT(*) FROM events), (SELECT COUNT(*) FROM event_pages)`).Scan(&events, &pages)
		return events, pages
	}
	check := func(stage string, wantEvents int) {
		t.Helper()
		if n := eventPagesMismatch(t, db); n != 0 {
			t.Errorf("%s: got %d events and event_pages rows out of step, want 0", stage, n)
		}
		if e, p := count(); e != wantEvents || p != wantEvents {
			t.Errorf("%s: got %d events and %d event_pages rows, want %d of each", stage, e, p, wantEvents)
		}
	}
	check("intake", 20)
	execInWriter(t, db, `UPDATE events SET url = 'https://a.test/moved', type = 'pageview' WHERE type = 'Download'`,
		`UPDATE events SET type = 'Signed up' WHERE type = 'signup'`)
	check("updates", 20)
	site, _ := db.Site("s")
	if _, err := db.EraseSubject(context.Background(), Actor{Kind: ActorSystem}, site, Subject{UserID: user}); err != nil {
		t.Fatal(err)
	}
	check("erasure", 16)
	execInWriter(t, db, `DELETE FROM events WHERE anon_id = 'c'`)
	check("shell delete", 12)
	if err := db.DeleteSite(context.Background(), Actor{Kind: ActorSystem}, ws, "t"); err != nil {
		t.Fatal(err)
	}
	check("site deletion", 4)
}

// undo0021 turns db back to before migration 0021: no event_pages, no
// triggers, the migration not applied.
func undo0021(t *testing.T, db *DB) {
	t.Helper()
	execInWriter(t, db, `DROP TRIGGER event_pages_insert`, `DROP TRIGGER event_pages_delete`, `DROP TRIGGER event_pages_update`,
		`DROP TABLE event_pages`, `DROP TABLE event_pages_backfill`, `DELETE FROM schema_migrations WHERE version = 21`)
}

// TestMigration0021BackfillsEventPages: on a database of before 0021 the
// migration writes no event_pages row of the events stored before; reports
// read the events rows until the backfill ends, then event_pages, with the
// same answers. The backfill goes a chunk of events at a time (seq gaps
// cost nothing), resumes after a restart where its last job committed,
// skips events erased meanwhile and leaves alone those intake wrote since.
func TestMigration0021BackfillsEventPages(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "backfills an old SQLite layout")
	path := filepath.Join(t.TempDir(), "a.db")
	db := openTest(t, path)
	withSites(t, db, "s")
	fixture := eventPagesFixture()
	ingestBatches(t, db, fixture)
	execInWriter(t, db, `DELETE FROM events WHERE seq <= 2`)
	var want []string
	for _, q := range eventPagesQueries() {
		got, _, _ := statsText(t, db, q, true)
		want = append(want, fmt.Sprint(got))
	}
	answers := func(stage string) {
		t.Helper()
		for i, q := range eventPagesQueries() {
			if got, _, _ := statsText(t, db, q, true); fmt.Sprint(got) != want[i] {
				t.Errorf("%s: %v by %v: got %v, want %s", stage, q.Filters, q.Dimensions, got, want[i])
			}
		}
	}
	undo0021(t, db)
	db.Close()
	open := func() *DB {
		db, err := openTestDB(t, context.Background(), Options{Path: path, eventPagesChunk: -1})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	db = open()
	var rows int
	if db.read.QueryRow(`SELECT COUNT(*) FROM event_pages`).Scan(&rows); rows != 0 || db.EventPagesReady() {
		t.Fatalf("after migration 0021: got %d event_pages rows, ready %v; want none, not ready", rows, db.EventPagesReady())
	}
	answers("before the backfill")
	// Events 3 to 6: the first four, though seq 1 and 2 are gone.
	if n, done, err := db.backfillEventPages(context.Background(), 4, nil); err != nil || done || n != 4 {
		t.Fatalf("first step: got %d rows, done %v (%v); want 4, more to do", n, done, err)
	}
	var next int64
	if err := db.read.QueryRow(`SELECT next_seq FROM event_pages_backfill`).Scan(&next); err != nil || next != 6 {
		t.Fatalf("after one step: got next_seq %d (%v), want 6", next, err)
	}
	answers("during the backfill")
	// A crash: the next start resumes after the last committed step.
	db.Close()
	db = open()
	defer func() { db.Close() }()
	if err := db.read.QueryRow(`SELECT next_seq FROM event_pages_backfill`).Scan(&next); err != nil || next != 6 {
		t.Fatalf("after a restart: got next_seq %d (%v), want 6", next, err)
	}
	// Erased before the backfill reaches it, and written since.
	execInWriter(t, db, `DELETE FROM events WHERE seq = 8`)
	late := fixture[0]
	late.ID, late.TS = "late", late.TS.Add(5*time.Hour)
	ingestBatches(t, db, []IngestEvent{late})
	want = nil
	for _, q := range eventPagesQueries() {
		q.wideEvents = true
		got, _, _ := statsText(t, db, q, true)
		want = append(want, fmt.Sprint(got))
	}
	if got := runConversion(t, 10, db.eventPagesBackfill(0).Step); got != 3 {
		t.Fatalf("got %d rows backfilled by the rest, want 3 (seq 7, 9, 10)", got)
	}
	if !db.EventPagesReady() {
		t.Fatal("got event_pages not ready after the backfill, want ready")
	}
	wantConversionGone(t, db, "event_pages_backfill")
	if n := eventPagesMismatch(t, db); n != 0 {
		t.Errorf("after the backfill: got %d events and event_pages rows out of step, want 0", n)
	}
	answers("after the backfill")
	// The next start finds it done.
	db.Close()
	db = open()
	if !db.EventPagesReady() {
		t.Fatal("got event_pages not ready after a restart, want ready")
	}
}

// TestEventPagesBackfillRunsAtStart: the background runner backfills every
// event by itself, and reports then read event_pages.
func TestEventPagesBackfillRunsAtStart(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "backfills an old SQLite layout")
	path := filepath.Join(t.TempDir(), "a.db")
	db := openTest(t, path)
	withSites(t, db, "s")
	ingestBatches(t, db, eventPagesFixture())
	undo0021(t, db)
	db.Close()
	db, err := openTestDB(t, context.Background(), Options{Path: path, eventPagesChunk: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	<-db.conv.done
	if !db.EventPagesReady() {
		t.Fatal("got event_pages not ready after the runner ended, want ready")
	}
	wantConversionGone(t, db, "event_pages_backfill")
	if n := eventPagesMismatch(t, db); n != 0 {
		t.Errorf("got %d events and event_pages rows out of step, want 0", n)
	}
}
