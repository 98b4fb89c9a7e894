package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

func BenchmarkZZSingle(b *testing.B) {
	db, err := Open(context.Background(), Options{Path: filepath.Join(b.TempDir(), "a.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	sys := Actor{Kind: ActorSystem}
	ws, _ := db.CreateWorkspace(ctx, sys, "T", "t")
	db.CreateSite(ctx, sys, ws, "s", "s")
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		at = at.Add(37 * time.Millisecond)
		u := fmt.Sprintf("https://shop.test/p/%d", i%300)
		e := IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), SiteID: "s", Type: "pageview",
			AnonID: fmt.Sprintf("v-%d", i%20000), URL: &u, TS: at, Country: "DE", Browser: "Chrome", OS: "Windows", DeviceType: "desktop",
			Raw: []byte(`{"id":"x","properties":{"title":"A page"}}`)}
		t0 := time.Now()
		if _, err := db.Ingest(ctx, []IngestEvent{e}, nil, nil); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50_us")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99_us")
}
