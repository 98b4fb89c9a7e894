package storage

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// visitFixture is events of a few visitors with every kind of visit
// attribute: several visits each, Segment messages with a campaign, a
// Tally event whose unknown context.campaign counts for neither intake nor
// backfill, referrers, and locations; sent out of order.
func visitFixture() []IngestEvent {
	var out []IngestEvent
	base := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	for v := range 6 {
		anon := fmt.Sprintf("visitor-%d", v)
		for k := range 9 {
			at := base.Add(time.Duration(v)*time.Hour + time.Duration(3*k*k)*time.Minute) // gaps grow past 30 minutes
			url := fmt.Sprintf("https://shop.test/p/%d?utm_source=u%d&utm_medium=m%d", k%4, v, k)
			e := IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%06d%06d", v, k), SiteID: "s", AnonID: anon,
				Type: []string{"pageview", "click", "pageview"}[k%3], URL: &url, TS: at,
				Country: []string{"DE", "FR"}[k%2], City: "C" + fmt.Sprint(k), Browser: "Firefox", OS: "Linux", DeviceType: "desktop",
				Raw: []byte(fmt.Sprintf(`{"anon_id":%q,"context":{"campaign":{"source":"ignored"}}}`, anon))}
			if k%2 == 1 {
				ref := []string{"https://shop.test/self", "https://www.news.test/a/"}[k%4/2]
				e.Referrer = &ref
			}
			if v%2 == 1 && k%3 == 0 { // a Segment page with a campaign
				e.Campaign = &Campaign{Source: fmt.Sprintf("seg%d", v), Name: "launch"}
				e.Raw = []byte(fmt.Sprintf(`{"type":"page","anonymousId":%q,"context":{"campaign":{"source":"seg%d","name":"launch"}}}`, anon, v))
			}
			out = append(out, e)
		}
	}
	// Out of order: newest first.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// undo0013 makes db a database of before migration 0013: sessions without
