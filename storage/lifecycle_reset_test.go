package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Resetting one site deletes its collected data in jobs of at most a
// chunk each, keeps its sourcemaps and webhook secrets (not collected
// data) and every row of the other site, and forgets its quota count.
func TestResetSiteDataBoundsEveryJob(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	ctx := context.Background()
	withSites(t, db, "big", "other")
	fillSite(t, db, "big", 3_000, 1_500, 10)
	fillSite(t, db, "other", 30, 3, 1)
	events := make([]IngestEvent, 0, 3*siteDeleteChunk)
	for i := range cap(events) {
		site := []string{"big", "big", "other"}[i%3]
		user := fmt.Sprintf("u%d", i%40)
		events = append(events, IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), SiteID: site, Type: "pageview",
			AnonID: fmt.Sprintf("v%d", i%40), UserID: &user, TS: time.Date(2026, 3, 1, 10, 0, i, 0, time.UTC), Raw: []byte(`{}`)})
	}
	if _, err := db.Ingest(ctx, events, nil, nil); err != nil {
		t.Fatal(err)
	}
	if db.MonthlyAccepted("big") == 0 {
		t.Fatal("got no quota count before the reset, so the test cannot show it goes")
	}
	want := siteRowCounts(t, db, "big")
	others := siteRowCounts(t, db, "other")
	chunks := map[string]int64{}
	for _, table := range siteDataTables {
		chunks[table.table] = int64(table.chunk)
	}
	jobs := map[string]int{}
	db.hooks.siteDeleteJob = func(table string, rows int64, _ bool) {
		jobs[table]++
		if rows > chunks[table] {
			t.Errorf("got a job deleting %d rows of %s, want at most %d", rows, table, chunks[table])
		}
	}
	deleted, err := db.ResetSiteData(ctx, "big")
	db.hooks.siteDeleteJob = nil
	if err != nil {
		t.Fatal(err)
	}
	if jobs["events"] < 2 || jobs["daily_dimensions"] < 3 {
		t.Errorf("got %d jobs for events and %d for daily_dimensions, want the work chunked", jobs["events"], jobs["daily_dimensions"])
	}
	got := siteRowCounts(t, db, "big")
	for table, n := range got {
		kept := !slices.Contains(resetTables, table)
		switch {
		case kept && n != want[table]:
			t.Errorf("got %d rows of %s, want its %d kept", n, table, want[table])
		case !kept && n != 0:
			t.Errorf("got %d rows of %s left, want 0", n, table)
		case !kept && deleted[table] != int64(want[table]):
			t.Errorf("got %d rows of %s reported deleted, want %d", deleted[table], table, want[table])
		}
	}
	if after := siteRowCounts(t, db, "other"); fmt.Sprint(after) != fmt.Sprint(others) {
		t.Errorf("got the other site's rows %v, want %v", after, others)
	}
	if n := db.MonthlyAccepted("big"); n != 0 {
		t.Errorf("got a quota count of %d after the reset, want 0", n)
	}
}
