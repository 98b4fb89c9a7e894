package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tally-analytics/tally/internal/dbtest"
)

// eventColumnsFixture is n events of one site whose ids and agents take
// every form: canonical UUIDs and ids that are not (upper case, without
// hyphens, 16 bytes of text, other text), agents on the lists, off them
// (in part) and empty. Every fifth event carries a user id. Each raw
// repeats the row's id, as the wire formats do.
func eventColumnsFixture(n int) []IngestEvent {
	type agent struct{ browser, os, device string }
	agents := []agent{{"Chrome", "Windows", "desktop"}, {"ZqBrowser 9", "Linux", "desktop"}, {"", "", ""},
		{"Mobile Safari", "iOS", "mobile"}, {"Firefox", "Haiku", ""}, {"", "", "other"}, {"Huawei Browser", "OpenBSD", "tablet"}}
	var out []IngestEvent
	for i := range n {
		id := fmt.Sprintf("0b1c2a3e-0b4d-4e5f-8a9b-%012x", i)
		switch i % 6 {
		case 1:
			id = strings.ToUpper(id)
		case 2:
			id = fmt.Sprintf("evt-%d", i)
		case 3:
			id = strings.ReplaceAll(id, "-", "")
		case 4:
			id = fmt.Sprintf("sixteen-bytes-%02d", i%100)
		}
		a := agents[i%len(agents)]
		anon := fmt.Sprintf("anon-%d", i%4)
		url := fmt.Sprintf("https://a.test/p/%d", i%3)
		e := IngestEvent{ID: id, SiteID: "s", Type: []string{"pageview", "click"}[i%2], AnonID: anon, URL: &url,
			TS: time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute), Country: "DE",
			Browser: a.browser, OS: a.os, DeviceType: a.device,
			Raw: []byte(fmt.Sprintf(`{"id":%q,"anon_id":%q,"type":"x","properties":{"n":%d,"of":%q}}`, id, anon, i, id))}
		if i%5 == 0 {
			user := fmt.Sprintf("user-%d", i%2)
			e.UserID = &user
		}
		out = append(out, e)
	}
	return out
}

