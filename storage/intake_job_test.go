package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// These tests guard the rules of intake_job.go: how merged intake runs
// fail and are retried, and when the newest-session memo may be trusted.

func TestMergedIngestIsolatesAFailingRequest(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	ctx := context.Background()
	release, running := make(chan struct{}), make(chan struct{})
	go db.writer.do(ctx, func(*writeTx) error { close(running); <-release; return nil })
	<-running // every request below queues behind this job and commits in one batch

	user := "u1"
	event := func(n int, traits string) IngestEvent {
		e := IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), SiteID: "s", Type: "pageview",
			AnonID: "a", TS: time.Date(2026, 1, 1, 10, n, 0, 0, time.UTC), Raw: []byte(`{}`)}
		if traits != "" {
			e.Type, e.UserID, e.Traits = "identify", &user, []byte(traits)
		}
		return e
	}
	requests := [][]IngestEvent{
		{event(1, ""), event(2, "")},
		{event(3, `{"broken`)}, // SQLite's json() refuses it: this request fails
		{event(4, `{"plan":"pro"}`)},
		{event(1, "")}, // a duplicate of the first request's event
	}
	// Queued here, one after the other, they keep their order.
	works := make([]*ingestWork, len(requests))
	jobs := make([]*job, len(requests))
	for i, evs := range requests {
		works[i], jobs[i] = db.ingestJob(evs, nil, nil)
		if err := db.writer.Enqueue(ctx, jobs[i], false); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	results := make([]IngestResult, len(requests))
	errs := make([]error, len(requests))
	for i, j := range jobs {
		if errs[i] = j.Wait(ctx); errs[i] == nil {
			results[i] = works[i].result()
		}
	}
	if errs[1] == nil {
		t.Fatal("the request with broken traits succeeded")
	}
	for _, i := range []int{0, 2, 3} {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
	}
	if results[0].Accepted != 2 || results[2].Accepted != 1 || results[3].Accepted != 0 || !results[3].Duplicate[0] {
		t.Fatalf("got %+v / %+v / %+v", results[0], results[2], results[3])
	}
	var events, sessions, count int
	db.read.QueryRow(`SELECT COUNT(*) FROM events`).Scan(&events)
	db.read.QueryRow(`SELECT COUNT(*), COALESCE(SUM(event_count), 0) FROM sessions`).Scan(&sessions, &count)
	if events != 3 || sessions != 1 || count != 3 {
		t.Fatalf("got %d events, %d sessions holding %d, want 3 events in 1 session", events, sessions, count)
	}
	var rollup, usage int
	db.read.QueryRow(`SELECT SUM(count) FROM daily_events`).Scan(&rollup)
	db.read.QueryRow(`SELECT SUM(accepted) FROM site_usage`).Scan(&usage)
	if rollup != 3 || usage != 3 || db.MonthlyAccepted("s") != 3 {
		t.Fatalf("got rollup %d, usage %d, in memory %d, want 3 each", rollup, usage, db.MonthlyAccepted("s"))
	}
}

// memoVisitor drives the intake of one visitor "v", event n at minute n,
// through the writer or through hand-made transactions.
type memoVisitor struct {
	t  *testing.T
	db *DB
	at time.Time
}

func newMemoVisitor(t *testing.T) *memoVisitor {
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	return &memoVisitor{t: t, db: db, at: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)}
}

func (v *memoVisitor) event(n int, traits string) []IngestEvent {
	e := IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), SiteID: "s", Type: "pageview",
		AnonID: "v", TS: v.at.Add(time.Duration(n) * time.Minute), Raw: []byte(`{}`)}
	if traits != "" {
		user := "u"
		e.Type, e.UserID, e.Traits = "identify", &user, []byte(traits)
	}
	return []IngestEvent{e}
}

// send stores event n through the writer, alone in its transaction.
func (v *memoVisitor) send(n int) {
	v.t.Helper()
	if _, err := v.db.Ingest(context.Background(), v.event(n, ""), nil, nil); err != nil {
		v.t.Fatal(err)
	}
}

// ingest is the intake job of event n; traits that SQLite's json()
// refuses make it fail.
func (v *memoVisitor) ingest(n int, traits string) *job {
	_, j := v.db.ingestJob(v.event(n, traits), nil, nil)
	return j
}

// erase is a job that deletes the visitor's sessions, as an erasure does.
func (v *memoVisitor) erase() *job {
	return v.db.writer.newJob(1, func(tx *writeTx) error {
		_, err := tx.Exec(`DELETE FROM sessions WHERE anon_id = 'v'`)
		return err
	})
}

// commit runs batch as one transaction, as the writer does with what is
// queued; the writer goroutine is idle meanwhile. It returns the jobs'
// errors.
func (v *memoVisitor) commit(batch ...*job) []error {
	v.db.writer.CommitNow(batch)
	errs := make([]error, len(batch))
	for i, j := range batch {
		errs[i] = j.Wait(context.Background())
	}
	return errs
}

// sessions counts the visitor's sessions and their events.
func (v *memoVisitor) sessions() (n, events int) {
	v.t.Helper()
	if err := v.db.read.QueryRow(`SELECT COUNT(*), COALESCE(SUM(event_count), 0) FROM sessions WHERE anon_id = 'v'`).Scan(&n, &events); err != nil {
		v.t.Fatal(err)
	}
	return n, events
}

