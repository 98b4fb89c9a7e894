package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tally-analytics/tally/internal/dbtest"
)

// credentialOf reads the credential of event n as operators do, through
// the view, and as stored.
func credentialOf(t *testing.T, db *DB, n int) (view, stored string) {
	t.Helper()
	err := db.read.QueryRow(`SELECT COALESCE(c.credential, '<null>'), CASE WHEN e.credential IS NULL THEN '<null>' ELSE CAST(e.credential AS TEXT) END
		FROM events e JOIN event_credentials c USING (seq) WHERE e.id = ?`, credentialEventID(n)).Scan(&view, &stored)
	if err != nil {
		t.Fatalf("event %d: %v", n, err)
	}
	return view, stored
}

func credentialEventID(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }

// Events store a credential as a short code (docs/storage.md#event-bytes); the
// view event_credentials reads every row's credential as text, rows of
// before migration 0019 included.
func TestCredentialCodes(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	ctx := context.Background()
	event := func(n int, cred string) IngestEvent {
		return IngestEvent{ID: credentialEventID(n), SiteID: "s", Type: "pageview", AnonID: "a",
			TS: time.Date(2026, 1, 1, 10, n, 0, 0, time.UTC), Raw: []byte(`{}`), Credential: cred}
	}
	const key = "key:6f0c1e5a-8d3b-4b7e-9f21-0a2c4e6b8d10"
	if _, err := db.Ingest(ctx, []IngestEvent{event(1, "site"), event(2, key), event(3, "site"), event(4, "")}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Ingest(ctx, []IngestEvent{event(5, key), event(6, "internal")}, nil, nil); err != nil {
		t.Fatal(err)
	}
	// A row as migration 0019 found it: the credential's text. Only
	// SQLite had such rows; PostgreSQL's column is a code from the start.
	third := [2]string{"site", "1"}
	if !dbtest.Postgres() {
		execInWriter(t, db, `UPDATE events SET credential = 'key:older' WHERE id = '`+credentialEventID(3)+`'`)
		third = [2]string{"key:older", "key:older"}
	}
	for _, c := range []struct {
		n            int
		view, stored string
	}{
		{1, "site", "1"},
		{2, key, "2"},
		{3, third[0], third[1]},
		{4, "<null>", "<null>"},
		{5, key, "2"}, // the code of an earlier call
		{6, "internal", "3"},
	} {
		view, stored := credentialOf(t, db, c.n)
		if view != c.view || stored != c.stored {
			t.Errorf("event %d: got %q stored as %q, want %q stored as %q", c.n, view, stored, c.view, c.stored)
		}
	}
	var n int
	if err := db.read.QueryRow(`SELECT COUNT(*) FROM credentials`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("got %d credentials (%v), want 3", n, err)
	}
}

// A code made by a run that rolls back is not remembered: the request
// retried alone makes it again, so no event names a code that is not in
// the table.
func TestCredentialCodeAfterARolledBackRun(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	ctx := context.Background()
	release, running := make(chan struct{}), make(chan struct{})
	go db.writer.do(ctx, func(*writeTx) error { close(running); <-release; return nil })
	<-running // the requests below queue behind this job and run merged
	user := "u1"
	requests := [][]IngestEvent{
		{{ID: credentialEventID(1), SiteID: "s", Type: "pageview", AnonID: "a", TS: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC),
			Raw: []byte(`{}`), Credential: "key:first"}},
		// SQLite's json() refuses the traits: the merged run fails.
		{{ID: credentialEventID(2), SiteID: "s", Type: "identify", AnonID: "b", UserID: &user, Traits: []byte(`{"broken`),
			TS: time.Date(2026, 1, 1, 10, 1, 0, 0, time.UTC), Raw: []byte(`{}`), Credential: "key:second"}},
		{{ID: credentialEventID(3), SiteID: "s", Type: "pageview", AnonID: "c", TS: time.Date(2026, 1, 1, 10, 2, 0, 0, time.UTC),
			Raw: []byte(`{}`), Credential: "key:first"}},
	}
	jobs := make([]*job, len(requests))
	for i, evs := range requests {
		_, jobs[i] = db.ingestJob(evs, nil, nil)
		if err := db.writer.Enqueue(ctx, jobs[i], false); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	for i, j := range jobs {
		if err := j.Wait(ctx); (err != nil) != (i == 1) {
			t.Fatalf("request %d: got error %v", i, err)
		}
	}
	for _, n := range []int{1, 3} {
		if view, stored := credentialOf(t, db, n); view != "key:first" {
			t.Errorf("event %d: got %q stored as %q, want key:first", n, view, stored)
		}
	}
	var orphans int
	if err := db.read.QueryRow(`SELECT COUNT(*) FROM events e WHERE NOT EXISTS
		(SELECT 1 FROM credentials c WHERE c.code = e.credential)`).Scan(&orphans); err != nil || orphans != 0 {
		t.Fatalf("got %d events naming a missing code (%v), want 0", orphans, err)
	}
}
