package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// exportDB is a database whose clock (the events' received_at) the test
// sets, with sites web and other.
func exportDB(t *testing.T) (*DB, func(time.Time)) {
	t.Helper()
	var mu sync.Mutex
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	db, err := openTestDB(t, context.Background(), Options{Path: filepath.Join(t.TempDir(), "a.db"),
		Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	withSites(t, db, "web", "other")
	return db, func(t time.Time) { mu.Lock(); now = t; mu.Unlock() }
}

func exportEvent(n int, site string, ts time.Time, raw string) IngestEvent {
	return IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), SiteID: site, Type: "pageview",
		AnonID: fmt.Sprint("v", n%7), TS: ts, Raw: []byte(raw), Credential: "site"}
}

// An export is read in pages of at most ExportPageRows rows, and fewer when
// their payloads reach ExportPageBytes, in arrival order.
func TestExportEventsPages(t *testing.T) {
	t.Parallel()
	db, _ := exportDB(t)
	ctx := context.Background()
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var batch []IngestEvent
	for n := range 1200 {
		batch = append(batch, exportEvent(n, "web", day.Add(time.Duration(n)*time.Second), `{"properties":{"n":1}}`))
		if n%3 == 0 {
			batch = append(batch, exportEvent(10000+n, "other", day, `{}`))
		}
		if len(batch) >= 400 {
			if _, err := db.Ingest(ctx, batch, nil, nil); err != nil {
				t.Fatal(err)
			}
			batch = nil
		}
	}
	big := `{"properties":{"blob":"` + strings.Repeat("x", 300<<10) + `"}}`
	for n := range 30 {
		batch = append(batch, exportEvent(20000+n, "web", day, big))
	}
	if _, err := db.Ingest(ctx, batch, nil, nil); err != nil {
		t.Fatal(err)
	}
	var sizes []int
	var ids []string
	err := db.ExportEvents(ctx, "web", day, day.AddDate(0, 0, 1), 0, func(page []ExportEvent) error {
		sizes = append(sizes, len(page))
		for _, e := range page {
			ids = append(ids, e.ID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// 1,200 small rows and 30 of 300 KiB: 500, 500, then 200 small ones
	// and the big ones by 4 MiB (13 of them, the 14th reaching it).
	want := []int{500, 500, 214, 14, 2}
	if fmt.Sprint(sizes) != fmt.Sprint(want) {
		t.Errorf("got pages of %v rows, want %v", sizes, want)
	}
	for i, id := range ids[:1200] {
		if want := fmt.Sprintf("00000000-0000-4000-8000-%012d", i); id != want {
			t.Fatalf("row %d: got %s, want %s (arrival order)", i, id, want)
		}
	}
}

// The export starts at the first row received 25 hours before its first
// day: rows received earlier cannot hold a ts in the range
// (docs/query-api.md#export), so they are never read.
func TestExportEventsSkipsRowsReceivedBefore(t *testing.T) {
	t.Parallel()
	db, setNow := exportDB(t)
	ctx := context.Background()
	at := func(d, h int) time.Time { return time.Date(2026, 3, d, h, 0, 0, 0, time.UTC) }
	from := at(4, 0)
	for i, tt := range []struct{ received, ts time.Time }{
		{at(1, 12), from.Add(time.Hour)}, // impossible through intake: skipped
		{at(2, 22), from.Add(time.Hour)}, // received 26 h before: skipped
		{at(3, 0), from.Add(time.Hour)},  // 24 h before, ts a day ahead: in
		{at(3, 12), at(2, 0)},            // out of range by ts
		{at(4, 12), at(4, 11)},           // in
		{at(20, 12), at(4, 9)},           // back-dated, received long after: in
	} {
		setNow(tt.received)
		if _, err := db.Ingest(ctx, []IngestEvent{exportEvent(i, "web", tt.ts, `{}`)}, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	err := db.ExportEvents(ctx, "web", from, from.AddDate(0, 0, 1), 0, func(page []ExportEvent) error {
		for _, e := range page {
			got = append(got, e.ID[len(e.ID)-1:])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "2,4,5" {
		t.Errorf("got events %v, want 2,4,5", got)
	}
}
