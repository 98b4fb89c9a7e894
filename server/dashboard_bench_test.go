package server

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tally-analytics/tally/internal/chromiumtest"
	"github.com/tally-analytics/tally/storage"
)

// BenchmarkDashboardFirstPaint times the dashboard's first paint with all
// panels (docs/dashboard.md) in chromium headless, on BenchmarkReads'
// kept database: TALLY_BENCH_KEEP_DB=PATH names it (a copy: the service
// writes partials into it; without the variable the benchmark skips, as
// loading 1M events here would take minutes). One op is one page load of
// the 30-day view with the admin token in the tab's session storage: from
// the navigation's start (performance.timeOrigin) to the frame after every
// panel, the headline, the chart, goals and the funnel show their answers
// (the page's "tally-panels" mark, set after two animation frames). The
// ms/paint metric is that time, as the page measured it.
//
//   - cold: day partials deleted and the report cache emptied before each
//     load (a service started on a database that kept none, before the
//     warm-up ran).
//   - after_warmup: day partials deleted, then one warm-up round (what a
//     service started on such a database has done within seconds), the
//     report cache emptied: the first load after the warm-up; the
//     dimensions it does not compute (browsers, devices, campaigns,
//     properties) and the previous period scan their days.
//   - next_morning: the partials of the last closed day deleted, then a
//     warm-up round, the report cache emptied: the first view of a day on
//     a service that has run for a while (the warm-up computed the day
//     before; the dimensions it does not cover scan that one day).
//   - kept: every partial kept, the report cache emptied: a later first
//     view (the nightly warm-up has merged only its dimensions).
//   - warm: the same view loaded again (every answer kept).
//
// With -v it logs each query's time on the server, by dimension, of the
// last load. TALLY_DASH_GOALS=1 first creates the funnel benchmark's 5
// goals (createBenchGoals), so the goal and funnel panels have figures to
// compute. TALLY_DASH_SCREENSHOT=FILE.png also saves a screenshot of the
// loaded view, with those goals (docs/dashboard.md shows it).
func BenchmarkDashboardFirstPaint(b *testing.B) {
	onlySQLite(b, "reuses a kept SQLite file")
	path := os.Getenv("TALLY_BENCH_KEEP_DB")
	if path == "" {
		b.Skip("TALLY_BENCH_KEEP_DB is not set: name a copy of BenchmarkReads' kept database")
	}
	if _, reused := keptFixture(b, path); !reused {
		b.Skip(path + " is not a kept BenchmarkReads database")
	}
	clock := &benchClock{}
	clock.ms.Store(benchEnd.Add(time.Hour).UnixMilli())
	db, err := openTestDB(b, context.Background(), storage.Options{Path: path, Now: clock.now})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	srv := New(Config{AdminToken: "bench", Logger: discardLogger(), Now: clock.now}, db)
	timings := &queryTimings{took: map[string]time.Duration{}}
	ts := httptest.NewServer(timings.wrap(srv.Query()))
	defer ts.Close()

	view := ts.URL + "/?ws=bench&site=bench&period=30d"
	if os.Getenv("TALLY_DASH_GOALS") != "" {
		createBenchGoals(b, ts.URL)
	}
	// A browser per run: chromiumtest's ends after 90 s.
	open := func(b *testing.B) context.Context {
		ctx := chromiumtest.Browser(b)
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(ts.URL+"/")); err != nil {
			b.Fatal(err)
		}
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`sessionStorage.setItem("tally_token", "bench"), true`)); err != nil {
			b.Fatal(err)
		}
		return ctx
	}
	paint := func(b *testing.B, ctx context.Context) float64 {
		b.Helper()
		timings.reset()
		if err := chromedp.Do(ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(view),
			chromedp.WaitReady(chromedp.CSS("body[data-ready]"))); err != nil {
			b.Fatal(err)
		}
		ms, err := chromedp.Run(ctx, chromedp.Evaluate[float64](
			`performance.getEntriesByType("mark").filter(function (m) { return m.name.indexOf("tally-panels") === 0; })[0].startTime`))
		if err != nil {
			b.Fatal(err)
		}
		return ms
	}
	run := func(name string, before func(b *testing.B)) {
		b.Run(name, func(b *testing.B) {
			ctx := open(b)
			var total float64
			for b.Loop() {
				b.StopTimer()
				before(b)
				b.StartTimer()
				total += paint(b, ctx)
			}
			b.ReportMetric(total/float64(b.N), "ms/paint")
			b.Logf("server time per query of the last load:\n%s", timings)
		})
	}
	forget := func(rows bool) func(b *testing.B) {
		return func(b *testing.B) {
			if err := db.ForgetPartials(context.Background(), "bench", rows); err != nil {
				b.Fatal(err)
			}
		}
	}
	run("cold", forget(true))
	run("after_warmup", func(b *testing.B) {
		forget(true)(b)
		if err := db.WarmPartialsOnce(context.Background()); err != nil {
			b.Fatal(err)
		}
		forget(false)(b)
	})
	run("next_morning", func(b *testing.B) {
		forgetDay(b, path, benchEnd.AddDate(0, 0, -1))
		if err := db.WarmPartialsOnce(context.Background()); err != nil {
			b.Fatal(err)
		}
		forget(false)(b)
	})
	run("kept", forget(false))
	run("warm", func(*testing.B) {})

	if out := os.Getenv("TALLY_DASH_SCREENSHOT"); out != "" {
		// With goals, so that the goal and funnel panels show figures.
		createBenchGoals(b, ts.URL)
		ctx := open(b)
		paint(b, ctx)
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(out, png, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// forgetDay deletes the site's day partials of day (UTC) and after, as if
// they had not been computed yet.
func forgetDay(b *testing.B, path string, day time.Time) {
	b.Helper()
	db, err := sql.Open("sqlite", storage.FileURI(path)+"?_pragma=busy_timeout(5000)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`DELETE FROM day_partials WHERE site_id = 'bench' AND day_start >= ?`, day.UnixMilli()); err != nil {
		b.Fatal(err)
	}
}

// queryTimings records the server time of each query API request, named
// by the query's dimensions (or the path for other requests).
type queryTimings struct {
	mu   sync.Mutex
	took map[string]time.Duration
}

func (q *queryTimings) reset() {
	q.mu.Lock()
	q.took = map[string]time.Duration{}
	q.mu.Unlock()
}

func (q *queryTimings) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Path
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var qb struct {
				Dimensions []string       `json:"dimensions"`
				Include    map[string]any `json:"include"`
			}
			json.Unmarshal(body, &qb)
			name += " " + strings.Join(qb.Dimensions, ",")
			if qb.Include["comparisons"] != nil {
				name += " (with comparison)"
			}
		}
		t0 := time.Now()
		h.ServeHTTP(w, r)
		q.mu.Lock()
		q.took[name] += time.Since(t0)
		q.mu.Unlock()
	})
}

func (q *queryTimings) String() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	names := make([]string, 0, len(q.took))
	for n := range q.took {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return q.took[names[i]] > q.took[names[j]] })
	var sb strings.Builder
	for _, n := range names {
		fmt.Fprintf(&sb, "  %7.1f ms  %s\n", float64(q.took[n].Microseconds())/1000, n)
	}
	return sb.String()
}
