package storage

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkRetention measures docs/storage.md#retention: TALLY_BENCH_EVENTS
// events (default 200,000) of about 280 bytes of JSON over 90 days from
// 200,000 visitors, each day's arriving on that day (dedup ids pruned as
// the server does); then a purge of the older half (retention 45 days)
// while a probe keeps submitting writer jobs; then as many events again as
// were purged; then, the database closed, a vacuum. It reports the file
// size (database and WAL after a TRUNCATE checkpoint) at each step, the
// purge's time and the longest wait of a probe job, and the vacuum's time
// and the WAL's peak size during it.
func BenchmarkRetention(b *testing.B) {
	onlySQLite(b, "measures SQLite's pages and checkpoints")
	n, _ := strconv.Atoi(cmp.Or(os.Getenv("TALLY_BENCH_EVENTS"), "200000"))
	for range b.N {
		clk := &testClock{}
		ctx := context.Background()
		path := filepath.Join(b.TempDir(), "a.db")
		db, err := openTestDB(b, ctx, Options{Path: path, Now: clk.Now})
		if err != nil {
			b.Fatal(err)
		}
		clk.Set(retentionStart)
		ws, err := db.CreateWorkspace(ctx, Actor{Kind: ActorSystem}, "Bench", "bench")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := db.CreateSite(ctx, Actor{Kind: ActorSystem}, ws, "site", "site"); err != nil {
			b.Fatal(err)
		}
		perDay := n / 90
		seq := 0
		load := func(first time.Time, days int) {
			for d := range days {
				day := first.AddDate(0, 0, d)
				clk.Set(day.Add(23 * time.Hour))
				for start := 0; start < perDay; start += 500 {
					batch := make([]IngestEvent, 0, 500)
					for i := start; i < min(start+500, perDay); i++ {
						seq++
						visitor := seq * 7919 % 200000
						url := fmt.Sprintf("https://shop.example/products/%d", seq%500)
						ref := "https://www.google.com/"
						ts := day.Add(time.Duration(i) * 86400 * time.Second / time.Duration(perDay))
						raw := fmt.Sprintf(`{"id":"%08x-0000-4000-8000-%012d","site_id":"site","type":"pageview","anon_id":"visitor-%d","ts":"%s","url":"%s","referrer":"%s","properties":{"title":"Product page"}}`,
							seq, seq, visitor, ts.Format(time.RFC3339), url, ref)
						batch = append(batch, IngestEvent{ID: fmt.Sprintf("%08x-0000-4000-8000-%012d", seq, seq), SiteID: "site", Type: "pageview",
							AnonID: fmt.Sprintf("visitor-%d", visitor), URL: &url, Referrer: &ref, TS: ts, Raw: []byte(raw),
							Browser: "Chrome", OS: "Windows", DeviceType: "desktop", Country: "DE"})
					}
					if _, err := db.Ingest(ctx, batch, nil, nil); err != nil {
						b.Fatal(err)
					}
				}
				if err := db.Prune(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
		size := func() int64 {
			if _, err := db.ckpt.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
				b.Fatal(err)
			}
			return fileSizes(path)
		}
		load(retentionStart, 90)
		loaded := size()

		clk.Set(retentionStart.AddDate(0, 0, 89).Add(23 * time.Hour))
		var jobs []time.Duration
		db.hooks.purgeJob = func(_ string, _ int64, took time.Duration) { jobs = append(jobs, took) }
		stop := probeWriter(db)
		start := time.Now()
		res, err := db.Purge(ctx, 45)
		took := time.Since(start)
		longest := stop()
		db.hooks.purgeJob = nil
		if err != nil {
			b.Fatal(err)
		}
		slices.Sort(jobs)
		purged := size()
		var free int
		db.read.QueryRow(`PRAGMA freelist_count`).Scan(&free)
		// The vacuum runs on a copy of the purged file, so that the load
		// after it finds the freed pages.
		copyPath := filepath.Join(b.TempDir(), "copy.db")
		if err := copyFile(path, copyPath); err != nil {
			b.Fatal(err)
		}
		load(retentionStart.AddDate(0, 0, 90), 45)
		reloaded := size()
		db.Close()
		path = copyPath

		var walPeak atomic.Int64
		done := make(chan struct{})
		go func() {
			for {
				select {
				case <-done:
					return
				case <-time.After(5 * time.Millisecond):
				}
				if fi, err := os.Stat(path + "-wal"); err == nil {
					walPeak.Store(max(walPeak.Load(), fi.Size()))
				}
			}
		}()
		vac, err := Vacuum(ctx, path)
		close(done)
		if err != nil {
			b.Fatal(err)
		}
		mib := func(n int64) float64 { return float64(n) / (1 << 20) }
		b.Logf("purge: %d writer jobs, median %v, p99 %v, max %v", len(jobs), jobs[len(jobs)/2], jobs[len(jobs)*99/100], jobs[len(jobs)-1])
		b.Logf("%d events: %.1f MiB loaded; purge of %d events, %d sessions, %d dedup ids in %v, longest probe wait %v; "+
			"%.1f MiB after it (%d free pages); %.1f MiB after loading %d more; vacuum of the purged file %.1f -> %.1f MiB in %v, WAL peak %.1f MiB",
			seq-perDay*45, mib(loaded), res.Deleted["events"], res.Deleted["sessions"], res.Deleted["event_ids"], took.Round(time.Millisecond),
			longest.Round(time.Millisecond/10), mib(purged), free, mib(reloaded), perDay*45, mib(vac.Before), mib(vac.After),
			vac.Took.Round(time.Millisecond), mib(walPeak.Load()))
		b.ReportMetric(took.Seconds(), "purge-s")
		b.ReportMetric(float64(longest.Microseconds())/1000, "probe-max-ms")
		b.ReportMetric(mib(loaded), "loaded-MiB")
		b.ReportMetric(mib(reloaded), "reloaded-MiB")
		b.ReportMetric(vac.Took.Seconds(), "vacuum-s")
	}
}

// copyFile copies the database file from to to (its WAL is empty after a
// TRUNCATE checkpoint).
func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
