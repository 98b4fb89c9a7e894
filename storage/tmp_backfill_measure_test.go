package storage

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"
)

// Temporary measurement (not committed): the visit backfill of a copy of
// BenchmarkReads' database of before 0013.
func TestTmpBackfillMeasure(t *testing.T) {
	path := os.Getenv("TMP_PRE0013_DB")
	if path == "" {
		t.Skip()
	}
	t0 := time.Now()
	db, err := Open(context.Background(), Options{Path: path, visitBackfillChunk: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t.Logf("open with migration 0013: %s", time.Since(t0))
	var reads, writes []time.Duration
	var n int64
	start := time.Now()
	for {
		r0 := time.Now()
		c, err := db.readVisitChunk(context.Background(), visitBackfillChunk)
		if err != nil {
			t.Fatal(err)
		}
		if c == nil {
			break
		}
		reads = append(reads, time.Since(r0))
		w0 := time.Now()
		k, err := db.writeVisitChunk(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		writes = append(writes, time.Since(w0))
		n += k
	}
	total := time.Since(start)
	slices.Sort(reads)
	slices.Sort(writes)
	q := func(d []time.Duration, p float64) time.Duration { return d[int(float64(len(d)-1)*p)] }
	t.Logf("backfilled %d sessions in %s, %d chunks; read p50 %s p99 %s max %s; writer job p50 %s p99 %s max %s; WAL %d bytes",
		n, total, len(reads), q(reads, .5), q(reads, .99), q(reads, 1), q(writes, .5), q(writes, .99), q(writes, 1), db.DiskUsage().WALBytes)
}
