package server

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tally-analytics/tally/storage"
)

// Run with:
//
//	go test ./server -run '^$' -bench WriterFairness -benchtime 2500x
//
// BenchmarkWriterFairness sends single events of site "bench" at a steady
// 500/s (b.N requests over keep-alive connections, as BenchmarkIngest does)
// while another site's heavy writer job runs again and again
// (one every fairnessEvery), and reports the p99 and the maximum latency of
// site bench's requests: how long one job can hold up everyone else's
// intake. Each case of fairnessCases prepares its own heavy job; "none" is
// the baseline.
func BenchmarkWriterFairness(b *testing.B) {
	onlySQLite(b, "loads the SQLite file through a connection of its own")
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(400)) // as main does
	}
	for _, c := range fairnessCases {
		b.Run(c.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "bench.db")
			bt, db := startCollectorAt(b, path)
			defer bt.close()
			var heavy func(ctx context.Context, i int) error
			if c.setup != nil {
				heavy = c.setup(b, db, path, bt.url)
			}
			ctx, stop := context.WithCancel(context.Background())
			var jobs []time.Duration
			var wg sync.WaitGroup
			if heavy != nil {
				wg.Add(1)
				go func() {
					defer wg.Done()
					start := time.Now()
					for i := 0; ctx.Err() == nil; i++ {
						// Paced, so that old and new code run as many
						// jobs; one that overruns starts the next at once.
						select {
						case <-ctx.Done():
							return
						case <-time.After(time.Until(start.Add(time.Duration(i) * fairnessEvery))):
						}
						t0 := time.Now()
						if err := heavy(ctx, i); err != nil && ctx.Err() == nil {
							b.Errorf("heavy job: %v", err)
							return
						}
						jobs = append(jobs, time.Since(t0))
					}
				}()
			}
			lat, el := load(b, bt.url, b.N, 1, 500)
			stop()
			wg.Wait()
			report(b, bt, lat, el, b.N)
			b.ReportMetric(percentile(lat, 1), "max_ms")
			b.ReportMetric(float64(len(jobs))/el.Seconds(), "heavy_jobs/s")
			b.ReportMetric(percentile(jobs, 0.50), "heavy_p50_ms")
		})
	}
}

// fairnessCases are the heavy jobs BenchmarkWriterFairness runs beside
// site bench's intake. setup prepares the data on db (whose file is path;
// url is the collector's) and returns the job; the benchmark calls it with i = 0, 1, 2, ... until
// the load ends. A case with no setup is the baseline.
// fairnessEvery is how often a heavy job starts.
const fairnessEvery = 100 * time.Millisecond

var fairnessCases = []struct {
	name  string
	setup func(b *testing.B, db *storage.DB, path, url string) func(ctx context.Context, i int) error
}{
	{"none", nil},
	{"out_of_order_100k_sessions", outOfOrderVisitor},
	{"site_delete_many_rollup_rows", rollupHeavySites},
	{"track_batches_one_user", segmentBatches("track", 1, false)},
	{"identify_batches_one_user", segmentBatches("identify", 1, false)},
	{"identify_batches_400_users_at_cap", segmentBatches("identify", 400, true)},
}

// segmentBatches gives another workspace a site "heavy" and returns a
// job that posts one Segment /v1/batch of 2,500 messages of type typ
// (about 430 KB) to it over HTTP, one request at a time. Identifies are
// what issue 29 found stalling the writer: they name `users` users,
// round robin, and give each 3 new traits (the i-th job's own names); a
// track of the same shape carries them as properties instead, the
// yardstick of what such a stream of requests costs other tenants
// without profiles. With atCap each user's profile is first filled to
// about 31 KB (900 traits, stored in the jobs JobLength cuts, or one job
// of 500 events before it existed).
func segmentBatches(typ string, users int, atCap bool) func(b *testing.B, db *storage.DB, path, url string) func(ctx context.Context, i int) error {
	return func(b *testing.B, db *storage.DB, _, url string) func(ctx context.Context, i int) error {
		b.Helper()
		sys := storage.Actor{Kind: storage.ActorSystem}
		ws, err := db.CreateWorkspace(context.Background(), sys, "Abuser", "abuser")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := db.CreateSite(context.Background(), sys, ws, "heavy", "Heavy"); err != nil {
			b.Fatal(err)
		}
		if atCap {
			var full strings.Builder
			full.WriteString("{")
			for k := range 900 {
				if k > 0 {
					full.WriteByte(',')
				}
				fmt.Fprintf(&full, `"k%03d":"%023d"`, k, k)
			}
			full.WriteString("}")
			evs := make([]storage.IngestEvent, users)
			for u := range evs {
				user := fmt.Sprint("user-", u)
				evs[u] = storage.IngestEvent{ID: uuid.NewString(), SiteID: "heavy", Type: "identify", AnonID: "anon-" + user, UserID: &user,
					Traits: []byte(full.String()), TS: time.Now(), Raw: []byte(`{}`)}
			}
			for len(evs) > 0 {
				n := min(len(evs), 500)
				n = storage.JobLength(evs, n)
				if _, err := db.Ingest(context.Background(), evs[:n], nil, nil); err != nil {
					b.Fatal(err)
				}
				evs = evs[n:]
			}
		}
		client := &http.Client{}
		auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("heavy:"))
		return func(ctx context.Context, i int) error {
			var body bytes.Buffer
			body.WriteString(`{"batch":[`)
			for k := range segmentMaxBatch {
				if k > 0 {
					body.WriteByte(',')
				}
				// user_id too: the benchmark's tracking plan requires it of
				// an identify.
				user := fmt.Sprint("user-", k%users)
				field := "traits"
				if typ == "track" {
					field = `event":"Order Completed","properties`
				}
				fmt.Fprintf(&body, `{"type":%q,"userId":%q,"user_id":%q,"messageId":"%d-%d","%s":{"j%d_%d_a":"%s","j%d_%d_b":%d,"j%d_%d_c":true}}`,
					typ, user, user, i, k, field, i, k, strings.Repeat("v", 20), i, k, k, i, k)
			}
			body.WriteString(`]}`)
			req, err := http.NewRequestWithContext(ctx, "POST", url+"/v1/batch", &body)
			if err != nil {
				return err
			}
			req.Header.Set("Authorization", auth)
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			io.Copy(io.Discard, resp.Body)
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("heavy batch: status %d", resp.StatusCode)
			}
			return nil
		}
	}
}

