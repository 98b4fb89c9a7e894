package cli

import (
	"bytes"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tally-analytics/tally/internal/dbtest"
)

// pendingReads are the reads TestTwoInstancesOneDatabase compares but
// does not fail on yet, each with why: parts of the PostgreSQL port that
// other branches finish (docs/postgresql.md#on-postgresql). A mismatch or an
// error there is logged; a read that matches is logged too, so that its entry
// can go. The lead removes entries as those branches merge.
var pendingReads = map[string]string{}

// differingFields are the JSON fields that legitimately differ between
// the PostgreSQL pair and the SQLite instance, by read, with why.
var differingFields = map[string][]string{
	// received_at is when the instance that stored the event received
	// it: the two databases stored each event at a different moment.
	"export": {"received_at"},
	// a goal's created_at is the moment each database created it.
	"goals_list": {"created_at"},
	// The GDPR export's rows carry when each database received the
	// event, linked the ids and wrote the profile, and the session's
	// row id, which each database numbers in its own arrival order.
	"gdpr_export": {"received_at", "created_at", "updated_at", "sessions.id"},
}

// arrivalOrdered are the reads whose arrays list rows in arrival order,
// which differs between databases: they are compared sorted.
var arrivalOrdered = map[string]bool{"gdpr_export": true}

// multiVisitor is one visitor of the test's traffic.
type multiVisitor struct {
	anon, user, ua string
}

// multiEvent is one event, sent in one of several wire formats.
type multiEvent struct {
	id, anon, user, typ, url, referrer, ua string
	ts                                     time.Time
	props                                  map[string]any
}

// multiRequest is one request to the collector: a path, a body and its
// headers, sent once to each side of a pair.
type multiRequest struct {
	path, body string
	headers    map[string]string
}

