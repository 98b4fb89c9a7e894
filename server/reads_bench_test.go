package server

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tally-analytics/tally/internal/dbtest"
	"github.com/tally-analytics/tally/storage"
)

// Run with:
//
//	go test ./server -run '^$' -bench Reads -benchtime 200x
//
// BenchmarkReads loads 1,000,000 events over 90 days into a temp database
// through the real writer (about a minute), then times each read endpoint
// over HTTP for the last 30 days, a timeline page of a user with a long
// history on one device and of a heavy user linked to 200 devices, and the
// GDPR erasure of one user of each kind.
//
// TALLY_BENCH_EVENTS=10000000 loads ten times as many (the query API's
// 10M target, docs/query-api.md; the same writer, through storage.Ingest,
// about ten times as long) over 300 pages instead of 200.
//
// TALLY_BENCH_KEEP_DB=PATH keeps the loaded database at PATH, with what the
// load found beside it (PATH.fixture.json); a later run of the same size
// reuses the file instead of loading again (the erasure benchmarks will
// have erased some of its users).
//
// On PostgreSQL (TALLY_TEST_BACKEND=postgres), TALLY_BENCH_DATABASE_URL
// names a database that `tally migrate-to` filled from the kept file of
// TALLY_BENCH_KEEP_DB, so that both backends read the same rows
// (docs/benchmarks.md#postgresql; .ci/bench-pg does it).
var (
	benchDatabaseURL = os.Getenv("TALLY_BENCH_DATABASE_URL")
	benchEvents      = benchEventsFromEnv()
	benchPages       = map[bool]int{false: 200, true: 300}[benchEvents > 1_000_000]
)

// pgBenchDatabaseURL is TALLY_BENCH_DATABASE_URL in the PostgreSQL run,
// else "" (the SQLite run reads the kept file).
func pgBenchDatabaseURL() string {
	if !dbtest.Postgres() {
		return ""
	}
	return benchDatabaseURL
}