// outOfOrderVisitor gives site "heavy" a visitor with 100,000 sessions, 50
// minutes apart (written with SQL: through intake it would take a while),
// and returns a job that stores one event of that visitor at a time far
// before its newest session, each joining a different old session.
func outOfOrderVisitor(b *testing.B, db *storage.DB, path, _ string) func(ctx context.Context, i int) error {
	b.Helper()
	const sessions = 100_000
	const spacing = 50 * time.Minute
	base := time.Date(2016, 1, 1, 0, 0, 0, 0, time.UTC)
	ws, ok := db.Workspace("bench")
	if !ok {
		b.Fatal("no workspace bench")
	}
	if _, err := db.CreateSite(context.Background(), storage.Actor{Kind: storage.ActorSystem}, ws, "heavy", "Heavy"); err != nil {
		b.Fatal(err)
	}
	op, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		b.Fatal(err)
	}
	defer op.Close()
	if _, err := op.Exec(`WITH RECURSIVE k(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM k WHERE n + 1 < ?)
		INSERT INTO sessions(site_id, anon_id, start_text, end_text, start_ms, duration_ms, event_count)
		SELECT 'heavy', 'heavy-visitor', '', '', ms, 0, 1 FROM (SELECT (unixepoch(?) + n * ? * 60) * 1000 AS ms FROM k)`,
		sessions, base.Format("2006-01-02 15:04:05"), int(spacing/time.Minute)); err != nil {
		b.Fatal(err)
	}
	// Copied into the database file now, not by the checkpoints during
	// the measurement.
	if _, err := op.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		b.Fatal(err)
	}
	return func(ctx context.Context, i int) error {
		k := (i * 7919) % (sessions - 1) // spread over the visitor's history
		ts := base.Add(time.Duration(k)*spacing + 5*time.Minute)
		_, err := db.Ingest(ctx, []storage.IngestEvent{{ID: uuid.NewString(), SiteID: "heavy", Type: "pageview",
			AnonID: "heavy-visitor", TS: ts, Raw: []byte(`{}`)}}, nil, nil)
		return err
	}
}

// rollupHeavySites gives as many sites as the load can delete ("heavy-0",
// "heavy-1", ...) 20,000 distinct urls and 2,000 event types each in the
// rollups (written with SQL), and returns a job that deletes site heavy-i.
func rollupHeavySites(b *testing.B, db *storage.DB, path, _ string) func(ctx context.Context, i int) error {
	b.Helper()
	const urls, types = 20_000, 2_000
	sites := b.N/500*int(time.Second/fairnessEvery) + 10 // one job per fairnessEvery
	sys := storage.Actor{Kind: storage.ActorSystem}
	ws, ok := db.Workspace("bench")
	if !ok {
		b.Fatal("no workspace bench")
	}
	for i := range sites {
		if _, err := db.CreateSite(context.Background(), sys, ws, fmt.Sprintf("heavy-%d", i), "Heavy"); err != nil {
			b.Fatal(err)
		}
	}
	op, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		b.Fatal(err)
	}
	defer op.Close()
	for _, q := range []struct {
		sql string
		n   int
	}{
		{`INSERT INTO daily_dimensions(site_id, day, dimension, value, count)
			SELECT 'heavy-' || s.n, '2026-11-01', 'url', 'https://shop.example/products/item-' || k.n, 1 FROM s, k`, urls},
		{`INSERT INTO daily_events(site_id, day, type, count) SELECT 'heavy-' || s.n, '2026-11-01', 'custom-' || k.n, 1 FROM s, k`, types},
	} {
		if _, err := op.Exec(`WITH RECURSIVE s(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM s WHERE n + 1 < ?),
			k(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM k WHERE n + 1 < ?) `+q.sql, sites, q.n); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := op.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		b.Fatal(err)
	}
	return func(ctx context.Context, i int) error {
		if i >= sites { // not reached at 500 requests/s
			<-ctx.Done()
			return nil
		}
		return db.DeleteSite(ctx, sys, ws, fmt.Sprintf("heavy-%d", i))
	}
}
