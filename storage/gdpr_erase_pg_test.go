package storage

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tally-analytics/tally/storage/internal/engine"
)

// One instance erases a user while another keeps ingesting the user's
// events (to devices the walk may have passed, to a device linked
// meanwhile, and quarantined ones) beside another visitor's: afterwards
// no row of the user remains in any table, and every row and rollup of
// the site equals a database that never saw the user (docs/gdpr.md, On
// PostgreSQL). Intake on the erasing instance after each step makes the erasure
// run many jobs, so that the other instance's sends land between them; they
// stop before the erasure's last job begins.
func TestEraseSubjectWhileAnotherInstanceIngests(t *testing.T) {
	t.Parallel()
	onlyPostgres(t, "two instances on one database")
	ctx := context.Background()
	opts := testOptions(t, Options{Path: "erase-two.db"})
	a, err := Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	withSites(t, a, "s", "o")
	b, err := Open(ctx, opts) // after the sites, which b loads at Open
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ref := openTest(t, "erase-ref.db")
	withSites(t, ref, "s", "o")

	perDevice := eraseJobRows/3 + eraseChunk
	newEraseFixtureOf(t, a, true, perDevice)
	newEraseFixtureOf(t, ref, false, perDevice)

	// b's sends: batch i has the user's events and visitor x's.
	u := "u"
	batch := func(i int, withUser bool) ([]IngestEvent, []Quarantined) {
		at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute)
		url := fmt.Sprintf("https://a.test/x/page-%d", i%5)
		events := []IngestEvent{{ID: fmt.Sprintf("00000000-0000-4000-a000-%012d", i), SiteID: "s", Type: "pageview",
			AnonID: "x", URL: &url, TS: at, Raw: []byte(`{}`), Browser: "Firefox", Country: "FR"}}
		if !withUser {
			return events, nil
		}
		for d := range 3 {
			uurl := fmt.Sprintf("https://a.test/d%d/late-%d", d, i)
			events = append(events, IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-b%03d-%012d", d, i), SiteID: "s", Type: "pageview",
				AnonID: fmt.Sprintf("d%d", d), URL: &uurl, TS: at, Raw: []byte(`{}`), Browser: "Chrome", Country: "DE"})
		}
		if i%4 == 0 { // a device linked meanwhile
			nurl := "https://a.test/new"
			events = append(events, IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-c000-%012d", i), SiteID: "s", Type: "pageview",
				AnonID: fmt.Sprintf("n%d", i), UserID: &u, URL: &nurl, TS: at, Raw: []byte(`{}`)})
		}
		return events, []Quarantined{{ID: fmt.Sprintf("late-%d", i), SiteID: "s", Payload: []byte(`{}`), Errors: `[]`, AnonID: "d1"}}
	}

	const stopAtJob = 4 // b stops sending once a has begun this many erasure jobs
	jobs0 := a.hooks.eraseJobs.Load()
	sent := make(chan int, 1)
	stoppedAt := make(chan int64, 1)
	go func() {
		i := 0
		for ; a.hooks.eraseJobs.Load()-jobs0 < stopAtJob; i++ {
			events, dlq := batch(i, true)
			if _, err := b.Ingest(ctx, events, dlq, nil); err != nil {
				t.Error(err)
				break
			}
		}
		stoppedAt <- a.hooks.eraseJobs.Load() - jobs0
		sent <- i
	}()
	errs := make(chan error, 1000)
	var queued int
	a.hooks.eraseStep = func(*eraser, *eraseTx) {
		queued++
		queueIntake(a, queued, errs, "o")
	}
	site, _ := a.Site("s")
	counts, err := a.EraseSubject(ctx, Actor{Kind: ActorSystem}, site, Subject{UserID: "u"})
	if err != nil {
		t.Fatal(err)
	}
	stopped, n := <-stoppedAt, <-sent
	for range queued {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	total := a.hooks.eraseJobs.Load() - jobs0
	if total <= stopped {
		t.Fatalf("the erasure ran %d jobs, the other instance stopped sending after job %d: want the last job after it", total, stopped)
	}
	if n == 0 || counts.Events <= int64(3*perDevice) {
		t.Fatalf("got %d batches sent meanwhile and %d events erased, want some of the user's events sent during the erasure", n, counts.Events)
	}
	for i := range n {
		events, _ := batch(i, false)
		if _, err := ref.Ingest(ctx, events, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if left := userRowsLeft(t, a); left != "" {
		t.Fatalf("rows of the user left after the erasure:\n%s", left)
	}
	if got, want := siteState(t, a), siteState(t, ref); got != want {
		t.Fatalf("site after the erasure: got\n%s\nwant (never saw the user)\n%s", got, want)
	}
}

// userRowsLeft lists the rows of user u (devices d*, n*) left on site s.
func userRowsLeft(t *testing.T, db *DB) string {
	t.Helper()
	var out string
	for _, q := range []string{
		`SELECT 'events', anon_id FROM events WHERE site_id = 's' AND (anon_id LIKE 'd%' OR anon_id LIKE 'n%' OR user_id = 'u')`,
		`SELECT 'event_pages', path FROM event_pages WHERE path LIKE '/d%' OR path = '/new'`,
		`SELECT 'sessions', anon_id FROM sessions WHERE site_id = 's' AND (anon_id LIKE 'd%' OR anon_id LIKE 'n%' OR user_id = 'u')`,
		`SELECT 'dlq', id FROM dlq WHERE site_id = 's' AND (anon_id LIKE 'd%' OR user_id = 'u')`,
		`SELECT 'identity_links', anon_id FROM identity_links WHERE site_id = 's' AND user_id = 'u'`,
		`SELECT 'user_profiles', user_id FROM user_profiles WHERE site_id = 's'`,
		`SELECT 'daily_dimensions_slots', value FROM daily_dimensions_slots WHERE site_id = 's' AND (value LIKE '/d%' OR value = '/new' OR value LIKE 'd%.ref.test')`,
	} {
		rows, err := db.read.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var table, v string
			if err := rows.Scan(&table, &v); err != nil {
				t.Fatal(err)
			}
			out += table + " " + v + "\n"
		}
		rows.Close()
	}
	return out
}

// A row numbered below rows already committed may still be in another
// instance's transaction: an erasure waits, before its first job, until
// every transaction writing events, sessions or the DLQ when it began has
// ended, so that such a row of the subject is erased with the rest rather
// than committed after the walk passed it (docs/gdpr.md, On PostgreSQL).
func TestEraseSubjectWaitsForRowsInFlight(t *testing.T) {
	t.Parallel()
	onlyPostgres(t, "sequences are not commit-ordered across instances")
	ctx := context.Background()
	opts := testOptions(t, Options{Path: "in-flight.db"})
	db, err := Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	withSites(t, db, "s")
	f := &eraseFixture{t: t, db: db}
	f.send("a", nil, 3, false)

	other, err := sql.Open(engine.PGDriverName, opts.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	// The subject's event, numbered first; then another visitor's,
	// committed above it.
	if _, err := tx.Exec(`INSERT INTO events(id_text, site_id, type, ts, anon_id, raw, received_at)
		VALUES ('in-flight', 's', 'click', '2026-03-01T10:00:00.000Z', 'a', '\x7b7d', '2026-03-01T10:00:00.000Z')`); err != nil {
		t.Fatal(err)
	}
	f.send("v", nil, 1, false)

	var once sync.Once
	waiting := make(chan struct{})
	db.hooks.eraseSettleWaits = func() { once.Do(func() { close(waiting) }) }
	done := make(chan error, 1)
	site, _ := db.Site("s")
	go func() {
		_, err := db.EraseSubject(ctx, Actor{Kind: ActorSystem}, site, Subject{AnonID: "a"})
		done <- err
	}()
	var erased bool
	select {
	case <-waiting:
	case err := <-done:
		erased = true
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if !erased {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	var left int
	if err := db.read.QueryRow(`SELECT COUNT(*) FROM events WHERE site_id = 's' AND anon_id = 'a'`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("got %d events of the subject after the erasure, want 0 (the one in flight erased too)", left)
	}
}

// BenchmarkVacuumAfterErasure times the VACUUM that follows an erasure on
// PostgreSQL (eraseVacuum) on a site of TALLY_BENCH_EVENTS events (default
// 1,000,000, 50,000 visitors of 20 events each, seeded in SQL): each
// iteration erases one visitor, then vacuums. ns/op is the VACUUM alone;
// erase-ms/op the erasure's jobs before it (docs/gdpr.md).
func BenchmarkVacuumAfterErasure(b *testing.B) {
	onlyPostgres(b, "VACUUM after an erasure is PostgreSQL's")
	ctx := context.Background()
	db, err := openTestDB(b, ctx, Options{Path: "vacuum-bench.db"})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	withSites(b, db, "s")
	n := 1_000_000
	if v := os.Getenv("TALLY_BENCH_EVENTS"); v != "" {
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	for _, q := range []string{
		`INSERT INTO events(id_text, site_id, type, url, ts, anon_id, referrer, country, browser_text, raw, received_at, path, received_ms)
			SELECT '00000000-0000-4000-8000-' || lpad(i::text, 12, '0'), 's', 'pageview', 'https://a.test/p' || (i % 100),
				tally_ms_text(1767225600000 + i * 1000), 'a' || (i % 50000), 'https://ref.test/', 'DE', 'Chrome',
				decode(repeat('7b22782231', 40), 'hex'), tally_ms_text(1767225600000 + i * 1000), '/p' || (i % 100), 1767225600000 + i * 1000
			FROM generate_series(1, ?) i`,
		`INSERT INTO event_pages(seq, name, path) SELECT seq, NULL, path FROM events`,
		`VACUUM (ANALYZE) events, event_pages`,
	} {
		var args []any
		if strings.Contains(q, "?") {
			args = append(args, n)
		}
		if _, err := db.read.ExecContext(ctx, q, args...); err != nil {
			b.Fatal(err)
		}
	}
	var erase time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		start := time.Now()
		e := newEraser(db, "s", Subject{AnonID: fmt.Sprintf("a%d", i%50000)})
		for finished := false; !finished; {
			err := db.writer.doOwn(ctx, func(tx *writeTx) error {
				var err error
				finished, _, err = e.job(tx, func() bool { return false }, func(*eraseTx) error { return nil })
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		erase += time.Since(start)
		b.StartTimer()
		db.d.eraseVacuum(ctx, db)
	}
	b.ReportMetric(float64(erase.Milliseconds())/float64(b.N), "erase-ms/op")
}

// After an erasure on PostgreSQL, its VACUUM has run once over each table
// that held the subject's rows (eraseVacuum, docs/gdpr.md).
func TestEraseSubjectVacuumsItsTables(t *testing.T) {
	t.Parallel()
	onlyPostgres(t, "VACUUM after an erasure is PostgreSQL's")
	ctx := context.Background()
	db := openTest(t, "erase-vacuum.db")
	withSites(t, db, "s")
	f := &eraseFixture{t: t, db: db}
	f.send("a", nil, 5, false)
	f.send("v", nil, 2, false)
	counts := func() map[string]int64 {
		got := map[string]int64{}
		rows, err := db.read.QueryContext(ctx, `SELECT relname, vacuum_count FROM pg_stat_user_tables
			WHERE relname IN ('events', 'event_pages', 'sessions')`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			var n int64
			if err := rows.Scan(&name, &n); err != nil {
				t.Fatal(err)
			}
			got[name] = n
		}
		return got
	}
	before := counts()
	site, _ := db.Site("s")
	if _, err := db.EraseSubject(ctx, Actor{Kind: ActorSystem}, site, Subject{AnonID: "a"}); err != nil {
		t.Fatal(err)
	}
	after := counts()
	for _, table := range []string{"events", "event_pages", "sessions"} {
		if got, want := after[table], before[table]+1; got != want {
			t.Errorf("%s: got vacuum_count %d after the erasure, want %d", table, got, want)
		}
	}
}
