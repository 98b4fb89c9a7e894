package storage

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// Run with a database of before migration 0021, such as BenchmarkReads'
// kept by an earlier release (TALLY_BENCH_KEEP_DB=/tmp/pre.db):
//
//	TALLY_BENCH_PRE0021_DB=/tmp/pre.db go test ./storage -run '^$' -bench EventPagesBackfill -benchtime 1x
//
// BenchmarkEventPagesBackfill copies it, opens the copy (applying 0021),
// then runs the event pages backfill chunk by chunk as the server does
// (TALLY_BENCH_CHUNK events a job, eventPagesChunk unless set), and
// reports the time of each writer job (queue, insert and commit) and the
// largest WAL. TALLY_BENCH_OUT=PATH keeps the backfilled copy at PATH.
func BenchmarkEventPagesBackfill(b *testing.B) {
	onlySQLite(b, "backfills an old SQLite layout")
	src := os.Getenv("TALLY_BENCH_PRE0021_DB")
	if src == "" {
		b.Skip("set TALLY_BENCH_PRE0021_DB to a database of before migration 0021")
	}
	chunk := eventPagesChunk
	if n, err := strconv.Atoi(os.Getenv("TALLY_BENCH_CHUNK")); err == nil && n > 0 {
		chunk = n
	}
	for b.Loop() {
		path := os.Getenv("TALLY_BENCH_OUT")
		if path == "" {
			path = filepath.Join(b.TempDir(), "pre.db")
		}
		if err := copyFile(src, path); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		db, err := openTestDB(b, context.Background(), Options{Path: path, eventPagesChunk: -1})
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("open, migration 0021 included: %s", time.Since(t0).Round(time.Millisecond))
		var jobs []time.Duration
		var n, wal int64
		start := time.Now()
		for {
			k, done, err := db.backfillEventPages(context.Background(), chunk, func(d time.Duration) { jobs = append(jobs, d) })
			if err != nil {
				b.Fatal(err)
			}
			n += k
			wal = max(wal, db.DiskUsage().WALBytes)
			if done {
				break
			}
		}
		took := time.Since(start)
		db.Close()
		if len(jobs) == 0 {
			b.Fatal("no backfill: the database is not of before 0021")
		}
		slices.Sort(jobs)
		q := func(d []time.Duration, p float64) time.Duration {
			return d[int(float64(len(d)-1)*p)].Round(10 * time.Microsecond)
		}
		b.Logf("backfilled %d events in %s (%d jobs of %d): writer job p50 %s, p99 %s, max %s; largest WAL %.1f MiB",
			n, took.Round(time.Millisecond), len(jobs), chunk, q(jobs, .5), q(jobs, .99), q(jobs, 1), float64(wal)/(1<<20))
	}
}
