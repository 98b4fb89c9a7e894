package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestMergedRunKeepsPerRowOutcomes: one merged run of four requests gives
// what storing their rows one by one gives, on both backends (on
// PostgreSQL the run's rows are written set-based, intake_rows_pg.go): an
// id sent again in a later request of the run is a duplicate, and one sent
// twice within a request too; an engagement after its pageview of an
// earlier request of the run is added to it; the last of two DLQ rows of
// one id wins; two page URLs that PostgreSQL stores as one text
// (invalid UTF-8) add up in one rollup row there instead of failing the
// run; the events keep the run's order in seq.
func TestMergedRunKeepsPerRowOutcomes(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	ctx := context.Background()
	release, running := make(chan struct{}), make(chan struct{})
	go db.writer.do(ctx, func(*writeTx) error { close(running); <-release; return nil })
	<-running // every request below queues behind this job and commits in one batch

	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	pageview := func(n int, anon, url string) IngestEvent {
		return IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), SiteID: "s", Type: "pageview",
			AnonID: anon, URL: &url, TS: t0.Add(time.Duration(n) * time.Second), Raw: []byte(`{}`)}
	}
	engagement := pageview(100, "a", "https://s.example/x")
	engagement.Type, engagement.Engagement = "engagement", &Engagement{ScrollDepth: 40, EngagedMS: 1500}
	quarantined := func(payload string) Quarantined {
		return Quarantined{ID: "q1", SiteID: "s", Payload: []byte(payload), Errors: `[]`, AnonID: "a", Endpoint: "/v1/events"}
	}
	type request struct {
		events []IngestEvent
		dlq    []Quarantined
	}
	requests := []request{
		{events: []IngestEvent{pageview(1, "a", "https://s.example/x"), pageview(2, "b", "https://s.example/\xff")}},
		{events: []IngestEvent{pageview(1, "a", "https://s.example/x"), engagement, pageview(3, "c", "https://s.example/y"),
			pageview(3, "c", "https://s.example/y")}},
		{dlq: []Quarantined{quarantined(`{"first":1}`), quarantined(`{"second":2}`)}},
		{events: []IngestEvent{pageview(4, "d", "https://s.example/\xfe")}},
	}
	works := make([]*ingestWork, len(requests))
	jobs := make([]*job, len(requests))
	for i, r := range requests {
		works[i], jobs[i] = db.ingestJob(r.events, r.dlq, nil)
		if err := db.writer.Enqueue(ctx, jobs[i], false); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	for i, j := range jobs {
		if err := j.Wait(ctx); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	for i, want := range []struct {
		accepted int
		dup      string
	}{{2, "[false false]"}, {2, "[true false false true]"}, {0, "[]"}, {1, "[false]"}} {
		r := works[i].result()
		if r.Accepted != want.accepted || fmt.Sprint(r.Duplicate) != want.dup {
			t.Errorf("request %d: got %d accepted, duplicates %v, want %d, %s", i, r.Accepted, r.Duplicate, want.accepted, want.dup)
		}
	}
	rows, err := db.read.Query(`SELECT anon_id FROM events ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	var order string
	for rows.Next() {
		var a string
		rows.Scan(&a)
		order += a
	}
	rows.Close()
	if order != "abcd" {
		t.Errorf("events in seq order: got visitors %q, want %q", order, "abcd")
	}
	var engaged int64
	if err := db.read.QueryRow(`SELECT COALESCE(engaged_ms, 0) FROM events WHERE anon_id = 'a'`).Scan(&engaged); err != nil {
		t.Fatal(err)
	}
	if engaged != 1500 {
		t.Errorf("engaged ms of a's pageview: got %d, want 1500", engaged)
	}
	var payload string
	if err := db.read.QueryRow(`SELECT payload FROM dlq WHERE id = 'q1'`).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	if payload != `{"second":2}` {
		t.Errorf("DLQ payload: got %s, want the second", payload)
	}
	var pages, events int
	if err := db.read.QueryRow(`SELECT COALESCE(SUM(count), 0) FROM daily_dimensions WHERE dimension = 'url'`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if err := db.read.QueryRow(`SELECT COALESCE(SUM(count), 0) FROM daily_events`).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if pages != 4 || events != 4 {
		t.Errorf("rollups: got %d pages and %d events, want 4 and 4", pages, events)
	}
}
