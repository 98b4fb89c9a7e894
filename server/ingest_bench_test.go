package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tally-analytics/tally/schema"
	"github.com/tally-analytics/tally/storage"
)

// Run with:
//
//	go test ./server -run '^$' -bench Ingest -benchtime 30000x
//
// Each sub-benchmark starts the real collector handler in a real
// http.Server on a temp database (WAL, tracking plan testdata/plan.json in
// reject mode) and posts unique events over keep-alive connections from
// benchConns goroutines, on the same cores as the server. b.N is the number
// of requests of the single cases; batch_100 sends b.N/10 requests. GC runs
// at GOGC=400, as main sets it. Reported: events/s, client-side p50/p99
// latency, and the server-side ingest time p99 (handler entry to return,
// what service_ingest_duration_seconds measures).
const benchConns = 64

// benchTarget is a running collector (or bare handler) with timing.
type benchTarget struct {
	url     string
	mu      sync.Mutex
	handler []time.Duration // server-side durations
	close   func()
}

func (bt *benchTarget) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		h.ServeHTTP(w, r)
		d := time.Since(t0)
		bt.mu.Lock()
		bt.handler = append(bt.handler, d)
		bt.mu.Unlock()
	})
}

func serveBench(b *testing.B, h http.Handler) *benchTarget {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	bt := &benchTarget{url: "http://" + ln.Addr().String()}
	srv := &http.Server{Handler: bt.wrap(h)}
	go srv.Serve(ln)
	bt.close = func() { srv.Close() }
	return bt
}

// startCollector starts the real collector on a temp database with one
// site "bench" and the example plan, in the durability mode named by
// TALLY_BENCH_DURABILITY (default power, as the server's), so that runs of
// both modes can be interleaved.
func startCollector(b *testing.B) (*benchTarget, *storage.DB) {
	b.Helper()
	return startCollectorAt(b, filepath.Join(b.TempDir(), "bench.db"))
}

// startCollectorAt is startCollector on the database file at path.
func startCollectorAt(b *testing.B, path string) (*benchTarget, *storage.DB) {
	b.Helper()
	durability, err := storage.ParseDurability(cmp.Or(os.Getenv("TALLY_BENCH_DURABILITY"), string(storage.DurabilityPower)))
	if err != nil {
		b.Fatal(err)
	}
	db, err := openTestDB(b, context.Background(), storage.Options{Path: path, Durability: durability})
	if err != nil {
		b.Fatal(err)
	}
	plan, err := schema.LoadPlan("../testdata/plan.json")
	if err != nil {
		b.Fatal(err)
	}
	srv := New(Config{Plan: plan, Logger: discardLogger()}, db)
	ws, err := db.CreateWorkspace(context.Background(), storage.Actor{Kind: storage.ActorSystem}, "Bench", "bench")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.CreateSite(context.Background(), storage.Actor{Kind: storage.ActorSystem}, ws, "bench", "Bench"); err != nil {
		b.Fatal(err)
	}
	bt := serveBench(b, srv.Collector())
	closeHTTP := bt.close
	bt.close = func() { closeHTTP(); db.Close() }
	return bt, db
}

var benchPaths = []string{"/", "/pricing", "/docs", "/blog/post-1", "/blog/post-2", "/signup", "/checkout"}

// benchEvent is a realistic event of about 400 bytes: a pageview (80%),
// a purchase or a click, from one of 20,000 recurring visitors.
func benchEvent(n int64) map[string]any {
	visitor := fmt.Sprintf("visitor-%05d", (n*7919)%20000)
	e := map[string]any{
		"id": uuid.NewString(), "site_id": "bench", "anon_id": visitor, "type": "pageview",
		"ts":       time.Now().UTC().Format(time.RFC3339Nano),
		"url":      "https://shop.example" + benchPaths[n%int64(len(benchPaths))] + "?utm_source=newsletter",
		"referrer": "https://search.example/?q=analytics",
		"properties": map[string]any{"title": "A page title of ordinary length", "width": 1440, "height": 900,
			"lang": "en-GB", "tz": "Europe/London", "build": "2026.11.3"},
	}
	switch n % 10 {
	case 8:
		e["type"] = "purchase"
		e["properties"] = map[string]any{"amount": 49.5, "currency": "EUR", "order_id": fmt.Sprintf("o-%d", n)}
	case 9:
		e["type"] = "click"
	}
	return e
}

