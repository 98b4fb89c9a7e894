package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tally-analytics/tally/storage"
)

// Run with:
//
//	go test ./server -run '^$' -bench EraseUnderLoad -benchtime 1x
//
// BenchmarkEraseUnderLoad loads one user with eraseBenchEvents events on
// 20 devices over 90 days, in visits of 50 events (about a minute), then
// erases the user over HTTP
// while another site sends single events at a steady eraseBenchRate per
// second, and reports the p99 of those events' latency before and during
// the erasure.
const (
	eraseBenchEvents = 1_000_000
	eraseBenchRate   = 500
)

func BenchmarkEraseUnderLoad(b *testing.B) {
	ctx := context.Background()
	db, err := openTestDB(b, ctx, storage.Options{Path: filepath.Join(b.TempDir(), "erase.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	system := storage.Actor{Kind: storage.ActorSystem}
	ws, _ := db.CreateWorkspace(ctx, system, "Bench", "bench")
	for _, id := range []string{"bench", "other"} {
		if _, err := db.CreateSite(ctx, system, ws, id, id); err != nil {
			b.Fatal(err)
		}
	}
	t0 := time.Now()
	user := "heavy-user"
	start := benchEnd.AddDate(0, 0, -benchDays)
	step := time.Duration(benchDays) * 24 * time.Hour / eraseBenchEvents
	var batch []storage.IngestEvent
	for i := range eraseBenchEvents {
		anon := fmt.Sprintf("heavy-device-%02d", i/50%20) // visits of 50 events
		url := fmt.Sprintf("https://shop.example/p/%d", i%300)
		raw := fmt.Sprintf(`{"id":"x","site_id":"bench","anon_id":%q,"user_id":%q,"type":"pageview","url":%q,"properties":{"title":"A page title","w":1440}}`, anon, user, url)
		batch = append(batch, storage.IngestEvent{ID: uuid.NewString(), SiteID: "bench", Type: "pageview", AnonID: anon, UserID: &user,
			URL: &url, TS: start.Add(time.Duration(i) * step), Raw: []byte(raw), Browser: "Chrome", OS: "Windows", DeviceType: "desktop", Country: "DE"})
		if len(batch) == 500 {
			if _, err := db.Ingest(ctx, batch, nil, nil); err != nil {
				b.Fatal(err)
			}
			batch = nil
		}
	}
	b.Logf("loaded %d events of one user in %s", eraseBenchEvents, time.Since(t0).Round(time.Second))

	srv := New(Config{AdminToken: "bench", Logger: discardLogger()}, db)
	collector := httptest.NewServer(srv.Collector())
	defer collector.Close()
	query := httptest.NewServer(srv.Query())
	defer query.Close()

	// send posts single events of site other at eraseBenchRate per second
	// until stop is closed, and returns their latencies.
	send := func(stop <-chan struct{}) []time.Duration {
		var mu sync.Mutex
		var lat []time.Duration
		var wg sync.WaitGroup
		const conns = 4
		for c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tick := time.NewTicker(time.Second * conns / eraseBenchRate)
				defer tick.Stop()
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					e := benchEvent(int64(n*conns + c))
					e["site_id"] = "other"
					body, _ := json.Marshal(e)
					req, _ := http.NewRequest("POST", collector.URL+"/v1/events", bytes.NewReader(body))
					req.Header.Set("Authorization", "Bearer other")
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("User-Agent", chromeUA)
					t0 := time.Now()
					res, err := http.DefaultClient.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode != http.StatusAccepted {
						b.Errorf("got %d, want 202", res.StatusCode)
						return
					}
					mu.Lock()
					lat = append(lat, time.Since(t0))
					mu.Unlock()
				}
			}()
		}
		<-stop
		wg.Wait()
		return lat
	}

	stop := make(chan struct{})
	time.AfterFunc(3*time.Second, func() { close(stop) })
	baseline := send(stop)

	b.ResetTimer()
	stop = make(chan struct{})
	done := make(chan []time.Duration)
	go func() { done <- send(stop) }()
	t0 = time.Now()
	req, _ := http.NewRequest("POST", query.URL+"/v1/sites/bench/gdpr/delete", bytes.NewReader([]byte(`{"subject":{"user_id":"`+user+`"}}`)))
	req.Header.Set("Authorization", "Bearer bench")
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	var answer struct{ Counts storage.SubjectCounts }
	json.NewDecoder(res.Body).Decode(&answer)
	res.Body.Close()
	erase := time.Since(t0)
	close(stop)
	during := <-done
	b.StopTimer()
	if res.StatusCode != 200 || answer.Counts.Events != eraseBenchEvents {
		b.Fatalf("erasure: got %d with %+v, want 200 and %d events", res.StatusCode, answer.Counts, eraseBenchEvents)
	}
	b.Logf("erased %d events in %s; %d events of another site during it, %d before", answer.Counts.Events, erase.Round(time.Millisecond), len(during), len(baseline))
	b.ReportMetric(erase.Seconds(), "erase_s")
	b.ReportMetric(percentile(baseline, 0.99), "before_p99_ms")
	b.ReportMetric(percentile(during, 0.99), "during_p99_ms")
	b.ReportMetric(percentile(during, 1), "during_max_ms")
	b.ReportMetric(0, "ns/op")
}
