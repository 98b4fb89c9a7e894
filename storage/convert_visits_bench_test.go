package storage

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Run with a database of before migration 0013, such as BenchmarkReads'
// kept by an earlier release (TALLY_BENCH_KEEP_DB=/tmp/pre.db):
//
//	TALLY_BENCH_PRE0013_DB=/tmp/pre.db go test ./storage -run '^$' -bench VisitBackfill -benchtime 1x
//
// BenchmarkVisitBackfill copies it, opens the copy (applying 0013), then
// runs the visit backfill chunk by chunk as the server does, and reports
// the time of each chunk's read (off the writer) and of its writer job
// (queue, updates and commit), and the largest WAL.
func BenchmarkVisitBackfill(b *testing.B) {
	onlySQLite(b, "backfills an old SQLite layout")
	src := os.Getenv("TALLY_BENCH_PRE0013_DB")
	if src == "" {
		b.Skip("set TALLY_BENCH_PRE0013_DB to a database of before migration 0013")
	}
	for b.Loop() {
		path := filepath.Join(b.TempDir(), "pre.db")
		if err := copyFile(src, path); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		db, err := openTestDB(b, context.Background(), Options{Path: path, visitBackfillChunk: -1})
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("open, migration 0013 included: %s", time.Since(t0).Round(time.Millisecond))
		var reads, jobs []time.Duration
		var n, wal int64
		start := time.Now()
		for {
			r0 := time.Now()
			c, err := db.readVisitChunk(context.Background(), visitBackfillChunk)
			if err != nil {
				b.Fatal(err)
			}
			if c == nil {
				break
			}
			reads = append(reads, time.Since(r0))
			w0 := time.Now()
			k, err := db.writeVisitChunk(context.Background(), c)
			if err != nil {
				b.Fatal(err)
			}
			jobs = append(jobs, time.Since(w0))
			n += k
			wal = max(wal, db.DiskUsage().WALBytes)
		}
		took := time.Since(start)
		db.Close()
		if len(jobs) == 0 {
			b.Fatal("no backfill: the database is not of before 0013")
		}
		slices.Sort(reads)
		slices.Sort(jobs)
		q := func(d []time.Duration, p float64) time.Duration {
			return d[int(float64(len(d)-1)*p)].Round(10 * time.Microsecond)
		}
		b.Logf("backfilled %d sessions in %s (%d chunks): chunk read p50 %s, p99 %s, max %s; writer job p50 %s, p99 %s, max %s; largest WAL %.1f MiB",
			n, took.Round(time.Millisecond), len(jobs), q(reads, .5), q(reads, .99), q(reads, 1), q(jobs, .5), q(jobs, .99), q(jobs, 1), float64(wal)/(1<<20))
	}
}