// TestTwoInstancesOneDatabase runs two real processes on one PostgreSQL
// database and one on SQLite, sends the same visitors' events to the pair
// (every request once to each instance, concurrently, the visitors'
// events out of order, sessions spread over both) and to the SQLite
// instance, and compares every read: both instances of the pair must
// answer what the SQLite one answers (docs/postgresql.md#on-postgresql).
func TestTwoInstancesOneDatabase(t *testing.T) {
	t.Parallel()
	if os.Getenv(dbtest.URLEnv) == "" {
		t.Skip("PostgreSQL only: set TEST_DATABASE_URL to a PostgreSQL 15 server (docs/development.md#both-backends)")
	}
	dbURL := multiDatabase(t)
	bin := buildBinary(t)
	common := []string{"ADMIN_TOKEN=tok", "INGEST_RATE_LIMIT=0", "BOT_FILTER=on"}
	a := start(t, bin, append([]string{"DATABASE_URL=" + dbURL}, common...)...)
	b := start(t, bin, append([]string{"DATABASE_URL=" + dbURL}, common...)...)
	litePath := filepath.Join(t.TempDir(), "tally.db")
	lite := start(t, bin, append([]string{"DATABASE_PATH=" + litePath}, common...)...)

	// Provision through one instance of the pair, and the SQLite one.
	keys := map[*process]string{}
	for _, p := range []*process{a, lite} {
		keys[p] = multiProvision(t, p)
	}
	keys[b] = keys[a]
	// The other instance sees the site and key within a second or so
	// (its listener reloads the tenancy maps on the notification).
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _ := multiCall(t, "GET", b.query+"/v1/sites/web", keys[b], "", nil)
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance B does not see the site and key made on A: got %d, want 200 within 10 s", code)
		}
		time.Sleep(10 * time.Millisecond) // polling for a condition, not ordering
	}

	midnight := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -2)
	requests := multiTraffic(midnight)
	// Every request goes to both instances of the pair (one of them a
	// redelivery, the dedup's to decide), all at once and shuffled; the
	// SQLite instance gets the same requests twice too.
	var wg sync.WaitGroup
	errs := make(chan string, 4*len(requests))
	send := func(targets []*process, seed uint64) {
		defer wg.Done()
		type job struct {
			p *process
			r multiRequest
		}
		var jobs []job
		for _, r := range requests {
			for _, p := range targets {
				jobs = append(jobs, job{p, r})
			}
		}
		rng := rand.New(rand.NewPCG(seed, 7))
		rng.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })
		queue := make(chan job)
		var workers sync.WaitGroup
		for range 6 {
			workers.Add(1)
			go func() {
				defer workers.Done()
				for j := range queue {
					code, body := multiCall(t, "POST", j.p.collector+j.r.path, "", j.r.body, j.r.headers)
					if code != 200 && code != 202 {
						errs <- fmt.Sprintf("%s %s: got %d %s, want 2xx", j.r.path, j.r.body, code, body)
					}
				}
			}()
		}
		for _, j := range jobs {
			queue <- j
		}
		close(queue)
		workers.Wait()
	}
	wg.Add(2)
	go send([]*process{a, b}, 1)
	go send([]*process{lite, lite}, 2)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if t.Failed() {
		t.FailNow()
	}

	// Intake counters: the pair's sums are the SQLite instance's (every
	// event accepted once, every redelivery a duplicate).
	for _, name := range []string{"service_events_received_total", "service_events_accepted_total", "service_events_deduped_total"} {
		pair := multiCounter(t, a, name) + multiCounter(t, b, name)
		if want := multiCounter(t, lite, name); pair != want || want == 0 {
			t.Errorf("%s: got %v on the pair (A+B), want %v as on SQLite", name, pair, want)
		}
	}

	for _, r := range multiReads(midnight) {
		t.Run(r.name, func(t *testing.T) {
			want, wantCode := multiRead(t, lite, keys[lite], r)
			pending, isPending := pendingReads[r.family]
			var problems []string
			if wantCode != 200 {
				problems = append(problems, fmt.Sprintf("SQLite answered %d %s", wantCode, want))
			}
			for _, p := range []struct {
				name string
				p    *process
			}{{"A", a}, {"B", b}} {
				got, code := multiRead(t, p.p, keys[p.p], r)
				if code != wantCode || got != want {
					problems = append(problems, fmt.Sprintf("instance %s: got %d %s, want %d %s", p.name, code, got, wantCode, want))
				}
			}
			switch {
			case isPending && len(problems) > 0:
				t.Logf("known pending (%s): %s", pending, strings.Join(problems, "; "))
			case isPending:
				t.Logf("passes now: take %q off pendingReads", r.family)
			case len(problems) > 0:
				t.Error(strings.Join(problems, "\n"))
			}
		})
	}

	// The rollups and usage counters as stored: the views over the
	// pair's slot rows sum to SQLite's rows.
	pg, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	sq, err := sql.Open("sqlite", litePath)
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	for _, q := range []string{
		`SELECT site_id, month, accepted FROM site_usage ORDER BY site_id, month`,
		`SELECT site_id, day, type, count FROM daily_events ORDER BY site_id, day, type`,
		`SELECT site_id, day, dimension, value, count FROM daily_dimensions ORDER BY site_id, day, dimension, value`,
		`SELECT site_id, day, sessions, duration_ms, events, bounces FROM daily_sessions ORDER BY site_id, day`,
		`SELECT COUNT(*), COUNT(DISTINCT anon_id) FROM events`,
		`SELECT COUNT(*) FROM sessions`,
		`SELECT site_id, user_id, anon_id FROM identity_links ORDER BY site_id, user_id, anon_id`,
	} {
		got, want := multiRows(t, pg, q), multiRows(t, sq, q)
		if got != want {
			t.Errorf("%s:\ngot  %s on PostgreSQL,\nwant %s as on SQLite", q, got, want)
		}
	}
}

