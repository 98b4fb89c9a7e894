package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// Run with:
//
//	go test ./storage -run '^$' -bench DeleteSiteRollups -benchtime 3x
//
// BenchmarkDeleteSiteRollups deletes a site holding 1,000,000 distinct urls
// in its rollups (written with SQL, untimed), what a client who knows the
// site id can send, and reports the longest writer job of the delete (as
// the longest time between the ends of two jobs, an upper bound): how long
// it held up every other site's intake.
func BenchmarkDeleteSiteRollups(b *testing.B) {
	onlySQLite(b, "measures SQLite's checkpoints")
	const urls = 1_000_000
	db, err := openTestDB(b, context.Background(), Options{Path: filepath.Join(b.TempDir(), "bench.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	sys := Actor{Kind: ActorSystem}
	ws, err := db.CreateWorkspace(ctx, sys, "Bench", "bench")
	if err != nil {
		b.Fatal(err)
	}
	var longest time.Duration
	var last time.Time
	jobs, finalSeen := 0, false
	db.hooks.siteDeleteJob = func(_ string, _ int64, final bool) {
		if final && finalSeen { // the final job reports each table
			return
		}
		finalSeen = final
		jobs++
		longest = max(longest, time.Since(last))
		last = time.Now()
	}
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		site := fmt.Sprintf("site-%d", i)
		if err := db.writer.do(ctx, func(tx *writeTx) error {
			_, err := tx.Exec(`WITH RECURSIVE k(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM k WHERE n + 1 < ?)
				INSERT INTO daily_dimensions(site_id, day, dimension, value, count)
				SELECT ?, '2026-11-01', 'url', 'https://shop.example/products/item-' || n, 1 FROM k`, urls, site)
			return err
		}); err != nil {
			b.Fatal(err)
		}
		// Copied into the database file now, not by the checkpoints
		// during the delete; the next commit, creating the site, then
		// starts the WAL over (and syncs its header).
		if _, err := db.ckpt.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			b.Fatal(err)
		}
		if _, err := db.CreateSite(ctx, sys, ws, site, "Bench"); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		last, finalSeen = time.Now(), false
		if err := db.DeleteSite(ctx, sys, ws, site); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(longest.Microseconds())/1000, "longest_job_ms")
	b.ReportMetric(float64(jobs)/float64(b.N), "jobs/op")
}
