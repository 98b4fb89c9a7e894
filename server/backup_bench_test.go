package server

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tally-analytics/tally/storage"
)

// Run with:
//
//	go test ./server -run '^$' -bench Backup -benchtime 1x
//
// BenchmarkBackup loads BenchmarkReads' 1,000,000 events (about a minute),
// then, while single events arrive at a steady 2,000/s (each its own
// commit: the load that grows the WAL fastest), measures the largest WAL
// file seen (every 10 ms) over three phases of equal interest: the load
// alone for 10 s, an online backup (DB.Backup, steps on the write
// connection), and VACUUM INTO from a connection of its own (one snapshot
// held for the whole copy), which is what the steps avoid. Last, the
// backup API from a connection of its own (BackupFile), which other
// connections' commits restart.
func BenchmarkBackup(b *testing.B) {
	onlySQLite(b, "the backup copies SQLite's pages")
	dir := b.TempDir()
	path := filepath.Join(dir, "backup.db")
	db, err := openTestDB(b, context.Background(), storage.Options{Path: path})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ws, _ := db.CreateWorkspace(context.Background(), storage.Actor{Kind: storage.ActorSystem}, "Bench", "bench")
	db.CreateSite(context.Background(), storage.Actor{Kind: storage.ActorSystem}, ws, "bench", "Bench")
	t0 := time.Now()
	loadReadsFixture(b, db, nil)
	b.Logf("loaded %d events in %s", benchEvents, time.Since(t0).Round(time.Second))
	if fi, err := os.Stat(path); err == nil {
		b.Logf("database file %.0f MiB", float64(fi.Size())/(1<<20))
	}

	// Steady load: 2,000 single events a second from 8 senders.
	var sent atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			tick := time.NewTicker(4 * time.Millisecond) // 250/s each
			defer tick.Stop()
			url := "https://shop.example/p/1"
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				anon := fmt.Sprintf("live-%d-%d", w, i%500)
				e := storage.IngestEvent{ID: uuid.NewString(), SiteID: "bench", Type: "pageview", AnonID: anon, URL: &url,
					TS: benchEnd.Add(time.Duration(i) * time.Millisecond), Raw: []byte(`{"type":"pageview"}`),
					Browser: "Chrome", OS: "Windows", DeviceType: "desktop", Country: "DE"}
				if _, err := db.Ingest(context.Background(), []storage.IngestEvent{e}, nil, nil); err == nil {
					sent.Add(1)
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()

	// maxWAL runs fn while sampling the WAL file's size; it returns the
	// largest seen and fn's duration.
	maxWAL := func(fn func()) (int64, time.Duration) {
		var biggest atomic.Int64
		done := make(chan struct{})
		go func() {
			for {
				if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > biggest.Load() {
					biggest.Store(fi.Size())
				}
				select {
				case <-done:
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		}()
		start := time.Now()
		fn()
		took := time.Since(start)
		close(done)
		return biggest.Load(), took
	}
	mib := func(n int64) float64 { return float64(n) / (1 << 20) }
	// The WAL file keeps the length of its longest run (loading the
	// fixture made it long), so each phase starts from a truncated WAL:
	// its size then shows how far that phase made it grow.
	own, err := sql.Open("sqlite", storage.FileURI(path)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		b.Fatal(err)
	}
	defer own.Close()
	truncate := func() {
		if _, err := own.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			b.Fatal(err)
		}
	}

	truncate()
	base, _ := maxWAL(func() { time.Sleep(10 * time.Second) })
	b.Logf("load alone, 10 s: largest WAL %.0f MiB, %d events sent", mib(base), sent.Load())

	var stats storage.BackupStats
	truncate()
	n0 := sent.Load()
	online, took := maxWAL(func() {
		if stats, err = db.Backup(context.Background(), filepath.Join(dir, "copy.db"), false); err != nil {
			b.Fatal(err)
		}
	})
	b.Logf("online backup: %.1f s, %.0f MiB in %d steps, %d restarts; largest WAL %.0f MiB; %d events ingested meanwhile (%.0f/s)",
		took.Seconds(), mib(stats.Bytes), stats.Steps, stats.Restarts, mib(online), sent.Load()-n0, float64(sent.Load()-n0)/took.Seconds())

	truncate()
	n0 = sent.Load()
	vacuum, took2 := maxWAL(func() {
		if _, err := own.Exec(`VACUUM INTO ?`, filepath.Join(dir, "vacuum.db")); err != nil {
			b.Fatal(err)
		}
	})
	b.Logf("VACUUM INTO: %.1f s; largest WAL %.0f MiB; %d events ingested meanwhile", took2.Seconds(), mib(vacuum), sent.Load()-n0)
	// The backup API from a connection of its own, as `tally backup`
	// without a server does: every commit of the load restarts it.
	ownStats, ownErr := storage.BackupFile(context.Background(), path, filepath.Join(dir, "own.db"), false)
	b.Logf("backup from a connection of its own: %v after %d steps, %d restarts", ownErr, ownStats.Steps, ownStats.Restarts)
	b.ReportMetric(took.Seconds(), "backup_s")
	b.ReportMetric(mib(online), "backup_wal_max_MiB")
	b.ReportMetric(mib(base), "load_wal_max_MiB")
	b.ReportMetric(mib(vacuum), "vacuum_into_wal_max_MiB")
}