func benchEventsFromEnv() int {
	if n, err := strconv.Atoi(os.Getenv("TALLY_BENCH_EVENTS")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}

const (
	benchDays = 90
	// benchVisitors come about once each; every tenth event of each (its
	// first, eleventh...) carries user_id user-(visitor mod benchHeavy),
	// so each of the benchHeavy users is linked to 200 devices with about
	// 1,000 events (docs/benchmarks.md#reads).
	benchVisitors = 200_000
	benchHeavy    = 1_000
	// benchRegulars return often (Zipf): one visit in 20 is by one of
	// them, and one in ten of them is identified as itself.
	benchRegulars = 10_000
)

var benchEnd = time.Date(2026, 3, 31, 0, 0, 0, 0, time.UTC)

// benchCountries are the visitors' 30 countries.
var benchCountries = strings.Fields("DE FR US GB NL SE NO DK FI PL CZ AT CH IT ES PT IE BE LU EE LV LT HU RO BG GR SK SI HR CA")

// readsFixture is who BenchmarkReads reads and erases.
type readsFixture struct {
	longest string   // the regular user with the longest history
	users   []string // the identified regulars, in order of first visit
	heavy   []string // the heavy users, most events first
	devices int      // anon ids linked to heavy[0]
	events  int      // events of heavy[0]
}

// benchClock is the clock of a database loaded as a live site would have
// received the events (see loadReadsFixture).
type benchClock struct{ ms atomic.Int64 }

// now is the clock as storage.Options.Now.
func (c *benchClock) now() time.Time { return time.UnixMilli(c.ms.Load()).UTC() }

// loadReadsFixture writes the events: visits of 1 to 8 events a few
// minutes apart, 70% pageviews; 19 visits in 20 by benchVisitors visitors
// taken in a scattered order, so that each comes about once, the rest by
// benchRegulars regulars of whom a few return very often.
//
// With a clock (the database's Options.Now), the load is what a live site
// would have stored: each day's events arrive in the order of their ts, in
// batches of 500, each received at the ts of its newest event, and db.Prune
// runs every simulated hour as the service's prune loop would, so that the
// dedup table holds the last 48 hours only and its freed pages are reused
// (docs/storage.md#event-bytes). Without one, every event is received now and
// nothing is pruned.
func loadReadsFixture(b *testing.B, db *storage.DB, clock *benchClock) readsFixture {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rng, 1.2, 20, benchRegulars-1)
	types := []string{"pageview", "pageview", "pageview", "pageview", "pageview", "pageview", "pageview", "click", "click", "signup"}
	perDay := benchEvents / benchDays
	start := benchEnd.AddDate(0, 0, -benchDays)
	var f readsFixture
	seen := map[int]bool{}
	regularEvents := map[int]int{}
	sent := make([]int, benchVisitors)      // events per visitor so far
	heavyEvents := make([]int, benchHeavy)  // events per heavy user
	heavyDevices := make([]int, benchHeavy) // linked anon ids per heavy user
	total, visits := 0, 0
	lastPrune := int64(0)
	ingest := func(batch []storage.IngestEvent) {
		if clock != nil && len(batch) > 0 {
			clock.ms.Store(batch[len(batch)-1].TS.UnixMilli())
			if hour := clock.ms.Load() / 3_600_000; hour != lastPrune {
				lastPrune = hour
				if err := db.Prune(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		}
		if _, err := db.Ingest(context.Background(), batch, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
	for d := range benchDays {
		dayStart := start.AddDate(0, 0, d)
		var batch, day []storage.IngestEvent
		for n := 0; n < perDay && total < benchEvents; {
			visits++
			regular, v := rng.IntN(20) == 0, 0
			var anon string
			var user *string
			if regular {
				v = int(zipf.Uint64())
				anon = fmt.Sprintf("regular-%05d", v)
				if v%10 == 0 {
					u := fmt.Sprintf("regular-user-%05d", v)
					user = &u
					if !seen[v] {
						seen[v] = true
						f.users = append(f.users, u)
					}
				}
			} else {
				v = visits * 7919 % benchVisitors // 7919 is prime: every visitor in turn, scattered
				anon = fmt.Sprintf("visitor-%06d", v)
			}
			ts := dayStart.Add(time.Duration(rng.IntN(86_000)) * time.Second)
			// A visit's landing: 60% come from one of 50 referring hosts, 10%
			// with a campaign of 20, from one of 30 countries (the query
			// API's breakdowns; docs/benchmarks.md#reads).
			var referrer *string
			if rng.IntN(10) < 6 {
				r := fmt.Sprintf("https://ref%02d.example/page", rng.IntN(50))
				referrer = &r
			}
			campaign := ""
			if rng.IntN(10) == 0 {
				campaign = fmt.Sprintf("?utm_source=newsletter&utm_campaign=c%02d", rng.IntN(20))
			}
			country := benchCountries[rng.IntN(len(benchCountries))]
			for k := 1 + rng.IntN(8); k > 0 && n < perDay; k-- {
				typ := types[rng.IntN(len(types))]
				url := fmt.Sprintf("https://shop.example/p/%d", rng.IntN(benchPages)) + campaign
				e := storage.IngestEvent{ID: uuid.NewString(), SiteID: "bench", Type: typ, AnonID: anon, UserID: user,
					URL: &url, TS: ts, Browser: "Chrome", OS: "Windows", DeviceType: "desktop", Country: country, Referrer: referrer,
					Credential: "site"} // as events sent with the site's bearer record
				referrer, campaign = nil, ""
				if regular {
					regularEvents[v]++
				} else {
					h := v % benchHeavy
					if sent[v]%10 == 0 {
						u := fmt.Sprintf("user-%03d", h)
						e.UserID = &u
						if sent[v] == 0 {
							heavyDevices[h]++
						}
					}
					sent[v]++
					heavyEvents[h]++
				}
				userField := ""
				if e.UserID != nil {
					userField = fmt.Sprintf(`"user_id":%q,`, *e.UserID)
				}
				e.Raw = []byte(fmt.Sprintf(`{"id":"x","site_id":"bench","anon_id":%q,%s"type":%q,"url":%q,"properties":{"title":"A page title","w":1440}}`, anon, userField, typ, url))
				if clock != nil {
					day = append(day, e)
				} else {
					batch = append(batch, e)
				}
				ts = ts.Add(time.Duration(30+rng.IntN(240)) * time.Second)
				n++
				total++
			}
			if len(batch) >= 500 {
				ingest(batch)
				batch = nil
			}
		}
		ingest(batch)
		// A day's events in the order of their ts (stable: a visit's
		// events keep their order), as a live site receives them.
		sort.SliceStable(day, func(i, j int) bool { return day[i].TS.Before(day[j].TS) })
		for len(day) > 0 {
			n := min(500, len(day))
			ingest(day[:n])
			day = day[n:]
		}
	}
	best := 0
	for v, n := range regularEvents {
		if v%10 == 0 && n > regularEvents[best] {
			best = v
		}
	}
	f.longest = fmt.Sprintf("regular-user-%05d", best)
	order := make([]int, benchHeavy)
	for h := range order {
		order[h] = h
	}
	sort.Slice(order, func(i, j int) bool { return heavyEvents[order[i]] > heavyEvents[order[j]] })
	for _, h := range order {
		f.heavy = append(f.heavy, fmt.Sprintf("user-%03d", h))
	}
	f.devices, f.events = heavyDevices[order[0]], heavyEvents[order[0]]
	return f
}

func BenchmarkReads(b *testing.B) {
	path := filepath.Join(b.TempDir(), "reads.db")
	keep := os.Getenv("TALLY_BENCH_KEEP_DB")
	if keep != "" {
		path = keep // to inspect the file afterwards, or to reuse it
	}
	clock := &benchClock{}
	clock.ms.Store(benchEnd.AddDate(0, 0, -benchDays).UnixMilli())
	f, reused := keptFixture(b, keep)
	opts := storage.Options{Path: path, Now: clock.now}
	if url := pgBenchDatabaseURL(); url != "" {
		if !reused {
			b.Fatalf("TALLY_BENCH_DATABASE_URL needs TALLY_BENCH_KEEP_DB naming the SQLite file it was copied from")
		}
		opts.DatabaseURL = url
	} else {
		opts = testOptions(b, opts)
	}
	db, err := storage.Open(context.Background(), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if reused {
		b.Logf("reusing %s (%d events; its gdpr_erase runs erased some users)", path, benchEvents)
		// A file of before migration 0021 is backfilled first: reports
		// read event_pages only once it is complete
		// (docs/storage.md#event-bytes).
		if t0 := time.Now(); !db.EventPagesReady() {
			for !db.EventPagesReady() {
				time.Sleep(100 * time.Millisecond)
			}
			b.Logf("event pages backfilled in %s", time.Since(t0).Round(time.Millisecond))
		}
	} else {
		ws, _ := db.CreateWorkspace(context.Background(), storage.Actor{Kind: storage.ActorSystem}, "Bench", "bench")
		db.CreateSite(context.Background(), storage.Actor{Kind: storage.ActorSystem}, ws, "bench", "Bench")
		t0 := time.Now()
		f = loadReadsFixture(b, db, clock)
		b.Logf("loaded %d events in %s (%.0f events/s); longest history %s; heavy user %s with %d devices and %d events",
			benchEvents, time.Since(t0).Round(time.Second), float64(benchEvents)/time.Since(t0).Seconds(), f.longest, f.heavy[0], f.devices, f.events)
		reportSpace(b, db)
		if keep != "" {
			saveFixture(b, keep, f)
		}
	}
	// Reads happen an hour after the last day of the load: every day of
	// the 30 read is closed, as on the morning after (a "30d" range ends
	// before today).
	clock.ms.Store(benchEnd.Add(time.Hour).UnixMilli())

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
	// The query API (docs/query-api.md), over the same 30 days.
	qrange := `"date_range":["` + benchEnd.AddDate(0, 0, -30).Format("2006-01-02") + `","` + benchEnd.AddDate(0, 0, -1).Format("2006-01-02") + `"]`
	for _, c := range []struct{ name, body string }{
		{"query_visits_by_day", `{"metrics":["visitors","visits","bounce_rate","visit_duration"],"dimensions":["time:day"],` + qrange + `}`},
		{"query_all_by_day", `{"metrics":["visitors","visits","pageviews","bounce_rate","visit_duration"],"dimensions":["time:day"],` + qrange + `}`},
		{"query_by_source", `{"metrics":["visitors","visits","bounce_rate"],"dimensions":["visit:source"],` + qrange + `}`},
		{"query_by_entry_page", `{"metrics":["visitors","visits"],"dimensions":["visit:entry_page"],` + qrange + `}`},
		{"query_by_page", `{"metrics":["visitors","pageviews"],"dimensions":["event:page"],` + qrange + `}`},
		{"query_by_exit_page", `{"metrics":["visitors","visits","bounce_rate"],"dimensions":["visit:exit_page"],` + qrange + `}`},
		{"query_by_country", `{"metrics":["visitors","visits","pageviews"],"dimensions":["visit:country"],` + qrange + `}`},
		{"query_3_filters", `{"metrics":["visitors","pageviews"],"filters":[["is","visit:country",["DE","FR"]],["is_not","visit:source",["Direct / None"]],` +
			`["contains","event:page",["/p/1"]]],` + qrange + `}`},
		{"query_1_event_filter", `{"metrics":["visitors","pageviews"],"filters":[["contains","event:page",["/p/1"]]],` + qrange + `}`},
		{"query_3_visit_filters", `{"metrics":["visitors","visits","bounce_rate"],"filters":[["is","visit:country",["DE","FR"]],["is_not","visit:source",["Direct / None"]],` +
			`["contains","visit:entry_page",["/p/1"]]],` + qrange + `}`},
	} {
		// Unfiltered ones read day partials
		// (docs/query-api.md#how-reports-stay-fast): kept after the first run
		// and merged once into the report cache (warm), kept but read and
		// merged again (kept: the first view of a range after the warm-up), or
		// computed from a scan of each day when none is kept (cold; the
		// partials are deleted before each run, outside the timing).
		b.Run(c.name, func(b *testing.B) {
			// The first run computes and queues the store of the partials;
			// the timed ones start once it has committed.
			kept := keptPartials(b, path)
			get(b, "POST", "/v1/sites/bench/query", c.body)
			for deadline := time.Now().Add(10 * time.Second); keptPartials(b, path) == kept && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			for b.Loop() {
				get(b, "POST", "/v1/sites/bench/query", c.body)
			}
		})
		// kept: the report cache emptied, so a report filtered on two
		// dimensions scans (its first view), the others read and merge
		// the kept partials (one event filter: the event:page ones).
		// cpu-ms/op: the process's CPU time per request (both halves of a
		// split read add), which a shared machine's load moves less.
		b.Run(c.name+"_kept", func(b *testing.B) {
			var cpu time.Duration
			n := 0
			for b.Loop() {
				b.StopTimer()
				if err := db.ForgetPartials(context.Background(), "bench", false); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				c0 := processCPU()
				get(b, "POST", "/v1/sites/bench/query", c.body)
				cpu += processCPU() - c0
				n++
			}
			b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(n), "cpu-ms/op")
		})
		if strings.HasPrefix(c.name, "query_3_") {
			continue
		}
		// The first view of the day: the warm-up's round (outside the
		// timing) put the merged answer into the report cache.
		b.Run(c.name+"_first_view", func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				if err := db.ForgetPartials(context.Background(), "bench", false); err != nil {
					b.Fatal(err)
				}
				if err := db.WarmPartialsOnce(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				get(b, "POST", "/v1/sites/bench/query", c.body)
			}
		})
		b.Run(c.name+"_cold", func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				if err := db.ForgetPartials(context.Background(), "bench", true); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				get(b, "POST", "/v1/sites/bench/query", c.body)
			}
		})
	}
	// A funnel of 5 goals over the 30 days
	// (docs/query-api.md#goals-and-funnels): every page, a click, a page of
	// /p/1*, a signup, then /p/2; the goals are created once (a kept database
	// keeps them).
	createBenchGoals(b, ts.URL)
	// cpu-ms/op is the process's CPU time per funnel (both parts): on a
	// shared machine it varies less than the time. The report cache is
	// emptied before each request, so each computes the funnel;
	// funnel_5_steps_kept times it served again.
	funnel := `{"steps":["Any page","Click","Page 1x","Signup","Page 2"],` + qrange + `}`
	b.Run("funnel_5_steps", func(b *testing.B) {
		var cpu time.Duration
		n := 0
		for b.Loop() {
			b.StopTimer()
			if err := db.ForgetPartials(context.Background(), "bench", false); err != nil {
				b.Fatal(err)
			}
			c := processCPU()
			b.StartTimer()
			get(b, "POST", "/v1/sites/bench/funnel", funnel)
			cpu += processCPU() - c
			n++
		}
		b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(n), "cpu-ms/op")
	})
	b.Run("funnel_5_steps_kept", func(b *testing.B) {
		get(b, "POST", "/v1/sites/bench/funnel", funnel) // before the timing
		for b.Loop() {
			get(b, "POST", "/v1/sites/bench/funnel", funnel)
		}
	})
	// The same goals in the query API: one read per goal and one for the
	// conversion rate's total; again (warm: from the report cache) and
	// with the report cache emptied before each request (kept).
	byGoal := `{"metrics":["visitors","events","conversion_rate"],"dimensions":["event:goal"],` + qrange + `}`
	b.Run("query_by_goal", func(b *testing.B) {
		get(b, "POST", "/v1/sites/bench/query", byGoal) // before the timing (b.Loop starts it)
		for b.Loop() {
			get(b, "POST", "/v1/sites/bench/query", byGoal)
		}
	})
	b.Run("query_by_goal_kept", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			if err := db.ForgetPartials(context.Background(), "bench", false); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			get(b, "POST", "/v1/sites/bench/query", byGoal)
		}
	})
	// One round of the partials warm-up from nothing kept (what a start
	// on an upgraded database does once; then one day a night).
	b.Run("query_warmup_round", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			if err := db.ForgetPartials(context.Background(), "bench", true); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if err := db.WarmPartialsOnce(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		reportSpace(b, db)
	})
	b.Run("timeline_page_100", func(b *testing.B) {
		for b.Loop() {
			get(b, "GET", "/v1/sites/bench/users/"+f.longest+"/timeline?limit=100", "")
		}
	})
	b.Run("timeline_heavy_user", func(b *testing.B) {
		for b.Loop() {
			get(b, "GET", "/v1/sites/bench/users/"+f.heavy[0]+"/timeline?limit=100", "")
		}
	})
	b.Run("gdpr_erase_one_user", func(b *testing.B) {
		i := 0
		for b.Loop() {
			get(b, "POST", "/v1/sites/bench/gdpr/delete", `{"subject":{"user_id":"`+f.users[len(f.users)-1-i%len(f.users)]+`"}}`)
			i++
		}
	})
	// Each iteration erases another heavy user (a repeat would find
	// nothing), from the one with the most events down.
	// cpu-ms/op is the process's CPU time per erasure (the writer, the
	// checkpoints, HTTP): on a shared machine it varies less than the time.
	b.Run("gdpr_erase_heavy_user", func(b *testing.B) {
		i := 0
		cpu := processCPU()
		for b.Loop() {
			get(b, "POST", "/v1/sites/bench/gdpr/delete", `{"subject":{"user_id":"`+f.heavy[1+i%(len(f.heavy)-1)]+`"}}`)
			i++
		}
		b.ReportMetric(float64(processCPU()-cpu)/float64(time.Millisecond)/float64(i), "cpu-ms/op")
	})
}