// multiDatabase creates an empty database on TEST_DATABASE_URL's server
// for the test, and drops it (ending the processes' sessions) at its end.
func multiDatabase(t *testing.T) string {
	t.Helper()
	admin, err := sql.Open("pgx", os.Getenv(dbtest.URLEnv))
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("t_multi_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	if _, err := admin.Exec(`CREATE DATABASE ` + name); err != nil {
		admin.Close()
		t.Fatalf("create database: %v", err)
	}
	// Registered first, so it runs after the processes' cleanups have
	// stopped them.
	t.Cleanup(func() {
		defer admin.Close()
		if _, err := admin.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := dbtest.DatabaseURL(name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// multiProvision makes the workspace, site "web", a reading key and the
// goals through p's query API, and returns the key.
func multiProvision(t *testing.T, p *process) string {
	t.Helper()
	for _, c := range []struct{ path, body string }{
		{"/v1/workspaces", `{"name":"Acme","slug":"acme"}`},
		{"/v1/workspaces/acme/sites", `{"id":"web","name":"Web"}`},
		{"/v1/sites/web/goals", `{"name":"Pricing","page_path":"/pricing"}`},
		{"/v1/sites/web/goals", `{"name":"Docs","page_path":"/docs/**"}`},
		{"/v1/sites/web/goals", `{"name":"Signup","event_name":"signup"}`},
		{"/v1/sites/web/goals", `{"name":"Pro purchase","event_name":"purchase","property":{"name":"plan","value":"pro"}}`},
	} {
		if code, body := multiCall(t, "POST", p.query+c.path, "tok", c.body, nil); code != 201 {
			t.Fatalf("POST %s: got %d %s, want 201", c.path, code, body)
		}
	}
	code, body := multiCall(t, "POST", p.query+"/v1/workspaces/acme/keys", "tok", `{"label":"reader","scopes":["query:read","admin"],"sites":["web"]}`, nil)
	var key struct {
		Key string `json:"plaintext"`
	}
	if json.Unmarshal([]byte(body), &key); code != 201 || key.Key == "" {
		t.Fatalf("create key: got %d %s, want 201 with the key", code, body)
	}
	return key.Key
}

// multiTraffic is the test's input: 30 visitors, 5 of them identified
// (two devices of one user), each with a visit that crosses midnight,
// most with a later one and some with one three days earlier; each
// visitor's events shuffled and cut into requests of every intake route.
func multiTraffic(midnight time.Time) []multiRequest {
	rng := rand.New(rand.NewPCG(17, 4))
	uas := []string{
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_1) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1.15",
		"Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1",
	}
	paths := []string{"/", "/pricing", "/docs/start", "/docs/api/keys", "/blog/caf%C3%A9", "/about"}
	referrers := []string{"", "https://news.test/story/12", "https://www.search.test/?q=x", "https://shop.example/"}
	newID := func() string {
		return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", rng.Uint32(), rng.Uint32()&0xffff, rng.Uint32()&0xfff, rng.Uint32()&0xfff, rng.Uint64()&0xffffffffffff)
	}
	var visitors []multiVisitor
	for i := range 30 {
		v := multiVisitor{anon: fmt.Sprintf("anon-%02d", i), ua: uas[i%len(uas)]}
		if i < 5 {
			v.user = fmt.Sprintf("user-%d", i/2) // anon-00 and anon-01 are one user's two devices
		}
		visitors = append(visitors, v)
	}
	var requests []multiRequest
	for i, v := range visitors {
		var events []multiEvent
		visit := func(startAt time.Time, n int) {
			at := startAt
			for k := range n {
				e := multiEvent{id: newID(), anon: v.anon, ua: v.ua, ts: at, typ: "pageview",
					url: "https://shop.example" + paths[rng.IntN(len(paths))]}
				if k == 0 {
					e.referrer = referrers[rng.IntN(len(referrers))]
					if rng.IntN(2) == 0 {
						e.url += "?utm_source=mail&utm_campaign=nov"
					}
				}
				switch r := rng.IntN(10); {
				case k > 0 && r < 2:
					e.typ, e.props = "click", map[string]any{"button": []string{"buy", "more"}[rng.IntN(2)]}
				case k > 0 && r == 2:
					e.typ, e.url = "signup", ""
				case k > 0 && r == 3:
					e.typ, e.url, e.props = "purchase", "", map[string]any{"plan": []string{"pro", "free"}[rng.IntN(2)], "amount": 49, "currency": "EUR"}
				}
				if v.user != "" && k >= n/2 {
					e.user = v.user
				}
				events = append(events, e)
				at = at.Add(time.Duration(30+rng.IntN(400))*time.Second + time.Duration(rng.IntN(1000))*time.Millisecond)
			}
			if v.user != "" {
				events = append(events, multiEvent{id: newID(), anon: v.anon, ua: v.ua, ts: at, typ: "identify", user: v.user,
					props: map[string]any{"plan": "pro"}})
			}
		}
		visit(midnight.Add(-time.Duration(10+rng.IntN(30))*time.Minute), 6+rng.IntN(6))
		if i%3 != 0 {
			visit(midnight.Add(time.Duration(3+rng.IntN(5))*time.Hour), 1+rng.IntN(4))
		}
		if i%4 == 0 {
			visit(midnight.AddDate(0, 0, -3).Add(time.Duration(rng.IntN(20))*time.Hour), 2+rng.IntN(3))
		}
		rng.Shuffle(len(events), func(i, j int) { events[i], events[j] = events[j], events[i] })
		for len(events) > 0 {
			n := min(1+rng.IntN(4), len(events))
			chunk := events[:n]
			events = events[n:]
			switch rng.IntN(4) {
			case 0: // native, one by one (the request's User-Agent is the visitor's)
				for _, e := range chunk {
					requests = append(requests, multiRequest{path: "/v1/events", body: multiNative(e, false),
						headers: map[string]string{"Authorization": "Bearer web", "User-Agent": e.ua}})
				}
			case 1: // server to server, a batch
				var parts []string
				for _, e := range chunk {
					parts = append(parts, multiNative(e, true))
				}
				requests = append(requests, multiRequest{path: "/v1/s2s/events", body: "[" + strings.Join(parts, ",") + "]",
					headers: map[string]string{"Authorization": "Bearer web"}})
			case 2: // Segment's batch
				var parts []string
				for _, e := range chunk {
					parts = append(parts, multiSegment(e))
				}
				requests = append(requests, multiRequest{path: "/v1/batch", body: `{"batch":[` + strings.Join(parts, ",") + `]}`,
					headers: map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("web:"))}})
			default: // Segment's single calls
				for _, e := range chunk {
					call := map[string]string{"pageview": "page", "identify": "identify"}[e.typ]
					if call == "" {
						call = "track"
					}
					requests = append(requests, multiRequest{path: "/v1/" + call, body: multiSegment(e),
						headers: map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("web:"))}})
				}
			}
		}
	}
	return requests
}

