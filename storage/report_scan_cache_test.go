package storage

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestFilteredScanKeptUntilItsDaysChange: a report filtered on two
// dimensions over closed days is answered from the report cache until a
// visit or event of its range, or of a visit running into it, changes: a
// late event in the range, a late event that changes the country of a
// visit that started before the range, an erasure; events of another day
// leave it cached. Every answer is the scan's.
func TestFilteredScanKeptUntilItsDaysChange(t *testing.T) {
	t.Parallel()
	db := filterFixture(t)
	n := 0
	event := func(anon, country, page string, ts time.Time) IngestEvent {
		n++
		u := "https://shop.test" + page
		return IngestEvent{ID: fmt.Sprint("late", n), SiteID: "s", Type: "pageview", AnonID: anon, TS: ts, URL: &u, Country: country, Raw: []byte(`{}`)}
	}
	// g's visit starts before the range (03-02 23:50, in France) and runs
	// into it (03-03 00:10 on /blog/g).
	ingestBatches(t, db, []IngestEvent{event("g", "FR", "/", time.Date(2026, 3, 2, 23, 50, 0, 0, time.UTC)),
		event("g", "FR", "/blog/g", time.Date(2026, 3, 3, 0, 10, 0, 0, time.UTC))})
	q := StatsQuery{Site: "s", From: time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 3, 6, 0, 0, 0, 0, time.UTC), Zone: time.UTC,
		Metrics: []string{MetricVisitors, MetricPageviews},
		Filters: []QueryFilter{{Op: "is", Dim: "visit:country", Values: []string{"DE"}}, page("contains", "/blog")}}
	ask := func(stage, want string, cached bool) {
		t.Helper()
		hits := db.reports.hitCount()
		for _, scan := range []bool{false, true} {
			q.scan = scan
			rows, err := db.Stats(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(rows); got != want {
				t.Errorf("%s (scan %v): got %s, want %s", stage, scan, got, want)
			}
		}
		if got := db.reports.hitCount() > hits; got != cached {
			t.Errorf("%s: got from the cache %v, want %v", stage, got, cached)
		}
	}
	// c's /blog/a on 03-04 and d's; b's /Blog/C does not contain /blog.
	ask("first", "[{[] [2 2]}]", false)
	ask("again", "[{[] [2 2]}]", true)
	ingestBatches(t, db, []IngestEvent{event("x", "DE", "/blog/x", time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC))})
	ask("another day's event", "[{[] [2 2]}]", true)
	ingestBatches(t, db, []IngestEvent{event("y", "DE", "/blog/y", time.Date(2026, 3, 5, 9, 0, 0, 0, time.UTC))})
	ask("late event in the range", "[{[] [3 3]}]", false)
	ask("again", "[{[] [3 3]}]", true)
	// g's visit now starts in Germany, before the range: its /blog/g
	// passes.
	ingestBatches(t, db, []IngestEvent{event("g", "DE", "/", time.Date(2026, 3, 2, 23, 40, 0, 0, time.UTC))})
	ask("visit before the range changed", "[{[] [4 4]}]", false)
	site, _ := db.Site("s")
	if _, err := db.EraseSubject(context.Background(), Actor{Kind: ActorSystem}, site, Subject{AnonID: "d"}); err != nil {
		t.Fatal(err)
	}
	ask("erasure", "[{[] [3 3]}]", false)
	ask("again", "[{[] [3 3]}]", true)
}
