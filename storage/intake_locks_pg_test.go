package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// twoInstancesInput is the same visitors' events, in a shuffled order
// (timestamps out of order), each event twice (a redelivery), in batches.
func twoInstancesInput() [][]IngestEvent {
	r := rand.New(rand.NewPCG(17, 2))
	at := time.Date(2026, 3, 1, 23, 0, 0, 0, time.UTC)
	var events []IngestEvent
	for v := range 12 {
		for n := range 25 {
			url := fmt.Sprintf("https://example.com/p%d?q=%d", n%4, n)
			ts := at.Add(time.Duration(n*7+v) * time.Minute) // across midnight, with gaps of more than 30 minutes
			if n%9 == 8 {
				ts = ts.Add(3 * time.Hour)
			}
			e := IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%06d%06d", v, n), SiteID: "s", Type: "pageview",
				AnonID: fmt.Sprintf("v%d", v), TS: ts, URL: &url, Raw: []byte(`{"properties":{"n":` + fmt.Sprint(n) + `}}`)}
			if n%5 == 4 {
				e.Type = "signup"
			}
			events = append(events, e, e)
		}
	}
	r.Shuffle(len(events), func(i, j int) { events[i], events[j] = events[j], events[i] })
	var batches [][]IngestEvent
	for len(events) > 0 {
		n := min(1+r.IntN(6), len(events))
		batches = append(batches, events[:n])
		events = events[n:]
	}
	return batches
}

// twoInstancesAnswers is what the tables intake writes hold, as text.
func twoInstancesAnswers(t *testing.T, db *DB) map[string]string {
	t.Helper()
	queries := map[string]string{
		"events":     `SELECT count(*) FROM events`,
		"event_ids":  `SELECT count(*) FROM event_ids`,
		"sessions":   `SELECT site_id, anon_id, start_ms, duration_ms, event_count FROM sessions ORDER BY site_id, anon_id, start_ms`,
		"daily":      `SELECT site_id, day, type, count FROM daily_events ORDER BY site_id, day, type`,
		"visits":     `SELECT site_id, day, sessions, duration_ms, events, bounces FROM daily_sessions ORDER BY site_id, day`,
		"dimensions": `SELECT site_id, day, dimension, value, count FROM daily_dimensions ORDER BY site_id, day, dimension, value`,
		"usage":      `SELECT site_id, month, accepted FROM site_usage ORDER BY site_id, month`,
	}
	got := map[string]string{}
	for name, q := range queries {
		got[name] = queryText(t, db, q)
	}
	return got
}

// queryText is every row of q on db's read pool, a line each, its values
// as fmt prints them (bytes as text).
func queryText(t *testing.T, db *DB, q string) string {
	t.Helper()
	rows, err := db.read.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var b strings.Builder
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if s, ok := v.([]byte); ok {
				vals[i] = string(s)
			}
		}
		fmt.Fprintln(&b, vals...)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Two instances (two DBs in one process) on one PostgreSQL database, the