// eventReads is everything read from events, as text: every row as
// SiteEvents gives it (the inspection feed's and servertest's rows), the
// event export, each user's timeline, a subject's GDPR export, and a query
// API report by a custom property (which reads raw through the id).
func eventReads(t *testing.T, db *DB) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	list, err := db.SiteEvents(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	j, _ := json.Marshal(list)
	fmt.Fprintf(&b, "events %s\n", j)
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	err = db.ExportEvents(ctx, "s", from, from.AddDate(0, 0, 2), 0, func(page []ExportEvent) error {
		j, _ := json.Marshal(page)
		fmt.Fprintf(&b, "export %s\n", j)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"user-0", "user-1"} {
		tl, _, err := db.Timeline(ctx, "s", user, 100, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		j, _ := json.Marshal(tl)
		fmt.Fprintf(&b, "timeline %s %s\n", user, j)
	}
	site, _ := db.Site("s")
	out, err := db.ExportSubject(ctx, Actor{Kind: ActorSystem}, site, Subject{UserID: "user-1"})
	if err != nil {
		t.Fatal(err)
	}
	j, _ = json.Marshal(out.Events)
	fmt.Fprintf(&b, "subject %s\n", j)
	rows, err := db.Stats(ctx, StatsQuery{Site: "s", From: from, To: from.AddDate(0, 0, 2), Zone: time.UTC, scan: true,
		Metrics: []string{"events"}, Dimensions: []string{"event:props:of"}})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(&b, "props", rows)
	return b.String()
}

// eventForms counts the events rows whose id is stored as 16 bytes and
// whose agent is stored as a code.
func eventForms(t *testing.T, db *DB) (blobIDs, codedAgents int) {
	t.Helper()
	// The id's form is told in Go: the backends name their types apart.
	rows, err := db.read.Query(`SELECT id_text, CASE WHEN agent IS NOT NULL AND browser_text IS NULL AND os_text IS NULL
		AND device_type_text IS NULL THEN 1 ELSE 0 END FROM events`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id any
		var coded int
		if err := rows.Scan(&id, &coded); err != nil {
			t.Fatal(err)
		}
		if b, ok := id.([]byte); ok && len(b) == 16 {
			blobIDs++
		}
		codedAgents += coded
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return blobIDs, codedAgents
}

// undo0020 makes db a database of before migration 0020: events with their
// id, browser, os and device_type as text (the generated columns' text, so
// every row reads as before), no conversion, 0020 not applied.
func undo0020(t *testing.T, db *DB) {
	t.Helper()
	qs := []string{`DROP TABLE event_columns_conversion`,
		`UPDATE events SET id_text = id, browser_text = browser, os_text = os, device_type_text = device_type`}
	for _, col := range []string{"id", "browser", "os", "device_type", "agent"} {
		qs = append(qs, `ALTER TABLE events DROP COLUMN `+col)
	}
	for old, col := range map[string]string{"id_text": "id", "browser_text": "browser", "os_text": "os", "device_type_text": "device_type"} {
		qs = append(qs, `ALTER TABLE events RENAME COLUMN `+old+` TO `+col)
	}
	execInWriter(t, db, append(qs, `DELETE FROM schema_migrations WHERE version = 20`)...)
}

// The writer stores a canonical UUID as its 16 bytes and an agent on the
// lists as a code; every other id and agent stays text. Each reads back
// exactly as sent, raw too, and a repeat of each id is still a duplicate.
func TestEventColumnsRoundTrip(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	batch := eventColumnsFixture(42)
	if _, err := db.Ingest(context.Background(), batch, nil, nil); err != nil {
		t.Fatal(err)
	}
	got, err := db.SiteEvents(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(batch) {
		t.Fatalf("got %d events, want %d", len(got), len(batch))
	}
	text := func(s *string) string {
		if s == nil {
			return "<nil>"
		}
		return *s
	}
	orNil := func(s string) string {
		if s == "" {
			return "<nil>"
		}
		return s
	}
	wantBlobs, wantCoded := 0, 0
	for i, e := range batch {
		g := got[i]
		if g.ID != e.ID || text(g.Browser) != orNil(e.Browser) || text(g.OS) != orNil(e.OS) || text(g.DeviceType) != orNil(e.DeviceType) {
			t.Errorf("event %d: got id %q, agent %s/%s/%s; want %q, %s/%s/%s", i, g.ID, text(g.Browser), text(g.OS), text(g.DeviceType),
				e.ID, orNil(e.Browser), orNil(e.OS), orNil(e.DeviceType))
		}
		if string(g.Raw) != string(e.Raw) {
			t.Errorf("event %d: got raw %s, want %s", i, g.Raw, e.Raw)
		}
		var id any
		var agent *int64
		if err := db.read.QueryRow(`SELECT id_text, agent FROM events WHERE seq = ?`, i+1).Scan(&id, &agent); err != nil {
			t.Fatal(err)
		}
		typ := "text"
		if _, ok := id.([]byte); ok {
			typ = "blob"
		}
		// PostgreSQL keeps every id as text (eventIDKey).
		_, isKey := db.d.eventIDKey(e.ID).([]byte)
		if want := map[bool]string{true: "blob", false: "text"}[isKey]; typ != want {
			t.Errorf("event %d (id %q): got id stored as %s, want %s", i, e.ID, typ, want)
		}
		code, onLists := agentCode(e.Browser, e.OS, e.DeviceType)
		if onLists && (agent == nil || *agent != code) || !onLists && agent != nil {
			t.Errorf("event %d (%q/%q/%q): got agent %v, want code %d (on the lists: %v)", i, e.Browser, e.OS, e.DeviceType, agent, code, onLists)
		}
		if isKey {
			wantBlobs++
		}
		if onLists {
			wantCoded++
		}
	}
	if blobs, coded := eventForms(t, db); blobs != wantBlobs || coded != wantCoded || (wantBlobs == 0) != dbtest.Postgres() || wantCoded == 0 || wantCoded == len(batch) {
		t.Fatalf("got %d ids as 16 bytes and %d agents coded, want %d and %d (some of each form)", blobs, coded, wantBlobs, wantCoded)
	}
	r, err := db.Ingest(context.Background(), batch, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Accepted != 0 {
		t.Fatalf("sent again: got %d accepted, want every event a duplicate", r.Accepted)
	}
}

// TestMigration0020ConvertsEventColumns turns a database back to before
// 0020, opens it (0020 runs) and converts it step by step, with a restart
// in the middle as after a crash: every read is the same before, during
// and after, and every row that can ends in the new form. The first rows
// are gone (as retention leaves a database), and a step still converts
// its chunk of rows.
func TestMigration0020ConvertsEventColumns(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "converts an old SQLite layout")
	path := filepath.Join(t.TempDir(), "a.db")
	db := openTest(t, path)
	withSites(t, db, "s")
	if _, err := db.Ingest(context.Background(), eventColumnsFixture(60), nil, nil); err != nil {
		t.Fatal(err)
	}
	execInWriter(t, db, `DELETE FROM events WHERE seq <= 10`)
	want := eventReads(t, db)
	wantBlobs, wantCoded := eventForms(t, db)
	undo0020(t, db)
	var total, rewrite int
	db.read.QueryRow(`SELECT COUNT(*), COUNT(*) FILTER (WHERE typeof(dedup_key(id)) = 'blob' OR `+
		agentCodeSQL("browser", "os", "device_type")+` IS NOT NULL) FROM events`).Scan(&total, &rewrite)
	db.Close()
	if total != 50 || rewrite < 20 || rewrite == total {
		t.Fatalf("got %d events, %d of them to rewrite; want 50, some but not all", total, rewrite)
	}

	open := func() *DB {
		db, err := openTestDB(t, context.Background(), Options{Path: path, eventColumnsChunk: -1})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	db = open()
	if blobs, coded := eventForms(t, db); blobs != 0 || coded != 0 {
		t.Fatalf("after migration 0020: got %d ids as bytes and %d agents coded, want none", blobs, coded)
	}
	if got := eventReads(t, db); got != want {
		t.Fatalf("before the conversion: got reads\n%s\nwant\n%s", got, want)
	}
	// Rows 11 to 14: the first four rows, though seq 1 to 10 are gone.
	n, done, err := db.convertEventColumns(context.Background(), 4)
	if err != nil || done {
		t.Fatalf("first step: got done %v, err %v; want more to do", done, err)
	}
	var next int64
	if err := db.read.QueryRow(`SELECT next_seq FROM event_columns_conversion`).Scan(&next); err != nil || next != 14 {
		t.Fatalf("after one step: got next_seq %d (%v), want 14", next, err)
	}
	var stepped int64
	db.read.QueryRow(`SELECT COUNT(*) FROM events WHERE seq <= 14 AND (typeof(id_text) = 'blob' OR agent IS NOT NULL)`).Scan(&stepped)
	if n == 0 || n != stepped {
		t.Fatalf("first step: got %d rows converted, %d in the new form; want the same, above 0", n, stepped)
	}
	if got := eventReads(t, db); got != want {
		t.Fatalf("during the conversion: got reads\n%s\nwant\n%s", got, want)
	}
	// A crash: the next start resumes after the last committed step.
	db.Close()
	db = open()
	defer func() { db.Close() }()
	if err := db.read.QueryRow(`SELECT next_seq FROM event_columns_conversion`).Scan(&next); err != nil || next != 14 {
		t.Fatalf("after a restart: got next_seq %d (%v), want 14", next, err)
	}
	converted := n
	converted += runConversion(t, total, db.convertEventColumns)
	if converted != int64(rewrite) {
		t.Fatalf("got %d rows converted, want %d", converted, rewrite)
	}
	if blobs, coded := eventForms(t, db); blobs != wantBlobs || coded != wantCoded {
		t.Fatalf("after the conversion: got %d ids as bytes and %d agents coded, want %d and %d as intake writes them",
			blobs, coded, wantBlobs, wantCoded)
	}
	wantConversionGone(t, db, "event_columns_conversion")
	if got := eventReads(t, db); got != want {
		t.Fatalf("after the conversion: got reads\n%s\nwant\n%s", got, want)
	}
}

// TestEventColumnsConversionRunsAtStart: the background runner converts
// every row by itself while intake goes on, and its row is gone.
func TestEventColumnsConversionRunsAtStart(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "converts an old SQLite layout")
	path := filepath.Join(t.TempDir(), "a.db")
	db := openTest(t, path)
	withSites(t, db, "s")
	if _, err := db.Ingest(context.Background(), eventColumnsFixture(40), nil, nil); err != nil {
		t.Fatal(err)
	}
	want := eventReads(t, db)
	wantBlobs, wantCoded := eventForms(t, db)
	undo0020(t, db)
	db.Close()
	db, err := openTestDB(t, context.Background(), Options{Path: path, eventColumnsChunk: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Intake meanwhile, on another site, in the new form.
	withSites(t, db, "t")
	later := eventColumnsFixture(1)
	later[0].SiteID = "t"
	if _, err := db.Ingest(context.Background(), later, nil, nil); err != nil {
		t.Fatal(err)
	}
	<-db.conv.done
	if blobs, coded := eventForms(t, db); blobs != wantBlobs+1 || coded != wantCoded+1 {
		t.Fatalf("got %d ids as bytes and %d agents coded, want %d and %d", blobs, coded, wantBlobs+1, wantCoded+1)
	}
	wantConversionGone(t, db, "event_columns_conversion")
	if got := eventReads(t, db); got != want {
		t.Fatalf("got reads\n%s\nwant\n%s", got, want)
	}
}
