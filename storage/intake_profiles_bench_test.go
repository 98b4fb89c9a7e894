package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Run with:
//
//	go test ./storage -run '^$' -bench IdentifyJob -benchtime 40x
//
// BenchmarkIdentifyJob times one intake writer job (Ingest), the writer's
// share of a request, for the jobs a 2,500-message Segment batch of
// identifies is cut into (JobLength), beside a job of 500 pageviews, the
// most a native request holds: the jobs a request's identifies make must
// cost the writer about what that does
// (docs/benchmarks.md#writer-fairness). It reports the median and the
// longest job, the process's CPU time per job, and the request's time in
// all jobs (request_ms; 500 events for pageviews_500): identifies of 2,500
// users take more jobs than before, however small their profiles.
func BenchmarkIdentifyJob(b *testing.B) {
	cases := []struct {
		name  string
		users int
		atCap bool
		typ   string
	}{
		{"pageviews_500", 500, false, "pageview"},
		{"identifies_one_user_3_new_traits", 1, false, "identify"},
		{"identifies_400_users_at_cap", 400, true, "identify"},
		{"identifies_2500_users", 2500, false, "identify"},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			db, err := openTestDB(b, context.Background(), Options{Path: filepath.Join(b.TempDir(), "a.db"), Durability: DurabilityProcess})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			withSites(b, db, "s")
			ctx := context.Background()
			seq := 0
			store := func(evs []IngestEvent, each func(time.Duration)) {
				for len(evs) > 0 {
					n := JobLength(evs, 500)
					t0 := time.Now()
					if _, err := db.Ingest(ctx, evs[:n], nil, nil); err != nil {
						b.Fatal(err)
					}
					if each != nil {
						each(time.Since(t0))
					}
					evs = evs[n:]
				}
			}
			if c.atCap {
				full := `{` + members("k", 0, 900, `"`+strings.Repeat("0", 23)+`"`) + `}`
				store(benchIdentifies(&seq, c.users, c.users, "identify", func(int) string { return full }), nil)
			}
			var jobs []time.Duration
			var all time.Duration
			cpu0 := cpuTime()
			b.ResetTimer()
			for i := range b.N {
				evs := benchIdentifies(&seq, 2500, c.users, c.typ, func(k int) string {
					return fmt.Sprintf(`{"j%d_a":"%s","j%d_b":%d,"j%d_c":true}`, k, strings.Repeat("v", 20), k, i, k)
				})
				if c.typ == "pageview" {
					evs = evs[:500]
				}
				store(evs, func(d time.Duration) { jobs = append(jobs, d); all += d })
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(len(jobs)), "cpu_ms/job")
			b.ReportMetric(float64(len(jobs))/float64(b.N), "jobs/request")
			b.ReportMetric(float64(all.Microseconds())/1000/float64(b.N), "request_ms")
			b.ReportMetric(durationPercentile(jobs, 0.5), "p50_ms")
			b.ReportMetric(durationPercentile(jobs, 1), "max_ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// benchIdentifies is identifies with type typ instead.
func benchIdentifies(seq *int, n, users int, typ string, traits func(k int) string) []IngestEvent {
	evs := identifies(seq, n, users, traits)
	for i := range evs {
		evs[i].Type = typ
	}
	return evs
}

// cpuTime is the process's user and system time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// durationPercentile is the p-th percentile of ds in milliseconds.
func durationPercentile(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[min(len(s)-1, int(p*float64(len(s))))].Microseconds()) / 1000
}
