package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// The realtime count reads the newest rows backwards and stops at the
// first received before the cut, or after maxRows rows, whatever lies
// beyond.
func TestRealtimeVisitorsStopsAtTheCut(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(t time.Time) { mu.Lock(); now = t; mu.Unlock() }
	db, err := openTestDB(t, context.Background(), Options{Path: filepath.Join(t.TempDir(), "a.db"), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	withSites(t, db, "web", "other")
	ctx := context.Background()
	n := 0
	send := func(site, anon string) {
		t.Helper()
		n++
		e := IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), SiteID: site, Type: "pageview", AnonID: anon,
			TS: clock(), Raw: []byte(`{}`), Credential: "site"}
		if _, err := db.Ingest(ctx, []IngestEvent{e}, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	base := now
	send("web", "a")                 // received at base
	set(base.Add(-10 * time.Minute)) // a clock stepped back: an older row after it
	send("web", "b")
	set(base)
	send("web", "c")
	send("other", "d")
	send("web", "c")
	send("web", "e")

	tests := []struct {
		name    string
		maxRows int
		want    int
	}{
		{"stops at b, the first row before the cut: a is not read", 100, 2}, // c, e
		{"at most two rows: e and c", 2, 2},
		{"at most one row", 1, 1},
		{"the other site's row is read but not counted", 4, 2},
	}
	for _, tt := range tests {
		got, err := db.RealtimeVisitors(ctx, "web", base.Add(-5*time.Minute), tt.maxRows)
		if err != nil {
			t.Fatal(err)
		}
		if got != tt.want {
			t.Errorf("%s: got %d visitors, want %d", tt.name, got, tt.want)
		}
	}
	if got, _ := db.RealtimeVisitors(ctx, "web", base.Add(-20*time.Minute), 100); got != 4 {
		t.Errorf("cut before every row: got %d visitors, want 4 (a, b, c, e)", got)
	}
}
