package storage

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Run with:
//
//	go test ./storage -run '^$' -bench SourcemapWriterJobs -benchtime 3x
//
// BenchmarkSourcemapWriterJobs uploads a 25 MiB sourcemap, and deletes a
// release of ten such maps, while a probe submits empty writer jobs one
// after another; it reports the longest a probe waited for its commit, an
// upper bound of the longest writer job (the probe may also wait for the
// one queued before it): how long the map held up every site's intake;
// and the longest time between the ends of two of the sourcemap's own
// jobs, which leaves out the writer's checkpoints between jobs (a delete
// of 250 MiB with secure_delete writes that much WAL, which the writer
// copies into the database when it passes 64 MiB).
func BenchmarkSourcemapWriterJobs(b *testing.B) {
	onlySQLite(b, "measures SQLite's checkpoints")
	const size = 25 << 20
	ctx := context.Background()
	open := func(b *testing.B) (*DB, *Site) {
		db, err := openTestDB(b, ctx, Options{Path: filepath.Join(b.TempDir(), "bench.db")})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		sys := Actor{Kind: ActorSystem}
		ws, err := db.CreateWorkspace(ctx, sys, "Bench", "bench")
		if err != nil {
			b.Fatal(err)
		}
		site, err := db.CreateSite(ctx, sys, ws, "web", "Bench")
		if err != nil {
			b.Fatal(err)
		}
		return db, site
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	b.Run("upload_25MiB", func(b *testing.B) {
		db, site := open(b)
		var longest time.Duration
		own := ownJobs(db)
		for i := range b.N {
			own.start()
			stop := probeWriter(db)
			if err := upsertBench(db, site, fmt.Sprint(i), "app.js", data); err != nil {
				b.Fatal(err)
			}
			longest = max(longest, stop())
			own.stop()
		}
		b.ReportMetric(float64(longest.Microseconds())/1000, "longest_job_ms")
		b.ReportMetric(float64(own.longest.Microseconds())/1000, "longest_own_job_ms")
	})
	b.Run("delete_release_10x25MiB", func(b *testing.B) {
		db, site := open(b)
		var longest time.Duration
		own := ownJobs(db)
		for i := range b.N {
			b.StopTimer()
			release := fmt.Sprint(i)
			for f := range 10 {
				if err := upsertBench(db, site, release, fmt.Sprintf("f%d.js", f), data); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := db.ckpt.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			own.start()
			stop := probeWriter(db)
			if _, _, err := db.DeleteSourcemaps(ctx, Actor{Kind: ActorSystem}, site, release, ""); err != nil {
				b.Fatal(err)
			}
			longest = max(longest, stop())
			own.stop()
		}
		b.ReportMetric(float64(longest.Microseconds())/1000, "longest_job_ms")
		b.ReportMetric(float64(own.longest.Microseconds())/1000, "longest_own_job_ms")
	})
}

// jobGaps measures the longest time between the ends of two sourcemap
// jobs (or from start to the first) while it is on.
type jobGaps struct {
	on      bool
	last    time.Time
	longest time.Duration
}

func ownJobs(db *DB) *jobGaps {
	g := &jobGaps{}
	db.hooks.sourcemapJobBytes = func(int64) {
		if g.on {
			g.longest = max(g.longest, time.Since(g.last))
			g.last = time.Now()
		}
	}
	return g
}

func (g *jobGaps) start() { g.on, g.last = true, time.Now() }
func (g *jobGaps) stop()  { g.on = false }

// probeWriter submits empty writer jobs one after another until the
// returned stop is called, which gives the longest wait of one of them.
func probeWriter(db *DB) (stop func() time.Duration) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var longest time.Duration
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			start := time.Now()
			if err := db.writer.do(context.Background(), func(*writeTx) error { return nil }); err != nil {
				return
			}
			longest = max(longest, time.Since(start))
		}
	}()
	return func() time.Duration {
		close(done)
		wg.Wait()
		return longest
	}
}

func upsertBench(db *DB, site *Site, release, file string, data []byte) error {
	return db.UpsertSourcemap(context.Background(), site, release, file, [][]byte{data}, SourcemapLimits{})
}