// same visitors' events split across both with redeliveries and
// out-of-order timestamps, several senders each: the sessions, rollups,
// usage and events equal a single SQLite run's, and no run lost a
// deadlock (docs/postgresql.md#on-postgresql).
func TestConcurrentIngestTwoDBs(t *testing.T) {
	t.Parallel()
	onlyPostgres(t, "two instances on one database")
	ctx := context.Background()
	batches := twoInstancesInput()

	lite := openSQLite(t, filepath.Join(t.TempDir(), "one.db"))
	withSites(t, lite, "s")
	for _, b := range batches {
		if _, err := lite.Ingest(ctx, b, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	want := twoInstancesAnswers(t, lite)

	opts := testOptions(t, Options{Path: ":memory:"})
	a, err := Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	withSites(t, a, "s")
	b, err := Open(ctx, opts) // after the site, which b loads at Open
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.pg.slot == b.pg.slot {
		t.Fatalf("got slot %d for both instances, want two slots", a.pg.slot)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(batches))
	const senders = 3
	for s := range 2 * senders {
		db := []*DB{a, b}[s%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := s; i < len(batches); i += 2 * senders {
				if _, err := db.Ingest(ctx, batches[i], nil, nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := twoInstancesAnswers(t, a)
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if got[n] != want[n] {
			t.Errorf("%s: got\n%s\nwant (SQLite, one instance)\n%s", n, got[n], want[n])
		}
	}
	if n := a.writer.Retries() + b.writer.Retries(); n != 0 {
		t.Errorf("got %d runs retried after a deadlock, want 0", n)
	}
}

// Two instances use new credentials for the first time at once, each in
// several runs: every credential gets one row and code, every event
// keeps its own, no run fails or is retried; a credential seen committed
// is locked no more (docs/postgresql.md#on-postgresql).
func TestConcurrentFirstCredentialUseTwoDBs(t *testing.T) {
	t.Parallel()
	onlyPostgres(t, "two instances on one database")
	ctx := context.Background()
	opts := testOptions(t, Options{Path: ":memory:"})
	a, err := Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	withSites(t, a, "s")
	b, err := Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const rounds, senders, perBatch = 40, 4, 3
	var wg sync.WaitGroup
	errs := make(chan error, rounds*senders)
	for r := range rounds {
		start := make(chan struct{})
		for s := range senders {
			db := []*DB{a, b}[s%2]
			var batch []IngestEvent
			for n := range perBatch {
				// Two new credentials per round, in both orders.
				cred := fmt.Sprintf("key:r%d-%d", r, (s/2+n)%2)
				batch = append(batch, IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%04d%04d%04d", r, s, n), SiteID: "s", Type: "pageview",
					AnonID: fmt.Sprintf("v%d-%d", s, n), TS: at, Credential: cred})
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if _, err := db.Ingest(ctx, batch, nil, nil); err != nil {
					errs <- err
				}
			}()
		}
		close(start)
		wg.Wait()
	}
	close(errs)
	for err := range errs {
		t.Fatalf("got %v, want every run stored", err)
	}
	var rows, distinct int
	if err := a.read.QueryRow(`SELECT count(*), count(DISTINCT credential) FROM credentials WHERE credential LIKE 'key:r%'`).Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != 2*rounds || distinct != 2*rounds {
		t.Errorf("got %d credential rows (%d distinct), want %d", rows, distinct, 2*rounds)
	}
	q, err := a.read.Query(`SELECT e.id_text, c.credential FROM events e LEFT JOIN event_credentials c ON c.seq = e.seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	events := 0
	for q.Next() {
		var id string
		var cred *string
		if err := q.Scan(&id, &cred); err != nil {
			t.Fatal(err)
		}
		events++
		var r, s, n int
		fmt.Sscanf(id[24:], "%4d%4d%4d", &r, &s, &n)
		if want := fmt.Sprintf("key:r%d-%d", r, (s/2+n)%2); cred == nil || *cred != want {
			t.Errorf("event %s: got credential %v, want %s", id, cred, want)
		}
	}
	if err := q.Err(); err != nil {
		t.Fatal(err)
	}
	if events != rounds*senders*perBatch {
		t.Errorf("got %d events, want %d", events, rounds*senders*perBatch)
	}
	if n := a.writer.Retries() + b.writer.Retries(); n != 0 {
		t.Errorf("got %d runs retried after a deadlock, want 0", n)
	}
	// A credential seen committed needs no lock again.
	for i, db := range []*DB{a, b} {
		e := IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-9000-%012d", i), SiteID: "s", Type: "pageview", AnonID: "late", TS: at, Credential: "key:r0-0"}
		if _, err := db.Ingest(ctx, []IngestEvent{e}, nil, nil); err != nil {
			t.Fatal(err)
		}
		if !db.d.(pgDialect).creds.known("key:r0-0") {
			t.Errorf("instance %d: got key:r0-0 unknown after a run found its row, want known", i)
		}
	}
}

// A batch that mixes intake with another job runs each run of intake in a
// savepoint of its own; the batch locks all their rows first, in the one
// global order. Otherwise the first run would hold its visitor while the
// second waits for another instance that holds the second's visitor and
// waits for the first's: a deadlock (docs/postgresql.md#on-postgresql).
func TestMixedBatchLocksInOneOrder(t *testing.T) {
	t.Parallel()
	onlyPostgres(t, "advisory locks of several instances")
	ctx := context.Background()
	db := openTest(t, ":memory:")
	withSites(t, db, "s")
	// lo's lock sorts before hi's: the other instance below takes them in
	// that order, as lockRun does.
	lo, hi := "v0", "v1"
	if runLockKey('v', "s", lo) > runLockKey('v', "s", hi) {
		lo, hi = hi, lo
	}
	other, err := db.read.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	otx, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer otx.Rollback()
	if _, err := otx.Exec(`SELECT pg_advisory_xact_lock($1)`, runLockKey('v', "s", lo)); err != nil {
		t.Fatal(err)
	}

	release, running := make(chan struct{}), make(chan struct{})
	go db.writer.do(ctx, func(*writeTx) error { close(running); <-release; return nil })
	<-running // the three jobs below queue behind this one and commit in one batch
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ingest := func(n int, anon string) *job {
		_, j := db.ingestJob([]IngestEvent{{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), SiteID: "s", Type: "pageview", AnonID: anon, TS: at}}, nil, nil)
		return j
	}
	jobs := []*job{ingest(1, hi), db.writer.newJob(1, func(*writeTx) error { return nil }), ingest(2, lo)}
	for _, j := range jobs {
		if err := db.writer.Enqueue(ctx, j, false); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	// Wait for the batch to wait for lo.
	for waiting := false; !waiting; {
		if err := db.read.QueryRow(`SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_database d ON d.oid = l.database
			WHERE d.datname = current_database() AND l.locktype = 'advisory' AND NOT l.granted)`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		runtime.Gosched()
	}
	if _, err := otx.Exec(`SELECT pg_advisory_xact_lock($1)`, runLockKey('v', "s", hi)); err != nil {
		t.Errorf("other instance: got %v, want hi's lock", err)
	}
	if err := otx.Commit(); err != nil {
		t.Fatal(err)
	}
	for i, j := range jobs {
		if err := j.Wait(ctx); err != nil {
			t.Errorf("job %d: got %v, want stored", i, err)
		}
	}
	var n int
	if err := db.read.QueryRow(`SELECT count(*) FROM events`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("got %d events, want 2", n)
	}
}

// An intake run writes its rollup tables in the order an erasure's
// unroll locks them (daily_events, then daily_dimensions): while another
// transaction holds a day's daily_events rows, as an unrolling erasure
// does, the run waits there holding none of that day's daily_dimensions
// rows, which the erasure locks next. PostgreSQL runs a statement's
// data-modifying WITHs in an order of its own; written in one statement
// without rollupsRows' chaining, the run locked the dimensions first and
// the two deadlocked.
func TestRollupsLockTablesInOrder(t *testing.T) {
	t.Parallel()
	onlyPostgres(t, "row locks between two transactions")
	ctx := context.Background()
	opts := testOptions(t, Options{Path: "rollups-order.db"})
	db, err := Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	withSites(t, db, "s")
	// The other instance's writer connection stands for the erasure's.
	other, err := Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	event := func(n int) IngestEvent {
		url := "https://a.test/p"
		return IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), SiteID: "s", Type: "pageview",
			AnonID: "v", URL: &url, TS: at.Add(time.Duration(n) * time.Minute), Raw: []byte(`{}`), Browser: "Firefox", Country: "FR"}
	}
	// The first event makes the slot rows that the second updates.
	if _, err := db.Ingest(ctx, []IngestEvent{event(0)}, nil, nil); err != nil {
		t.Fatal(err)
	}
	var dims int
	if err := db.write.QueryRowContext(ctx, `SELECT count(*) FROM daily_dimensions_slots WHERE site_id = 's' AND day = '2026-03-01'`).Scan(&dims); err != nil || dims == 0 {
		t.Fatalf("got %d daily_dimensions_slots rows (%v), want some", dims, err)
	}

	eraser, err := other.write.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer eraser.Rollback()
	if _, err := eraser.ExecContext(ctx, `SELECT 1 FROM daily_events_slots WHERE site_id = 's' AND day = '2026-03-01' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := db.Ingest(ctx, []IngestEvent{event(1)}, nil, nil)
		done <- err
	}()
	// Wait until the run waits on a row lock.
	for deadline := time.Now().Add(30 * time.Second); ; {
		var waiting int
		if err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'WITH r0 AS (INSERT INTO daily_events_slots%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the run ended (%v) without waiting for the held daily_events rows", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the run did not come to wait on a row lock within 30 s")
		}
		runtime.Gosched()
	}
	if _, err := eraser.ExecContext(ctx, `SET LOCAL lock_timeout = '1ms'`); err != nil {
		t.Fatal(err)
	}
	if _, err := eraser.ExecContext(ctx, `SELECT 1 FROM daily_dimensions_slots WHERE site_id = 's' AND day = '2026-03-01' FOR UPDATE`); err != nil {
		t.Errorf("locking the day's daily_dimensions rows while the run waits: got %v, want them free (the run took them before daily_events)", err)
	}
	eraser.Rollback()
	if err := <-done; err != nil {
		t.Errorf("the run after the other transaction ended: got %v, want it stored", err)
	}
}