// multiNative is e as the native envelope (s2s: with its user_agent).
func multiNative(e multiEvent, s2s bool) string {
	m := map[string]any{"id": e.id, "site_id": "web", "anon_id": e.anon, "type": e.typ, "ts": e.ts.Format(time.RFC3339Nano)}
	if e.url != "" {
		m["url"] = e.url
	}
	if e.referrer != "" {
		m["referrer"] = e.referrer
	}
	if e.user != "" {
		m["user_id"] = e.user
	}
	if e.typ == "identify" {
		m["traits"] = e.props
	} else if e.props != nil {
		m["properties"] = e.props
	}
	if s2s {
		m["user_agent"] = e.ua
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// multiSegment is e as a Segment message.
func multiSegment(e multiEvent) string {
	m := map[string]any{"messageId": e.id, "anonymousId": e.anon, "timestamp": e.ts.Format(time.RFC3339Nano),
		"context": map[string]any{"userAgent": e.ua}}
	if e.user != "" {
		m["userId"] = e.user
	}
	props := map[string]any{}
	for k, v := range e.props {
		props[k] = v
	}
	switch e.typ {
	case "pageview":
		m["type"] = "page"
		props["url"] = e.url
		if e.referrer != "" {
			props["referrer"] = e.referrer
		}
	case "identify":
		m["type"], m["traits"] = "identify", e.props
		props = nil
	default:
		m["type"], m["event"] = "track", e.typ
	}
	if len(props) > 0 {
		m["properties"] = props
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// multiReadSpec is one read: a method, a path, a body, the family it
// belongs to (for pendingReads and differingFields), and whether its
// answer lists rows in an order that depends on arrival (then the lines
// are compared sorted).
type multiReadSpec struct {
	name, family, method, path, body string
	linesUnordered                   bool
}

// multiReads is every read compared, over the days around midnight.
func multiReads(midnight time.Time) []multiReadSpec {
	from := midnight.AddDate(0, 0, -4).Format("2006-01-02")
	to := midnight.AddDate(0, 0, 1).Format("2006-01-02")
	days := "from=" + from + "&to=" + to
	rng := `"date_range":["` + from + `","` + to + `"]`
	hours := `"date_range":["` + midnight.Add(-2*time.Hour).Format(time.RFC3339) + `","` + midnight.Add(10*time.Hour).Format(time.RFC3339) + `"]`
	var reads []multiReadSpec
	add := func(name, family, method, path, body string) {
		reads = append(reads, multiReadSpec{name: name, family: family, method: method, path: path, body: body})
	}
	for _, r := range []string{"pageviews", "events", "sessions"} {
		add(r, "rollups", "GET", "/v1/sites/web/"+r+"?"+days, "")
	}
	for _, d := range []string{"url", "referrer", "country", "browser", "os", "device_type"} {
		add("breakdown_"+d, "breakdown", "GET", "/v1/sites/web/breakdown?dimension="+d+"&"+days, "")
	}
	add("realtime", "realtime", "GET", "/v1/sites/web/realtime", "")
	add("properties", "properties", "GET", "/v1/sites/web/properties", "")
	reads = append(reads, multiReadSpec{name: "export_ndjson", family: "export", method: "GET", path: "/v1/sites/web/export?format=ndjson&" + days, linesUnordered: true})
	reads = append(reads, multiReadSpec{name: "export_csv", family: "export_csv", method: "GET", path: "/v1/sites/web/export?format=csv&" + days, linesUnordered: true})
	for _, u := range []string{"user-0", "user-1", "user-2"} {
		add("timeline_"+u, "timeline", "GET", "/v1/sites/web/users/"+u+"/timeline?limit=100", "")
		add("timeline_page_"+u, "timeline", "GET", "/v1/sites/web/users/"+u+"/timeline?limit=3&before="+url.QueryEscape(midnight.Add(time.Hour).Format(time.RFC3339)), "")
		add("gdpr_export_"+u, "gdpr_export", "POST", "/v1/sites/web/gdpr/export", `{"subject":{"user_id":"`+u+`"}}`)
	}
	add("gdpr_export_anon", "gdpr_export", "POST", "/v1/sites/web/gdpr/export", `{"subject":{"anon_id":"anon-07"}}`)
	add("goals_list", "goals_list", "GET", "/v1/sites/web/goals", "")
	all := `"metrics":["visitors","visits","pageviews","events","views_per_visit","bounce_rate","visit_duration"]`
	eventMetrics := `"metrics":["visitors","pageviews","events"]`
	add("query_aggregate", "visit_metrics", "POST", "/v1/sites/web/query", `{`+all+`,`+rng+`}`)
	add("query_aggregate_events", "query", "POST", "/v1/sites/web/query", `{`+eventMetrics+`,`+rng+`}`)
	for _, unit := range []string{"time:hour", "time:day", "time:week", "time:month", "time"} {
		r := rng
		if unit == "time:hour" {
			r = hours
		}
		add("query_"+unit, "visit_metrics", "POST", "/v1/sites/web/query", `{`+all+`,"dimensions":["`+unit+`"],`+r+`,"include":{"time_labels":true,"total_rows":true}}`)
		add("query_events_"+unit, "query", "POST", "/v1/sites/web/query", `{`+eventMetrics+`,"dimensions":["`+unit+`"],`+r+`}`)
	}
	for _, d := range []string{"event:page", "event:name", "event:props:plan", "event:props:button"} {
		add("query_"+d, "query", "POST", "/v1/sites/web/query", `{`+eventMetrics+`,"dimensions":["`+d+`"],`+rng+`}`)
	}
	for _, d := range []string{"visit:entry_page", "visit:exit_page", "visit:source", "visit:referrer", "visit:utm_source", "visit:utm_campaign",
		"visit:country", "visit:city", "visit:browser", "visit:os", "visit:device"} {
		add("query_"+d, "visit_metrics", "POST", "/v1/sites/web/query", `{`+all+`,"dimensions":["`+d+`"],`+rng+`}`)
	}
	add("query_two_dimensions", "visit_metrics", "POST", "/v1/sites/web/query", `{`+all+`,"dimensions":["time:day","visit:browser"],`+rng+`}`)
	for name, f := range map[string]string{
		"is":       `[["is","event:page",["/pricing","/"]]]`,
		"contains": `[["contains","event:page",["docs"]]]`,
		"matches":  `[["matches","event:page",["^/docs/.*"]]]`,
		"visit_is": `[["is_not","visit:browser",["Firefox"]],["is","visit:source",["news.test","Direct / None"]]]`,
		"or":       `[["or",[["is","event:name",["signup"]],["contains","visit:entry_page",["pricing"]]]]]`,
	} {
		add("query_filter_"+name, "query", "POST", "/v1/sites/web/query", `{`+eventMetrics+`,"filters":`+f+`,`+rng+`}`)
		metrics := all
		if strings.Contains(f, `"event:page"`) {
			// Plausible's rule: no views_per_visit under a page filter.
			metrics = strings.Replace(all, `"views_per_visit",`, "", 1)
		}
		add("query_visits_filter_"+name, "visit_metrics", "POST", "/v1/sites/web/query", `{`+metrics+`,"filters":`+f+`,"dimensions":["visit:device"],`+rng+`}`)
	}
	add("query_by_goal", "goal_dimension", "POST", "/v1/sites/web/query", `{"metrics":["visitors","events","conversion_rate"],"dimensions":["event:goal"],`+rng+`}`)
	add("query_goal_filter", "goal", "POST", "/v1/sites/web/query", `{"metrics":["visitors","conversion_rate","group_conversion_rate"],"dimensions":["visit:browser"],"filters":[["is","event:goal",["Signup"]]],`+rng+`}`)
	add("query_revenue", "goal", "POST", "/v1/sites/web/query", `{"metrics":["visitors","events"],"filters":[["is","event:goal",["Pro purchase"]]],`+rng+`}`)
	add("funnel", "funnel", "POST", "/v1/sites/web/funnel", `{"steps":["Pricing","Docs","Signup"],`+rng+`}`)
	add("funnel_filtered", "funnel", "POST", "/v1/sites/web/funnel", `{"steps":["Docs","Pro purchase"],"filters":[["is_not","visit:browser",["Safari"]]],`+rng+`}`)
	add("plausible_query", "query", "POST", "/api/v2/query", `{"site_id":"web",`+eventMetrics+`,"dimensions":["event:name"],`+rng+`}`)
	return reads
}

// multiRead answers r on p, normalised for comparison: JSON re-encoded
// with sorted keys and the read's differing fields removed; NDJSON and
// CSV lines sorted when their order is the arrival's.
func multiRead(t *testing.T, p *process, key string, r multiReadSpec) (string, int) {
	t.Helper()
	code, body := multiCall(t, r.method, p.query+r.path, key, r.body, nil)
	if code != 200 {
		return body, code
	}
	drop := differingFields[r.family]
	norm := func(s string) string {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return s
		}
		multiDrop(v, drop)
		if arrivalOrdered[r.family] {
			multiSort(v)
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	if !r.linesUnordered {
		return norm(body), code
	}
	lines := strings.Split(strings.TrimRight(body, "\n"), "\n")
	header := ""
	if r.family == "export_csv" && len(lines) > 0 {
		header, lines = lines[0], lines[1:]
		// received_at, the last column, is each database's own moment.
		for i, l := range lines {
			lines[i] = l[:strings.LastIndexByte(l, ',')]
		}
	}
	for i := range lines {
		lines[i] = norm(lines[i])
	}
	sort.Strings(lines)
	return header + "\n" + strings.Join(lines, "\n"), code
}

// multiDrop removes the fields named in drop from v, at any depth; a
// name "list.field" removes field from the objects of v's array list.
func multiDrop(v any, drop []string) {
	switch v := v.(type) {
	case map[string]any:
		for _, f := range drop {
			if list, field, ok := strings.Cut(f, "."); ok {
				rows, _ := v[list].([]any)
				for _, row := range rows {
					if m, ok := row.(map[string]any); ok {
						delete(m, field)
					}
				}
				continue
			}
			delete(v, f)
		}
		for _, x := range v {
			multiDrop(x, drop)
		}
	case []any:
		for _, x := range v {
			multiDrop(x, drop)
		}
	}
}

// multiSort sorts every array in v, at any depth, by its elements' JSON.
func multiSort(v any) {
	switch v := v.(type) {
	case map[string]any:
		for _, x := range v {
			multiSort(x)
		}
	case []any:
		for _, x := range v {
			multiSort(x)
		}
		sort.Slice(v, func(i, j int) bool {
			a, _ := json.Marshal(v[i])
			b, _ := json.Marshal(v[j])
			return string(a) < string(b)
		})
	}
}

// multiCall sends a request and returns the status and body.
func multiCall(t testing.TB, method, url, token, body string, headers map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

var multiCounterLine = regexp.MustCompile(`^([a-z_]+)(\{[^}]*\})? ([0-9.e+]+)$`)

// multiCounter sums the series of the metric name on p's /metrics.
func multiCounter(t testing.TB, p *process, name string) float64 {
	t.Helper()
	_, body := multiCall(t, "GET", p.collector+"/metrics", "", "", nil)
	sum := 0.0
	for _, line := range strings.Split(body, "\n") {
		m := multiCounterLine.FindStringSubmatch(line)
		if m == nil || m[1] != name {
			continue
		}
		f, _ := strconv.ParseFloat(m[3], 64)
		sum += f
	}
	return sum
}

// multiRows is the rows of q on db as one line of text.
func multiRows(t *testing.T, db *sql.DB, q string) string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out bytes.Buffer
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if b, ok := v.([]byte); ok {
				vals[i] = string(b)
			}
		}
		fmt.Fprint(&out, vals, " ")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}
