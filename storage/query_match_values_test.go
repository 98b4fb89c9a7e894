package storage

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestMatchesReadOneDimensionInRange: on PostgreSQL, where matches
// filters list their dimension's values, a query with many patterns on a
// dimension reads that dimension's values once, and only those of the
// range, not the site's whole history; the answers stay those of
// SQLite's tally_match (a visit starting in the range holds events
// after it, which session metrics test).
func TestMatchesReadOneDimensionInRange(t *testing.T) {
	t.Parallel()
	db, _, _ := openPartialsDB(t)
	if db.d.matchList("x") == "" {
		t.Skip("SQLite matches in SQL (tally_match): there is no list to read")
	}
	day := func(d, h, m int) time.Time { return time.Date(2026, 3, d, h, m, 0, 0, time.UTC) }
	var events []IngestEvent
	add := func(anon, page, plan string, ts time.Time) {
		u := "https://shop.test" + page
		events = append(events, IngestEvent{ID: fmt.Sprint("e", len(events)), SiteID: "s", Type: "pageview", AnonID: anon, TS: ts,
			URL: &u, Country: "DE", Raw: []byte(`{"properties":{"plan":"` + plan + `"}}`)})
	}
	// Outside the range: 200 pages and plans of their own.
	for i := range 200 {
		add(fmt.Sprint("old", i), fmt.Sprintf("/old/%d", i), fmt.Sprint("old", i), day(1+i%3, 10, i%60))
	}
	// The range is March 5: a's visit runs past its end, to /late.
	add("a", "/in/a", "pro", day(5, 23, 50))
	add("a", "/late", "pro", day(6, 0, 5))
	add("b", "/in/b", "free", day(5, 12, 0))
	ingestBatches(t, db, events)

	var pages []string
	for i := range 19 {
		pages = append(pages, fmt.Sprintf("^/nothing/%d$", i))
	}
	q := StatsQuery{Site: "s", From: day(5, 0, 0), To: day(6, 0, 0), Zone: time.UTC, scan: true,
		Metrics: []string{MetricVisitors, MetricVisitDuration},
		Filters: []QueryFilter{
			{Op: "matches", Dim: "event:page", Values: append(pages, "^/late$")},
			{Op: "matches", Dim: "visit:country", Values: []string{"^D"}},
			{Op: "matches_not", Dim: "event:props:plan", Values: []string{"^free$"}},
		}}
	reads, values := db.hooks.matchReads.Load(), db.hooks.matchValues.Load()
	rows, err := db.Stats(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	// No event of the range is on /late, but a's visit of 15 minutes,
	// which starts in it, holds one.
	if got, want := rowsText(rows), []string{": [0 900]"}; !slices.Equal(got, want) {
		t.Errorf("got rows %v, want %v", got, want)
	}
	if got := db.hooks.matchReads.Load() - reads; got != 3 {
		t.Errorf("got %d reads of values for 3 dimensions of 22 patterns, want 3", got)
	}
	// Pages /in/a, /in/b, /late; country DE; plans pro and free.
	if got := db.hooks.matchValues.Load() - values; got != 6 {
		t.Errorf("got %d values read, want the range's 6", got)
	}
}