// The newest-session memo is not trusted within, nor after, a transaction
// in which something else changed sessions (an erasure, say) between or
// after intake of the same visitor.
func TestSessionsAfterOtherWritesInTheSameCommit(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "it tests the sessions memo, which is off on PostgreSQL, by driving the writer from the test goroutine (the listener queues reloads on it at any time)")
	v := newMemoVisitor(t)
	commit := func(batch ...*job) {
		t.Helper()
		for _, err := range v.commit(batch...) {
			if err != nil {
				t.Fatal(err)
			}
		}
	}

	v.send(0)                                           // the memo now holds v's session
	commit(v.ingest(1, ""), v.erase(), v.ingest(2, "")) // 2 must not join the erased session
	v.send(3)                                           // in order: the memo would be used
	if n, events := v.sessions(); n != 1 || events != 2 {
		t.Fatalf("got %d sessions of %d events, want 1 of 2 (events 2 and 3)", n, events)
	}
	commit(v.ingest(4, ""), v.erase()) // the memo's entry from 4 is stale at commit
	v.send(5)
	if n, events := v.sessions(); n != 1 || events != 1 {
		t.Fatalf("got %d sessions of %d events, want 1 of 1 (event 5)", n, events)
	}
}

// A merged run that fails is rolled back and its jobs run again one by one:
// that transaction is not a whole intake run, so the memo, which still
// holds the session as before it, is not trusted afterwards.
func TestSessionsMemoAfterARetriedRun(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "it tests the sessions memo, which is off on PostgreSQL, by driving the writer from the test goroutine (the listener queues reloads on it at any time)")
	v := newMemoVisitor(t)
	v.send(0) // the memo now holds v's session of 1 event
	errs := v.commit(v.ingest(1, ""), v.ingest(2, `{"broken`))
	if errs[0] != nil || errs[1] == nil {
		t.Fatalf("got errors %v, want only the second job's", errs)
	}
	v.send(3) // in order: a stale memo would give v's session 2 events
	if n, events := v.sessions(); n != 1 || events != 3 {
		t.Fatalf("got %d sessions of %d events, want 1 of 3 (events 0, 1 and 3)", n, events)
	}
}

// The memo is what spares the usual in-order event a read of the sessions
// table: after a whole intake run, the visitor's next event reads no row;
// after any other transaction, it reads the visitor's newest session again
// (twice here: as the newest, and as one near the event).
func TestSessionsMemoSparesReads(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "the sessions memo is off on PostgreSQL: another instance may change a session")
	v := newMemoVisitor(t)
	read := func(send func()) int64 {
		before := v.db.hooks.sessionRowsRead.Load()
		send()
		return v.db.hooks.sessionRowsRead.Load() - before
	}
	other := v.db.writer.newJob(1, func(tx *writeTx) error {
		_, err := tx.Exec(`INSERT OR IGNORE INTO daily_salts(day, salt) VALUES ('2000-01-01', x'00')`)
		return err
	})
	steps := []struct {
		name string
		do   func()
		want int64
	}{
		{"first event", func() { v.send(0) }, 0},
		{"second event", func() { v.send(1) }, 0},
		{"after a restart of the memo", func() { v.db.intake.memo.clear(); v.send(2) }, 2},
		{"in order after a whole run", func() { v.send(3) }, 0},
		{"in a mixed transaction", func() { v.commit(other, v.ingest(4, "")) }, 2},
		{"after a mixed transaction", func() { v.send(5) }, 2},
		{"in order again", func() { v.send(6) }, 0},
	}
	for _, s := range steps {
		if got := read(s.do); got != s.want {
			t.Errorf("%s: got %d session rows read, want %d", s.name, got, s.want)
		}
	}
	if n, events := v.sessions(); n != 1 || events != 7 {
		t.Fatalf("got %d sessions of %d events, want 1 of 7", n, events)
	}
}

// Erasing a subject, deleting a site or resetting the data empties the
// memo when it commits, so the ids of visitors whose data went do not stay
// in memory until the next intake run.
func TestMemoForgetsErasedVisitors(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "the sessions memo is off on PostgreSQL: another instance may change a session")
	ctx := context.Background()
	sys := Actor{Kind: ActorSystem}
	tests := []struct {
		name string
		drop func(db *DB, ws *Workspace) error
	}{
		{"erasure", func(db *DB, ws *Workspace) error {
			site, _ := db.Site("s")
			_, err := db.EraseSubject(ctx, sys, site, Subject{AnonID: "a"})
			return err
		}},
		{"site delete", func(db *DB, ws *Workspace) error { return db.DeleteSite(ctx, sys, ws, "s") }},
		{"reset", func(db *DB, ws *Workspace) error { _, err := db.ResetData(ctx); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
			ws := withSites(t, db, "s")
			ev := IngestEvent{ID: "00000000-0000-4000-8000-000000000001", SiteID: "s", Type: "pageview",
				AnonID: "a", TS: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC), Raw: []byte(`{}`)}
			if _, err := db.Ingest(ctx, []IngestEvent{ev}, nil, nil); err != nil {
				t.Fatal(err)
			}
			if got := len(db.intake.memo.m); got != 1 {
				t.Fatalf("got %d visitors in the memo after one event, want 1", got)
			}
			if err := tt.drop(db, ws); err != nil {
				t.Fatal(err)
			}
			if got := len(db.intake.memo.m); got != 0 {
				t.Errorf("got %d visitors in the memo after the %s, want 0", got, tt.name)
			}
		})
	}
}