// benchFixtureFile is what a kept database's load found (readsFixture),
// beside it, so that TALLY_BENCH_KEEP_DB=PATH loads once and later runs of
// the same size reuse the file.
type benchFixtureFile struct {
	Events  int
	Longest string
	Users   []string
	Heavy   []string
	Devices int
	Evs     int
}

// keptFixture is the fixture of the kept database at path, when there is
// one of benchEvents events.
func keptFixture(b *testing.B, path string) (readsFixture, bool) {
	if path == "" {
		return readsFixture{}, false
	}
	raw, err := os.ReadFile(path + ".fixture.json")
	if err != nil {
		return readsFixture{}, false
	}
	var k benchFixtureFile
	if err := json.Unmarshal(raw, &k); err != nil || k.Events != benchEvents {
		b.Fatalf("%s.fixture.json is not of a %d-event load: remove %s and it", path, benchEvents, path)
	}
	return readsFixture{longest: k.Longest, users: k.Users, heavy: k.Heavy, devices: k.Devices, events: k.Evs}, true
}

func saveFixture(b *testing.B, path string, f readsFixture) {
	raw, _ := json.Marshal(benchFixtureFile{Events: benchEvents, Longest: f.longest, Users: f.users, Heavy: f.heavy, Devices: f.devices, Evs: f.events})
	if err := os.WriteFile(path+".fixture.json", raw, 0o644); err != nil {
		b.Fatal(err)
	}
}

