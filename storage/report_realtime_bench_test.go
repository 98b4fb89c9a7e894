package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// loadRecent stores n pageviews, all received at now, of site web (every
// other one) and site other, 3,000 visitors each, with a payload of about
// the benchmark's shape (docs/benchmarks.md).
func loadRecent(b *testing.B, n int, now time.Time) *DB {
	b.Helper()
	db, err := openTestDB(b, context.Background(), Options{Path: filepath.Join(b.TempDir(), "a.db"), Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	withSites(b, db, "web", "other")
	var batch []IngestEvent
	for i := range n {
		site := "web"
		if i%2 == 1 {
			site = "other"
		}
		url := fmt.Sprintf("https://example.test/p/%d", i%300)
		batch = append(batch, IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), SiteID: site, Type: "pageview",
			AnonID: fmt.Sprintf("visitor-%d", i%3000), URL: &url, TS: now.Add(-time.Duration(i%60) * time.Second),
			Raw: []byte(`{"type":"pageview","url":"` + url + `","properties":{"plan":"pro","n":12}}`), Credential: "site"})
		if len(batch) == 500 {
			if _, err := db.Ingest(context.Background(), batch, nil, nil); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	return db
}

// BenchmarkRealtimeVisitors reads the newest RealtimeMaxRows rows, all of
// them inside the window: a realtime answer's worst case.
func BenchmarkRealtimeVisitors(b *testing.B) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	db := loadRecent(b, RealtimeMaxRows, now)
	b.ResetTimer()
	for b.Loop() {
		n, err := db.RealtimeVisitors(context.Background(), "web", now.Add(-5*time.Minute), RealtimeMaxRows)
		if err != nil || n != 1500 {
			b.Fatalf("got %d, %v; want 1500 visitors", n, err)
		}
	}
}

// BenchmarkExportEvents reads the 100,000 events of one site's day, in
// pages, as the export does before encoding them.
func BenchmarkExportEvents(b *testing.B) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	db := loadRecent(b, 200_000, now)
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	b.ResetTimer()
	for b.Loop() {
		rows := 0
		err := db.ExportEvents(context.Background(), "web", day, day.AddDate(0, 0, 1), 0, func(page []ExportEvent) error {
			rows += len(page)
			return nil
		})
		if err != nil || rows != 100_000 {
			b.Fatalf("got %d rows, %v; want 100000", rows, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100_000, "ns/row")
}
