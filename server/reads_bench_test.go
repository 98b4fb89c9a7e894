package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tally-analytics/tally/storage"
)

// Run with:
//
//	go test ./server -run '^$' -bench Reads -benchtime 200x
//
// BenchmarkReads loads 1,000,000 events over 90 days into a temp database
// through the real writer (about a minute), then times each read endpoint
// over HTTP for the last 30 days, a timeline page of a user with a long
// history, and the GDPR erasure of one user.
const (
	benchEvents = 1_000_000
	benchDays   = 90
)

var benchEnd = time.Date(2026, 3, 31, 0, 0, 0, 0, time.UTC)

// loadReadsFixture writes the events: visits of 1 to 8 events a few
// minutes apart, by 60,000 visitors of whom a few return very often, 10%
// identified as users; 70% pageviews.
func loadReadsFixture(b *testing.B, db *storage.DB) (heavyUser string, users []string) {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rng, 1.2, 20, 59_999)
	types := []string{"pageview", "pageview", "pageview", "pageview", "pageview", "pageview", "pageview", "click", "click", "signup"}
	perDay := benchEvents / benchDays
	start := benchEnd.AddDate(0, 0, -benchDays)
	seen := map[int]bool{}
	visitsOf := map[int]int{}
	total := 0
	for d := range benchDays {
		dayStart := start.AddDate(0, 0, d)
		var batch []storage.IngestEvent
		for n := 0; n < perDay && total < benchEvents; {
			v := int(zipf.Uint64())
			visitsOf[v]++
			anon := fmt.Sprintf("visitor-%05d", v)
			var user *string
			if v%10 == 0 {
				u := fmt.Sprintf("user-%05d", v)
				user = &u
				if !seen[v] {
					seen[v] = true
					users = append(users, u)
				}
			}
			ts := dayStart.Add(time.Duration(rng.IntN(86_000)) * time.Second)
			for k := 1 + rng.IntN(8); k > 0 && n < perDay; k-- {
				typ := types[rng.IntN(len(types))]
				url := fmt.Sprintf("https://shop.example/p/%d", rng.IntN(200))
				raw := fmt.Sprintf(`{"id":"x","site_id":"bench","anon_id":%q,"type":%q,"url":%q,"properties":{"title":"A page title","w":1440}}`, anon, typ, url)
				batch = append(batch, storage.IngestEvent{ID: uuid.NewString(), SiteID: "bench", Type: typ, AnonID: anon, UserID: user,
					URL: &url, TS: ts, Raw: []byte(raw), Browser: "Chrome", OS: "Windows", DeviceType: "desktop", Country: "DE"})
				ts = ts.Add(time.Duration(30+rng.IntN(240)) * time.Second)
				n++
				total++
			}
			if len(batch) >= 500 {
				if _, err := db.Ingest(context.Background(), batch, nil, nil); err != nil {
					b.Fatal(err)
				}
				batch = nil
			}
		}
		if _, err := db.Ingest(context.Background(), batch, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
	best := 0
	for v, n := range visitsOf {
		if v%10 == 0 && n > visitsOf[best] {
			best = v
		}
	}
	return fmt.Sprintf("user-%05d", best), users
}

func BenchmarkReads(b *testing.B) {
	path := filepath.Join(b.TempDir(), "reads.db")
	if keep := os.Getenv("TALLY_BENCH_KEEP_DB"); keep != "" {
		path = keep // to inspect the file afterwards
	}
	db, err := storage.Open(context.Background(), storage.Options{Path: path})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ws, _ := db.CreateWorkspace(context.Background(), storage.Actor{Kind: storage.ActorSystem}, "Bench", "bench")
	db.CreateSite(context.Background(), storage.Actor{Kind: storage.ActorSystem}, ws, "bench", "Bench")
	t0 := time.Now()
	heavy, users := loadReadsFixture(b, db)
	b.Logf("loaded %d events in %s (%.0f events/s); heavy user %s", benchEvents, time.Since(t0).Round(time.Second),
		benchEvents/time.Since(t0).Seconds(), heavy)
	reportSpace(b, db)

	srv := New(Config{AdminToken: "bench", Logger: discardLogger()}, db)
	ts := httptest.NewServer(srv.Query())
	defer ts.Close()
	get := func(b *testing.B, method, path, body string) {
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer bench")
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != 200 {
			b.Fatalf("%s %s: %v %v", method, path, err, res)
		}
		res.Body.Close()
	}
	rng := "from=" + benchEnd.AddDate(0, 0, -30).Format("2006-01-02") + "&to=" + benchEnd.AddDate(0, 0, -1).Format("2006-01-02")
	for _, endpoint := range []string{"pageviews", "events", "sessions"} {
		b.Run(endpoint+"_30_days", func(b *testing.B) {
			for b.Loop() {
				get(b, "GET", "/v1/sites/bench/"+endpoint+"?"+rng, "")
			}
		})
	}
	b.Run("timeline_page_100", func(b *testing.B) {
		for b.Loop() {
			get(b, "GET", "/v1/sites/bench/users/"+heavy+"/timeline?limit=100", "")
		}
	})
	b.Run("gdpr_erase_one_user", func(b *testing.B) {
		i := 0
		for b.Loop() {
			get(b, "POST", "/v1/sites/bench/gdpr/delete", `{"subject":{"user_id":"`+users[len(users)-1-i%len(users)]+`"}}`)
			i++
		}
	})
}

// reportSpace logs the bytes per event of the loaded database (file and
// WAL after a TRUNCATE checkpoint) and what each table and index takes,
// the figures of README "Storage".
func reportSpace(b *testing.B, db *storage.DB) {
	b.Helper()
	file, objects, err := db.Space(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("database: %d bytes, %.1f bytes per event", file, float64(file)/benchEvents)
	for _, o := range objects {
		b.Logf("  %-28s %11d bytes %7.1f per event", o.Name, o.Bytes, float64(o.Bytes)/benchEvents)
	}
	b.ReportMetric(float64(file)/benchEvents, "bytes/event")
}