// keptPartials counts the day partials kept in the database at path (on
// PostgreSQL, the test's database for path).
func keptPartials(b *testing.B, path string) int {
	driver, dsn := "sqlite", storage.FileURI(path)+"?_pragma=busy_timeout(5000)"
	if url := pgBenchDatabaseURL(); url != "" {
		driver, dsn = pgTestDriver, url
	} else if url := testOptions(b, storage.Options{Path: path}).DatabaseURL; url != "" {
		driver, dsn = pgTestDriver, url
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM day_partials`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// reportSpace logs the bytes per event of the loaded database (file and
// WAL after a TRUNCATE checkpoint) and what each table and index takes,
// the figures of docs/storage.md.
func reportSpace(b *testing.B, db *storage.DB) {
	b.Helper()
	file, objects, err := db.Space(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("database: %d bytes, %.1f bytes per event", file, float64(file)/float64(benchEvents))
	for _, o := range objects {
		b.Logf("  %-28s %11d bytes %7.1f per event", o.Name, o.Bytes, float64(o.Bytes)/float64(benchEvents))
	}
	b.ReportMetric(float64(file)/float64(benchEvents), "bytes/event")
}

// createBenchGoals creates the funnel benchmark's 5 goals on the bench site
// of the server at url, unless it has them (a kept database keeps them).
func createBenchGoals(b *testing.B, url string) {
	b.Helper()
	for _, g := range []string{`{"name":"Any page","page_path":"/p/*"}`, `{"name":"Click","event_name":"click"}`,
		`{"name":"Page 1x","page_path":"/p/1*"}`, `{"name":"Signup","event_name":"signup"}`, `{"name":"Page 2","page_path":"/p/2"}`} {
		req, _ := http.NewRequest("POST", url+"/v1/sites/bench/goals", strings.NewReader(g))
		req.Header.Set("Authorization", "Bearer bench")
		res, err := http.DefaultClient.Do(req)
		if err != nil || (res.StatusCode != 201 && res.StatusCode != 409) {
			b.Fatalf("create goal %s: %v %v", g, err, res)
		}
		res.Body.Close()
	}
}