// the visit columns, no index by start, no backfill, 0013 (and 0016, which
// builds on it) not applied.
func undo0013(t *testing.T, db *DB) {
	t.Helper()
	undo0016(t, db)
	qs := []string{`DROP INDEX sessions_site_start`, `DROP TABLE visit_backfill`, `DELETE FROM schema_migrations WHERE version = 13`}
	for _, col := range []string{"entry_page", "exit_page", "pageviews", "referrer", "source", "utm_source", "utm_medium",
		"utm_campaign", "utm_term", "utm_content", "country", "city", "browser", "os", "device", "entry_ms", "exit_ms", "referrer_ms", "visit_ready"} {
		qs = append(qs, `ALTER TABLE sessions DROP COLUMN `+col)
	}
	err := db.writer.do(context.Background(), func(tx *writeTx) error {
		for _, q := range qs {
			if _, err := tx.Exec(q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// pre0013 stores events in a new database at path, returns every visit
// as intake computed them, and leaves the database as of before 0013.
func pre0013(t *testing.T, path string, events []IngestEvent) map[string][]string {
	t.Helper()
	db, err := openTestDB(t, context.Background(), Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	withSites(t, db, "s")
	for _, e := range events {
		ingestAll(t, db, e)
	}
	want := allVisitAttrs(t, db)
	undo0013(t, db)
	db.Close()
	return want
}

func readyCount(t *testing.T, db *DB) (ready, pending int) {
	t.Helper()
	if err := db.read.QueryRow(`SELECT COUNT(*) FILTER (WHERE visit_ready = 1), COUNT(*) FILTER (WHERE visit_ready = 0) FROM sessions`).Scan(&ready, &pending); err != nil {
		t.Fatal(err)
	}
	return ready, pending
}

func TestMigration0013BackfillsVisits(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "backfills an old SQLite layout")
	path := filepath.Join(t.TempDir(), "a.db")
	want := pre0013(t, path, visitFixture())
	if len(want) != 6 {
		t.Fatalf("got %d visitors in the fixture, want 6", len(want))
	}
	db := openTest(t, path)
	<-db.conv.done
	if got := allVisitAttrs(t, db); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got backfilled visits\n%v\nwant those intake computed\n%v", got, want)
	}
	var left int
	db.read.QueryRow(`SELECT COUNT(*) FROM visit_backfill`).Scan(&left)
	if left != 0 {
		t.Fatalf("got %d visit_backfill rows after it finished, want 0", left)
	}
}

func TestEmptyDatabaseHasNoVisitBackfill(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "SQLite's conversions")
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	var n int
	if err := db.read.QueryRow(`SELECT COUNT(*) FROM visit_backfill`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("got %d visit_backfill rows (%v), want 0", n, err)
	}
}

func TestVisitBackfillInChunksResumesAfterACrash(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "backfills an old SQLite layout")
	path := filepath.Join(t.TempDir(), "a.db")
	want := pre0013(t, path, visitFixture())
	db, err := openTestDB(t, context.Background(), Options{Path: path, visitBackfillChunk: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, total := readyCount(t, db)
	// Two chunks of 4 sessions, each committed on its own.
	for step := 1; step <= 2; step++ {
		c, err := db.readVisitChunk(context.Background(), 4)
		if err != nil || c == nil {
			t.Fatalf("chunk %d: got %v, %v; want a chunk", step, c, err)
		}
		if n, err := db.writeVisitChunk(context.Background(), c); err != nil || n != 4 {
			t.Fatalf("chunk %d: got %d written (%v), want 4", step, n, err)
		}
		if ready, pending := readyCount(t, db); ready != 4*step || pending != total-4*step {
			t.Fatalf("after chunk %d: got %d ready and %d pending, want %d and %d", step, ready, pending, 4*step, total-4*step)
		}
	}
	// A crash: the next start resumes at the third chunk, in the background.
	db.Close()
	db, err = openTestDB(t, context.Background(), Options{Path: path, visitBackfillChunk: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	<-db.conv.done
	if got := allVisitAttrs(t, db); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got backfilled visits\n%v\nwant\n%v", got, want)
	}
}

// Intake goes on during the backfill. A session of before 0013 that takes
// a new event (or is merged by one) gets its visit from all its events at
// once; the backfill's chunk read before that leaves it as intake wrote
// it.
func TestVisitBackfillAndIntakeMeanwhile(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "backfills an old SQLite layout")
	events := visitFixture()
	path := filepath.Join(t.TempDir(), "a.db")
	pre0013(t, path, events)
	db, err := openTestDB(t, context.Background(), Options{Path: path, visitBackfillChunk: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, err := db.readVisitChunk(context.Background(), 100)
	if err != nil || c == nil {
		t.Fatalf("got %v, %v; want a chunk", c, err)
	}
	// visitor-0's events are at 9:00 + 3k² minutes: visits 9:00-9:48,
	// 10:15, 10:48, 11:27 and 12:12. A pageview at 9:50 joins the first;
	// an event at 10:31 bridges the second and third.
	later := []IngestEvent{
		{ID: "late-1", SiteID: "s", AnonID: "visitor-0", Type: "pageview", URL: str("https://shop.test/late"), TS: time.Date(2026, 3, 1, 9, 50, 0, 0, time.UTC), Raw: []byte(`{}`)},
		{ID: "late-2", SiteID: "s", AnonID: "visitor-0", Type: "click", TS: time.Date(2026, 3, 1, 10, 31, 0, 0, time.UTC), Raw: []byte(`{}`)},
	}
	ingestAll(t, db, later...)
	if _, err := db.writeVisitChunk(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if _, pending := readyCount(t, db); pending != 0 {
		t.Fatalf("got %d sessions pending, want 0", pending)
	}
	// As if every event had been stored after the upgrade.
	fresh := openTest(t, filepath.Join(t.TempDir(), "b.db"))
	withSites(t, fresh, "s")
	ingestAll(t, fresh, append(events, later...)...)
	if got, want := allVisitAttrs(t, db), allVisitAttrs(t, fresh); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got visits\n%v\nwant\n%v", got, want)
	}
}

// An erased subject's visits go with its sessions: none of their
// attributes is left in any row, nor anywhere in the file.
func TestErasureLeavesNoVisitAttribute(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "reads the bytes of the SQLite file")
	path := filepath.Join(t.TempDir(), "a.db")
	db := openTest(t, path)
	withSites(t, db, "s")
	user := "zq-user-4410"
	secret := []string{"zqpage4410", "zqref4410.test", "zqcamp4410", "Zqcity4410"}
	var batch []IngestEvent
	for i := range 40 {
		e := ev(fmt.Sprintf("e-%d", i), "other", "pageview", float64(i), "https://shop.test/p", "https://search.test/")
		if i%2 == 0 {
			e = ev(fmt.Sprintf("e-%d", i), "zq-anon-4410", "pageview", float64(i), "https://shop.test/"+secret[0]+"?utm_campaign="+secret[2], "https://"+secret[1]+"/x")
			e.UserID, e.City = &user, secret[3]
		}
		batch = append(batch, e)
	}
	ingestAll(t, db, batch...)
	if n := countWhere(t, db, secret); n == 0 {
		t.Fatal("got no session holding the subject's attributes before erasure: the test would prove nothing")
	}
	site, _ := db.Site("s")
	if _, err := db.EraseSubject(context.Background(), Actor{Kind: ActorSystem}, site, Subject{UserID: user}); err != nil {
		t.Fatal(err)
	}
	if n := countWhere(t, db, secret); n != 0 {
		t.Fatalf("got %d sessions holding the erased subject's visit attributes, want 0", n)
	}
	if _, _, err := db.Space(context.Background()); err != nil { // checkpoints the WAL into the file
		t.Fatal(err)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secret {
		if bytes.Contains(file, []byte(s)) {
			t.Errorf("got %q in the database file after erasure, want none", s)
		}
	}
}

// countWhere counts the sessions any of whose visit columns holds one of
// values.
func countWhere(t *testing.T, db *DB, values []string) int {
	t.Helper()
	n := 0
	for _, v := range values {
		var k int
		err := db.read.QueryRow(`SELECT COUNT(*) FROM sessions WHERE instr(coalesce(entry_page, '') || coalesce(exit_page, '') || coalesce(referrer, '') ||
			coalesce(source, '') || coalesce(utm_campaign, '') || coalesce(city, ''), ?) > 0`, v).Scan(&k)
		if err != nil {
			t.Fatal(err)
		}
		n += k
	}
	return n
}

// A day's partials computed before its visits were backfilled lack their
// attributes: the backfill's job drops them with the sessions it writes.
func TestVisitBackfillDropsTheDaysPartials(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "backfills an old SQLite layout")
	path := filepath.Join(t.TempDir(), "a.db")
	pre0013(t, path, visitFixture())
	db, err := openTestDB(t, context.Background(), Options{Path: path, visitBackfillChunk: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	insert := func(site string) {
		t.Helper()
		if err := db.writer.do(context.Background(), func(tx *writeTx) error {
			_, err := tx.Exec(`INSERT INTO day_partials(site_id, zone, dim, basis, day_start, day_end, data) VALUES (?, 'UTC', 'visit:source', 'visits', ?, ?, x'00')`,
				site, day.UnixMilli(), day.AddDate(0, 0, 1).UnixMilli())
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	insert("s")
	insert("other") // another site's day is left alone
	c, err := db.readVisitChunk(context.Background(), 100)
	if err != nil || c == nil {
		t.Fatalf("got %v, %v; want a chunk", c, err)
	}
	if _, err := db.writeVisitChunk(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	var sites []string
	rows, err := db.read.Query(`SELECT site_id FROM day_partials ORDER BY site_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		rows.Scan(&s)
		sites = append(sites, s)
	}
	if fmt.Sprint(sites) != "[other]" {
		t.Errorf("got partials of %v after the backfill, want [other] only", sites)
	}
}
