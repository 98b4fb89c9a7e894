package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Run with:
//
//	go test ./storage -run '^$' -bench IngestCPU -benchtime 300x
//
// BenchmarkIngestCPU stores batches of 100 events in order (60% pageviews,
// every event with a referrer and a URL with utm_source, 20,000 recurring
// visitors) through Ingest, one batch at a time, with DURABILITY=process,
// after 50 batches of warm-up. Besides events/s it reports the process's
// CPU time per event (user and system), which a shared machine disturbs
// far less than wall time: compare builds by that, interleaved
// (docs/intake.md#visits).
func BenchmarkIngestCPU(b *testing.B) {
	db, err := openTestDB(b, context.Background(), Options{Path: filepath.Join(b.TempDir(), "a.db"), Durability: DurabilityProcess})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	sys := Actor{Kind: ActorSystem}
	ws, _ := db.CreateWorkspace(ctx, sys, "T", "t")
	db.CreateSite(ctx, sys, ws, "s", "s")
	rng := rand.New(rand.NewPCG(1, 2))
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	types := []string{"pageview", "pageview", "pageview", "click", "purchase"}
	n := 0
	mk := func() []IngestEvent {
		batch := make([]IngestEvent, 100)
		for i := range batch {
			n++
			at = at.Add(37 * time.Millisecond)
			u := fmt.Sprintf("https://shop.test/p/%d?utm_source=s%d", rng.IntN(300), rng.IntN(20))
			r := fmt.Sprintf("https://ref%d.test/x", rng.IntN(50))
			batch[i] = IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), SiteID: "s", Type: types[rng.IntN(5)],
				AnonID: fmt.Sprintf("v-%d", rng.IntN(20000)), URL: &u, Referrer: &r, TS: at, Country: "DE", City: "Berlin",
				Browser: "Chrome", OS: "Windows", DeviceType: "desktop",
				Raw: []byte(fmt.Sprintf(`{"id":"x","anon_id":"v","type":"pageview","url":%q,"properties":{"title":"A page","w":1440}}`, u))}
		}
		return batch
	}
	for range 50 { // warm up: visitors with sessions
		db.Ingest(ctx, mk(), nil, nil)
	}
	batches := make([][]IngestEvent, b.N)
	for i := range batches {
		batches[i] = mk()
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b.ResetTimer()
	c0 := cpu()
	t0 := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := db.Ingest(ctx, batches[i], nil, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*100)/time.Since(t0).Seconds(), "events/s")
	b.ReportMetric(float64((cpu()-c0).Microseconds())/float64(b.N*100), "cpu_us/event")
}