// load sends requests requests of perRequest events each and returns the
// client-side latencies. With rate > 0 requests start at that many per
// second; otherwise as fast as the connections allow.
func load(b *testing.B, url string, requests, perRequest int, rate float64) (lat []time.Duration, elapsed time.Duration) {
	b.Helper()
	bodies := make([][]byte, requests)
	var seq int64
	for i := range bodies {
		var v any
		if perRequest == 1 {
			v = benchEvent(seq)
			seq++
		} else {
			batch := make([]any, perRequest)
			for j := range batch {
				batch[j] = benchEvent(seq)
				seq++
			}
			v = batch
		}
		bodies[i], _ = json.Marshal(v)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchConns, MaxConnsPerHost: benchConns}}
	lat = make([]time.Duration, requests)
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	cpu0 := processCPU()
	start := time.Now()
	b.ResetTimer()
	for range benchConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= requests {
					return
				}
				if rate > 0 {
					if wait := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); wait > 0 {
						time.Sleep(wait)
					}
				}
				req, _ := http.NewRequest("POST", url+"/v1/events", bytes.NewReader(bodies[i]))
				req.Header.Set("Authorization", "Bearer bench")
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("User-Agent", chromeUA)
				t0 := time.Now()
				res, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				lat[i] = time.Since(t0)
				if res.StatusCode != http.StatusAccepted {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed = time.Since(start)
	loadCPU = processCPU() - cpu0
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d requests failed", n, requests)
	}
	return lat, elapsed
}

// loadCPU is the process's CPU time (user and system) during the last load:
// server and load generator together, whose share a shared machine's load
// moves far less than it moves wall time.
var loadCPU time.Duration

// within is the percentage of ds at most d.
func within(ds []time.Duration, d time.Duration) float64 {
	n := 0
	for _, x := range ds {
		if x <= d {
			n++
		}
	}
	return 100 * float64(n) / float64(max(1, len(ds)))
}

func percentile(ds []time.Duration, p float64) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return float64(s[min(len(s)-1, int(p*float64(len(s))))].Microseconds()) / 1000
}

func report(b *testing.B, bt *benchTarget, lat []time.Duration, elapsed time.Duration, events int) {
	b.ReportMetric(float64(events)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(loadCPU.Microseconds())/float64(events), "cpu_us/event")
	b.ReportMetric(percentile(lat, 0.50), "p50_ms")
	b.ReportMetric(percentile(lat, 0.99), "p99_ms")
	b.ReportMetric(within(lat, 5*time.Millisecond), "within_5ms_%")
	bt.mu.Lock()
	b.ReportMetric(percentile(bt.handler, 0.99), "server_p99_ms")
	bt.mu.Unlock()
	b.ReportMetric(0, "ns/op")
}

func BenchmarkIngest(b *testing.B) {
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(400)) // as main does
	}
	b.Run("bare_decode_202", func(b *testing.B) {
		// The yardstick: a net/http handler that only decodes the JSON and answers 202.
		bt := serveBench(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var v any
			if err := json.NewDecoder(r.Body).Decode(&v); err != nil {
				w.WriteHeader(400)
				return
			}
			w.WriteHeader(http.StatusAccepted)
		}))
		defer bt.close()
		lat, el := load(b, bt.url, b.N, 1, 0)
		report(b, bt, lat, el, b.N)
	})
	b.Run("single", func(b *testing.B) {
		bt, _ := startCollector(b)
		defer bt.close()
		lat, el := load(b, bt.url, b.N, 1, 0)
		report(b, bt, lat, el, b.N)
	})
	b.Run("single_at_2000_per_s", func(b *testing.B) {
		bt, _ := startCollector(b)
		defer bt.close()
		lat, el := load(b, bt.url, b.N, 1, 2000)
		report(b, bt, lat, el, b.N)
	})
	b.Run("batch_100", func(b *testing.B) {
		// Ten times as many events as the single cases (b.N/10 requests of
		// 100), so that the figure is sustained while the database grows
		// past the page cache, not a one-second burst.
		bt, _ := startCollector(b)
		defer bt.close()
		requests := max(1, b.N/10)
		lat, el := load(b, bt.url, requests, 100, 0)
		report(b, bt, lat, el, requests*100)
	})
}
