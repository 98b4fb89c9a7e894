package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func TestMergedIngestIsolatesAFailingRequest(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	ctx := context.Background()
	release, running := make(chan struct{}), make(chan struct{})
	go db.writer.Do(ctx, func(*Tx) error { close(running); <-release; return nil })
	<-running // every Ingest below queues behind this job and commits in one batch

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
	results := make([]IngestResult, len(requests))
	errs := make([]error, len(requests))
	var wg sync.WaitGroup
	for i, evs := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = db.Ingest(ctx, evs, nil, nil)
		}()
		for db.writer.QueueLen() < i+1 {
			time.Sleep(time.Millisecond) // keep the queue order: request i is queued before i+1
		}
	}
	close(release)
	wg.Wait()
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

// Prune forgets expired dedup ids in chunks, so a long backlog is deleted
// whole while intake jobs can run between the chunks; fresh ids stay.
func TestPruneDeletesExpiredIdsInChunks(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	db, err := Open(context.Background(), Options{Path: filepath.Join(t.TempDir(), "a.db"), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	expired, fresh := 2*pruneChunk+17, 300
	err = db.writer.Do(ctx, func(tx *Tx) error {
		for i := range expired + fresh {
			at := now.Add(-DedupWindow - time.Minute).Add(time.Duration(i) * time.Millisecond)
			if i >= expired {
				at = now.Add(-DedupWindow + time.Minute)
			}
			if _, err := tx.Exec(`INSERT INTO event_ids(site_id, id, received_ms) VALUES ('s', ?, ?)`, fmt.Sprint(i), at.UnixMilli()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	var left, oldest int
	if err := db.read.QueryRow(`SELECT COUNT(*), MIN(CAST(id AS INTEGER)) FROM event_ids`).Scan(&left, &oldest); err != nil {
		t.Fatal(err)
	}
	if left != fresh || oldest != expired {
		t.Fatalf("got %d ids left from id %d, want %d from id %d", left, oldest, fresh, expired)
	}
}

// Events received just before a month ends may commit after a request of
// the new month rolled the quota book: they must not reset it.
func TestQuotaBookNeverRollsBack(t *testing.T) {
	var q quotaBook
	endOfMarch := time.Date(2026, 3, 31, 23, 59, 59, 0, time.UTC)
	q.roll("2026-03")
	q.commit(endOfMarch, map[string]int{"web": 5})
	q.roll("2026-04") // a request on April 1st
	q.commit(endOfMarch.Add(2*time.Second), map[string]int{"web": 2})
	q.commit(endOfMarch, map[string]int{"web": 7}) // March events committed late
	if q.month != "2026-04" || q.used["web"] != 2 {
		t.Fatalf("got month %s with %d used, want 2026-04 with 2", q.month, q.used["web"])
	}
}
