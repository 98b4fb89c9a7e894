package storage

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestFunnelKeptUntilItsDaysChange: a funnel of a closed range is kept in
// the report cache and served again, until a late event in its range, an
// erasure or a retention purge changes its days; a funnel of other steps
// or filters, or of a range not closed yet, is computed.
func TestFunnelKeptUntilItsDaysChange(t *testing.T) {
	t.Parallel()
	db, clk, _ := openPartialsDB(t)
	url := func(p string) *string { u := "https://shop.test" + p; return &u }
	ev := func(id, anon, typ, path string, ts time.Time) IngestEvent {
		return IngestEvent{ID: id, SiteID: "s", Type: typ, AnonID: anon, TS: ts, URL: url(path), Raw: []byte(`{}`), Country: "DE"}
	}
	day := partialsStart.AddDate(0, 0, 10)
	ingestBatches(t, db, []IngestEvent{
		ev("1", "a", "pageview", "/pricing", day.Add(9*time.Hour)),
		ev("2", "a", "signup", "/signup", day.Add(9*time.Hour+time.Minute)),
		ev("3", "b", "pageview", "/pricing", day.Add(10*time.Hour)),
		ev("4", "c", "pageview", "/pricing", day.Add(11*time.Hour)),
	})
	steps := []Goal{{PagePath: "/pricing"}, {EventName: "signup"}}
	fq := FunnelQuery{Site: "s", From: partialsStart, To: partialsStart.AddDate(0, 0, 14), Zone: time.UTC, Steps: steps}
	run := func(q FunnelQuery) (string, bool) {
		t.Helper()
		hits := cacheHits(db)
		counts, err := db.Funnel(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(counts), cacheHits(db) > hits
	}
	check := func(stage string, q FunnelQuery, want string, wantKept bool) {
		t.Helper()
		if got, kept := run(q); got != want || kept != wantKept {
			t.Errorf("%s: got %s (kept answer %v), want %s (kept answer %v)", stage, got, kept, want, wantKept)
		}
	}
	check("first", fq, "[3 1]", false)
	check("again", fq, "[3 1]", true)
	other := fq
	other.Steps = []Goal{{PagePath: "/pricing"}, {EventName: "signup"}, {EventName: "purchase"}}
	check("other steps", other, "[3 1 0]", false)
	filtered := fq
	filtered.Filters = []QueryFilter{{Op: "is", Dim: "visit:country", Values: []string{"FR"}}}
	check("a filter", filtered, "[0 0]", false)

	// b signs up late, within its visit.
	ingestBatches(t, db, []IngestEvent{ev("5", "b", "signup", "/signup", day.Add(10*time.Hour+time.Minute))})
	check("late event", fq, "[3 2]", false)
	check("late event, again", fq, "[3 2]", true)

	site, _ := db.Site("s")
	if _, err := db.EraseSubject(context.Background(), Actor{Kind: ActorSystem}, site, Subject{AnonID: "a"}); err != nil {
		t.Fatal(err)
	}
	check("erased", fq, "[2 1]", false)

	// Keep 5 days: the cut (2026-03-15) is after every event.
	if _, err := db.Purge(context.Background(), 5); err != nil {
		t.Fatal(err)
	}
	check("purged", fq, "[0 0]", false)

	// A range that ends less than a session gap ago is computed each time.
	open := fq
	open.To = clk.Now().Add(-time.Minute)
	check("open range", open, "[0 0]", false)
	check("open range, again", open, "[0 0]", false)
}

// cacheHits is how many answers the report cache has served.
func cacheHits(db *DB) int {
	db.reports.mu.Lock()
	defer db.reports.mu.Unlock()
	return db.reports.hits
}
