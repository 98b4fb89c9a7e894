package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tally-analytics/tally/schema"
	"github.com/tally-analytics/tally/storage"
)

// fuzzCollector is the real collector over a real database with the
// tracking plan of testdata and site "web", for the intake fuzzers.
func fuzzCollector(f *testing.F) http.Handler {
	f.Helper()
	db, err := openTestDB(f, context.Background(), storage.Options{Path: filepath.Join(f.TempDir(), "fuzz.db")})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	plan, err := schema.LoadPlan("../testdata/plan.json")
	if err != nil {
		f.Fatal(err)
	}
	srv := New(Config{Plan: plan, Logger: discardLogger(), Quota: 1 << 30}, db)
	ws, _ := db.CreateWorkspace(context.Background(), storage.Actor{Kind: storage.ActorSystem}, "F", "f")
	db.CreateSite(context.Background(), storage.Actor{Kind: storage.ActorSystem}, ws, "web", "Web")
	h := srv.Collector()
	return h
}

// hostileValues are JSON values (some not valid JSON) that have failed a
// backend where the other took them: bytes not UTF-8 (PostgreSQL's text
// refused them), NUL escaped and raw, lone surrogates (PostgreSQL's json
// operators refuse to unescape them), numbers no float holds, and nesting
// near encoding/json's limit of 10,000. The intake fuzzers' seeds put
// each where a format carries text, so every run of the package's tests
// sends them on each backend (docs/development.md#both-backends, Fuzzing).
func hostileValues() []string {
	return []string{
		"\"a\xffb\xc3\"", `"\u0000"`, "\"a\x00b\"", `"\udc00\ud800z"`, `"\ud83d\ude00"`,
		`1e999999999`, `-0.0e-999`, strings.Repeat("9", 400),
		strings.Repeat("[", 9990) + strings.Repeat("]", 9990),
		strings.Repeat(`{"a":`, 4990) + "1" + strings.Repeat("}", 4990),
	}
}

// hostileSeeds adds to f, for each hostile value, each of the formats'
// bodies that forms makes of it (the value in the place of V, and as an
// object key in the place of K).
func hostileSeeds(f *testing.F, forms ...string) {
	for _, v := range hostileValues() {
		key := v
		if !strings.HasPrefix(v, `"`) {
			key = `"k"`
		}
		for _, form := range forms {
			f.Add([]byte(strings.NewReplacer("V", v, "K", key).Replace(form)))
		}
	}
}

// FuzzIntake posts arbitrary bodies to the real collector over a real
// database: every answer must be a 202 or a 4xx, never a 5xx or a panic.
func FuzzIntake(f *testing.F) {
	for _, seed := range []string{
		`{"id":"3f2504e0-4f89-41d3-9a0c-0305e82c3301","site_id":"web","anon_id":"a","type":"pageview"}`,
		`[{"id":"3f2504e0-4f89-41d3-9a0c-0305e82c3302","site_id":"web","anon_id":"a","type":"identify","user_id":"u","traits":{"x":1}}]`,
		`{"id":"3f2504e0-4f89-41d3-9a0c-0305e82c3303","site_id":"web","anon_id":"a","type":"purchase","properties":{"amount":-1}}`,
		`{"id":"3f2504e0-4f89-41d3-9a0c-0305e82c3304","site_id":"web","anon_id":"a","type":"x","consent":"denied","url":"%zz?q"}`,
		`{"id":"3f2504e0-4f89-41d3-9a0c-0305e82c3305","site_id":"web","anon_id":"a","type":"x","ts":"1999-01-01T00:00:00Z"}`,
		`[1,"a",null]`, `{`, ``, `null`,
	} {
		f.Add([]byte(seed))
	}
	hostileSeeds(f,
		`{"id":"3f2504e0-4f89-41d3-9a0c-0305e82c3306","site_id":"web","anon_id":V,"type":"pageview","url":V,"referrer":V}`,
		`{"id":"3f2504e0-4f89-41d3-9a0c-0305e82c3307","site_id":"web","anon_id":"a","type":"pageview","properties":{"p":V,K:1}}`,
		`[{"id":"3f2504e0-4f89-41d3-9a0c-0305e82c3308","site_id":"web","anon_id":"a","type":"identify","user_id":V,"traits":{"t":V,K:2},"user_agent":V,"x":V}]`,
		`{"id":"3f2504e0-4f89-41d3-9a0c-0305e82c3309","site_id":"web","anon_id":"a","type":"purchase","properties":{"amount":V},"ts":V}`)
	h := fuzzCollector(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range []string{"/v1/events", "/v1/s2s/events"} {
			req := httptest.NewRequest("POST", path, bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer web")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusAccepted && (rec.Code < 400 || rec.Code >= 500) {
				t.Fatalf("%s: got %d %s for body %q", path, rec.Code, rec.Body, body)
			}
		}
	})
}

// FuzzQueryAPI sends arbitrary methods, paths, query strings and bodies to
// the real query API as the admin: every answer must be below 500.
func FuzzQueryAPI(f *testing.F) {
	seeds := []struct{ method, path, body string }{
		{"POST", "/v1/workspaces", `{"name":"a","slug":"a"}`},
		{"PATCH", "/v1/workspaces/f", `{"name":"x"}`},
		{"POST", "/v1/workspaces/f/sites", `{"id":"s","name":"S"}`},
		{"POST", "/v1/workspaces/f/keys", `{"label":"k","scopes":["admin"]}`},
		{"DELETE", "/v1/workspaces/f/keys/x", ``},
		{"GET", "/v1/workspaces/f/audit?limit=5&cursor=2026-01-01T00:00:00Z", ``},
		{"GET", "/v1/sites/web/pageviews?from=2026-01-01&to=2026-01-31", ``},
		{"GET", "/v1/sites/web/breakdown?dimension=url&from=2026-01-01&to=2026-01-31&limit=3", ``},
		{"GET", "/v1/sites/web/users/u/timeline?limit=2&before=2026-01-01T00:00:00.5Z", ``},
		{"GET", "/v1/sites/web/dlq?cursor=2026-01-01T00:00:00Z", ``},
		{"POST", "/v1/sites/web/dlq/x/replay", ``},
		{"POST", "/v1/sites/web/gdpr/delete", `{"subject":{"anon_id":"a"}}`},
		{"POST", "/v1/sites/web/gdpr/export", `{"subject":{"user_id":"u"}}`},
		{"POST", "/v1/sites/web/sourcemaps", `{"release":"1","file":"a.js","map":"YQ=="}`},
		{"POST", "/v1/webhooks/payments/web", `{"id":"evt","type":"charge.succeeded"}`},
		{"POST", "/v1/sites/web/webhook-secrets", `{"adapter":"payments"}`},
		{"DELETE", "/v1/sites/web/webhook-secrets/99", ``},
		{"GET", "/v1/ui/app.js", ``},
		{"PATCH", "/v1/sites/web", `{"retention_days":30,"name":"W"}`},
		{"POST", "/v1/workspaces/f/keys", `{"label":"k","scopes":["ingest:write"],"sites":["web"]}`},
		{"POST", "/v1/backup", `{"path":"/tmp/x","force":true}`},
		{"GET", "/v1/sites/web/realtime", ""},
		{"GET", "/v1/sites/web/export?from=2026-01-01&to=2026-01-31&format=csv", ""},
		{"GET", "/v1/sites/web/export?from=2026-01-01&to=2026-01-31&format=ndjson%00", ""},
		{"PATCH", "/v1/sites/web", `{"time_zone":"Europe/Berlin"}`},
		{"POST", "/v1/sites/web/query", `{"metrics":["visitors","pageviews","bounce_rate"],"date_range":"7d","dimensions":["visit:source"]}`},
		{"POST", "/v1/sites/web/query", `{"metrics":["visitors","percentage"],"date_range":["2026-01-01","2026-01-31"],"dimensions":["time:day","event:props:plan"],"order_by":[["visitors","asc"]],"pagination":{"limit":2,"offset":1},"include":{"total_rows":true,"time_labels":true}}`},
		{"POST", "/v1/sites/web/query", `{"metrics":["events"],"date_range":["2026-01-01T00:00:00+02:00","2026-01-02T00:00:00Z"],"filters":[["or",[["not",["matches","event:page",["^/a(b|c)*$"]]],["contains","visit:city",["x"],{"case_sensitive":false}]]]]}`},
		{"POST", "/v1/sites/web/query", `{"metrics":["visits"],"date_range":"month","include":{"comparisons":{"mode":"custom","date_range":["2025-01-01","2025-01-31"]}}}`},
		{"POST", "/api/v2/query", `{"site_id":"web","metrics":["visitors"],"date_range":"all","dimensions":["time"]}`},
		// Issue 31 item 6: the new parsing through both query routes.
		{"POST", "/api/v2/query", `{"site_id":"web","metrics":["visitors","scroll_depth","time_on_page"],"date_range":"realtime","dimensions":["time:minute","event:page"],"filters":[["has_done",["is","event:goal",["x"]]]]}`},
		{"POST", "/api/v2/query", `{"site_id":"WEB","metrics":["visitors"],"date_range":"30m","dimensions":["visit:channel","event:hostname","visit:browser_version","visit:os_version"],"filters":[["has_not_done",["matches","event:page",["^/"],{"case_sensitive":false}]]]}`},
		{"POST", "/v1/sites/web/query", `{"metrics":["total_revenue","visitors"],"date_range":"24h","dimensions":["visit:region","visit:city"],"filters":[["contains_not","visit:city_name",["b"],{"case_sensitive":true}]]}`},
		{"POST", "/api/v2/query", `{"site_id":["web"],"metrics":["visitors"],"date_range":"all"}`},
		// Saved funnels: steps by id and name, bad ones.
		{"POST", "/v1/sites/web/goals", `{"name":"A","event_name":"a"}`},
		{"POST", "/v1/sites/web/funnels", `{"name":"F","steps":[1,"A",1.5,null,9223372036854775808,{"x":1}]}`},
		{"PATCH", "/v1/sites/web/funnels/1", `{"steps":["A","A"],"name":"\u0000"}`},
		{"DELETE", "/v1/sites/web/funnels/-1", ``},
		// Issue 32: accounts, settings, shared links, email.
		{"POST", "/v1/workspaces/f/invitations", `{"email":"a@example.com","role":"viewer"}`},
		{"DELETE", "/v1/workspaces/f/invitations/x%00", ``},
		{"PATCH", "/v1/workspaces/f/members/u", `{"role":["owner"]}`},
		{"POST", "/v1/auth/signin", `{"email":"a@example.com","password":1}`},
		{"POST", "/v1/auth/invitations/accept", `{"token":"","password":"x"}`},
		{"POST", "/v1/sites/web/shared-links", `{"label":"L","password":"pw","allowed_origins":["https://a.test/x",7]}`},
		{"PATCH", "/v1/sites/web/shared-links/1", `{"password":null,"allowed_origins":null}`},
		{"GET", "/share/%ff", ``},
		{"POST", "/share/x/auth", `{"password":{}}`},
		{"GET", "/v1/share", ``},
		{"POST", "/v1/sites/web/email-reports", `{"email":"a@example.com","weekly":"yes"}`},
		{"DELETE", "/v1/sites/web/email-reports", `{"email":""}`},
		{"PUT", "/v1/sites/web/traffic-alerts", `{"recipients":["a@example.com"],"spike_visitors":-1,"drop_percent":101}`},
		{"GET", "/unsubscribe/%00", ``},
		{"POST", "/unsubscribe/x.y", ``},
		{"POST", "/v1/sites/web/imports/goatcounter?file=../../x", "\x1f\x8b not gzip"},
		{"POST", "/v1/sites/web/imports/nope", ``},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, []byte(s.body))
	}
	db, err := openTestDB(f, context.Background(), storage.Options{Path: filepath.Join(f.TempDir(), "q.db")})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	srv := New(Config{AdminToken: "fuzz", Logger: discardLogger(), CollectorURL: "http://127.0.0.1:1"}, db)
	ws, _ := db.CreateWorkspace(context.Background(), storage.Actor{Kind: storage.ActorSystem}, "F", "f")
	db.CreateSite(context.Background(), storage.Actor{Kind: storage.ActorSystem}, ws, "web", "Web")
	h := srv.Query()
	f.Fuzz(func(t *testing.T, method, path string, body []byte) {
		if method == "" || !strings.HasPrefix(path, "/") || strings.ContainsAny(method, " \t\r\n") {
			return
		}
		req, err := http.NewRequest(method, "http://x"+path, bytes.NewReader(body))
		if err != nil {
			return // not a request a client could send
		}
		req.Header.Set("Authorization", "Bearer fuzz")
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s: got %d %s", method, path, rec.Code, rec.Body)
		}
	})
}

// FuzzQueryBody posts arbitrary bodies to both routes of the query API
// with a query:read key restricted to one site that holds events, visits
// and goals, so that the reads run: every answer must be below 500. It
// runs on PostgreSQL as on SQLite (TEST_DATABASE_URL; the seeds in every
// go test run), where matches filters take another path (docs/postgresql.md#on-postgresql).
func FuzzQueryBody(f *testing.F) {
	for _, seed := range []string{
		`{"metrics":["visitors","pageviews","bounce_rate","visit_duration","views_per_visit","visits"],"date_range":"all","dimensions":["visit:source"]}`,
		`{"metrics":["visitors","percentage","events"],"date_range":["2026-01-01","2026-01-31"],"dimensions":["time:day","event:props:plan"],"order_by":[["visitors","asc"]],"pagination":{"limit":2,"offset":1},"include":{"total_rows":true,"time_labels":true}}`,
		`{"metrics":["events"],"date_range":["2026-01-10T00:00:00+02:00","2026-01-20T23:59:59Z"],"filters":[["or",[["not",["matches","event:page",["^/a(b|c)*$"]]],["contains","visit:city",["ber"],{"case_sensitive":false}]]]]}`,
		`{"metrics":["visitors","bounce_rate"],"date_range":"month","filters":[["matches","event:page",["^/pricing$","^/blog/"]],["matches_not","visit:country",["^F"]],["matches","event:props:plan",["^p"]]]}`,
		`{"metrics":["visitors","conversion_rate","events"],"date_range":"91d","dimensions":["event:goal"],"filters":[["matches","event:goal",["^Sign"]]]}`,
		`{"metrics":["visits","visitors"],"date_range":"30d","dimensions":["time"],"include":{"comparisons":{"mode":"previous_period"},"imports":true}}`,
		`{"metrics":["visitors"],"date_range":"7d","filters":[["matches","event:page",["(?:xxxxxxxxxx){1000}"]]]}`,
		`{"metrics":["visitors"],"date_range":"year","dimensions":["visit:entry_page","visit:exit_page","visit:browser","visit:os","visit:device","visit:country","visit:city","event:name"]}`,
		`{"metrics":["total_revenue","average_revenue"],"date_range":"all","filters":[["is","event:goal",["Signup"]]]}`,
		`{"metrics":["visitors","percentage"],"date_range":"all","dimensions":["visit:region_name","visit:city","visit:city_name"],"filters":[["or",[["matches_not","visit:region_name",["^B"]],["contains","visit:country_name",["y"],{"case_sensitive":false}],["is","visit:region",["DE-BE"]]]]],"include":{"comparisons":{"mode":"previous_period"}}}`,
		`{"site_id":"web","metrics":["visitors"],"date_range":["2026-01-01","2026-01-02"],"filters":[["and",[["is","event:name",["signup"],{"case_sensitive":false}],["not",["is_not","visit:utm_source",["news"]]]]]]}`,
		`{"metrics":["visitors"],"date_range":"day","dimensions":["time:hour"],"filters":[["matches","visit:referrer",[".*","\\pL+","[^\\x00-\\x{10FFFF}]"]]]}`,
		`{"metrics":[],"date_range":"7d"}`, `[]`, `{`, ``, `null`, `{"metrics":["visitors"],"date_range":["2026-02-30","x"]}`,
		// Issue 31: behavioural filters, live ranges, weeks compared,
		// revenue by goal, folded negations, property negations, aliases.
		`{"metrics":["visitors","visits","bounce_rate","pageviews"],"date_range":"all","filters":[["has_done",["or",[["is","event:goal",["Signup"]],["matches","event:page",["^/blog"]]]]],["not",["has_not_done",["contains_not","event:props:plan",["p"],{"case_sensitive":false}]]]]}`,
		`{"metrics":["visitors"],"date_range":"realtime","dimensions":["time:hour"],"filters":[["has_done",["is","visit:country",["DE"]]]]}`,
		`{"metrics":["visitors","events"],"date_range":"30m","dimensions":["event:page"],"include":{"comparisons":{"mode":"previous_period"}}}`,
		`{"metrics":["visits","percentage"],"date_range":"24h","dimensions":["visit:source"],"include":{"comparisons":{"mode":"year_over_year"},"imports":true}}`,
		`{"metrics":["visitors","percentage"],"date_range":["2025-12-21","2026-01-31"],"dimensions":["time:week"],"include":{"comparisons":{"mode":"previous_period"},"time_labels":true}}`,
		`{"metrics":["visitors","total_revenue","average_revenue","conversion_rate"],"date_range":"all","dimensions":["event:goal","time:day"],"filters":[["is","event:goal",["Signup","Blog"]]],"include":{"comparisons":{"mode":"custom","date_range":["2025-01-01","2025-01-31"]}}}`,
		`{"metrics":["visitors"],"date_range":"7d","filters":[["is_not","visit:os",["mac"],{"case_sensitive":false}],["matches_not","event:props:plan",["^p[0-9]+$"]]]}`,
		`{"site_id":"Shop.Test","metrics":["visitors"],"date_range":"month"}`,
		`{"site_id":"other","metrics":["visitors"],"date_range":"month"}`,
		// Saved segments: 1 and 2 are web's, 3 is other's.
		`{"metrics":["visitors","visits","bounce_rate"],"date_range":"all","dimensions":["visit:country"],"filters":[["is","segment",[1]]]}`,
		`{"metrics":["visitors","events"],"date_range":["2026-01-01","2026-01-31"],"filters":[["or",[["is","segment",[1,2]],["not",["is","segment",[2]]]]],["is","event:page",["/pricing"]]],"include":{"comparisons":{"mode":"previous_period"}}}`,
		`{"metrics":["visitors"],"date_range":"7d","filters":[["has_done",["is","segment",[2]]],["is","segment",[3]]]}`,
		`{"metrics":["visitors"],"date_range":"7d","filters":[["is","segment",["1",1.5,-1,null,9223372036854775808]],["is_not","segment",[1]],["is","segment",[]]]}`,
		`{"metrics":["visitors"],"date_range":"7d","filters":[["and",[["is","segment",[1]],["is","segment",[1]],["is","segment",[1]],["is","segment",[1]],["is","segment",[1]],["is","segment",[1]],["is","segment",[1]],["is","segment",[1]],["is","segment",[1]],["is","segment",[1]],["is","segment",[2]]]]]}`,
		`{"metrics":["visitors"],"date_range":"7d","dimensions":["segment"],"filters":[["not",["not",["not",["not",["not",["not",["not",["not",["not",["not",["is","segment",[1]]]]]]]]]]]]]}`,
		// Issue 31 item 6: every construct of the new parsing, so that each
		// go test run sends it on both backends.
		`{"metrics":["visitors","pageviews"],"date_range":"realtime","dimensions":["time:minute"],"include":{"time_labels":true}}`,
		`{"metrics":["visitors","events"],"date_range":["2026-01-31T00:00:00Z","2026-01-31T09:00:00Z"],"dimensions":["time:minute","event:hostname"],"filters":[["has_not_done",["is","event:hostname",["shop.test"]]]]}`,
		`{"metrics":["visitors","visits","percentage"],"date_range":"all","dimensions":["visit:channel","visit:browser_version","visit:os_version"],"filters":[["contains","visit:channel",["organic"],{"case_sensitive":false}],["is_not","visit:browser_version",["1.0"]]]}`,
		`{"metrics":["visitors"],"date_range":"24h","dimensions":["visit:entry_page_hostname","visit:exit_page_hostname","visit:region","visit:city","visit:country_name"],"filters":[["is","visit:city",[2950159,"x"]],["is","visit:region",["DE-BE"],{"case_sensitive":true}]]}`,
		`{"metrics":["scroll_depth","time_on_page","visitors","pageviews"],"date_range":"all","dimensions":["event:page"],"filters":[["is","event:goal",["Blog"]]]}`,
		`{"metrics":["scroll_depth","time_on_page"],"date_range":"all","filters":[["is","event:page",["/blog/a"]]],"include":{"comparisons":{"mode":"previous_period"}}}`,
		`{"metrics":["scroll_depth","time_on_page"],"date_range":"30d","dimensions":["time:day"],"filters":[["matches","event:page",["^/"]],["has_done",["is","event:goal",["Signup"]]]]}`,
		`{"metrics":["scroll_depth"],"date_range":"all","dimensions":["event:goal"]}`,
		`{"metrics":["time_on_page"],"date_range":"all","dimensions":["visit:source"],"filters":[["contains_not","event:page",["/x"],{"case_sensitive":false}]]}`,
		`{"metrics":["total_revenue","average_revenue","visitors"],"date_range":"all","dimensions":["event:props:plan"],"filters":[["is","event:goal",["Signup"],{"case_sensitive":false}]],"order_by":[["total_revenue","desc"]]}`,
		`{"metrics":["visitors"],"date_range":"all","filters":[["is","event:page",["/A"],{"case_sensitive":false}],["is_not","event:page",["/B"],{"case_sensitive":true}],["contains","event:page",["a"],{"case_sensitive":true}],["contains_not","event:page",["Z"],{"case_sensitive":false}],["matches","event:page",["^/"],{"case_sensitive":true}],["matches_not","event:page",["^/z"],{"case_sensitive":false}]]}`,
		`{"metrics":["visitors"],"date_range":"all","filters":[["is","event:props:plan",["P"],{"case_sensitive":"no"}],["is","event:page",["/"],{"other":1}],["is","event:page",["/"],{}],["is","event:page",["/"],null]]}`,
		`{"metrics":["visitors"],"date_range":"all","filters":[["has_done",["has_done",["is","event:page",["/"]]]],["has_not_done",["not",["or",[]]]],["has_done"],["has_done",[]],["not"]]}`,
		`{"site_id":"SHOP.TEST","metrics":["visitors"],"date_range":"month"}`,
		`{"site_id":"web","metrics":["visitors"],"date_range":"month"}`,
		`{"site_id":"","metrics":["visitors"],"date_range":"month"}`,
		`{"site_id":7,"metrics":["visitors"],"date_range":"month"}`,
		`{"site_id":"shop.test\u0000","metrics":["visitors"],"date_range":"month"}`,
		`{"site_id":null,"metrics":["visitors"],"date_range":"realtime","dimensions":["time:minute"]}`,
	} {
		f.Add([]byte(seed))
	}
	db, err := openTestDB(f, context.Background(), storage.Options{Path: filepath.Join(f.TempDir(), "qb.db")})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	now := time.Date(2026, 1, 31, 9, 0, 0, 0, time.UTC)
	srv := New(Config{AdminToken: "fuzz", Logger: discardLogger(), CollectorURL: "http://127.0.0.1:1", Now: func() time.Time { return now }}, db)
	query, collector := srv.Query(), srv.Collector()
	do := func(h http.Handler, method, path, token string, body any) []byte {
		b, _ := json.Marshal(body)
		req := httptest.NewRequest(method, path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 300 {
			f.Fatalf("%s %s: got %d %s", method, path, rec.Code, rec.Body)
		}
		return rec.Body.Bytes()
	}
	do(query, "POST", "/v1/workspaces", "fuzz", map[string]any{"name": "F", "slug": "f"})
	do(query, "POST", "/v1/workspaces/f/sites", "fuzz", map[string]any{"id": "web", "name": "Web"})
	do(query, "POST", "/v1/workspaces/f/sites", "fuzz", map[string]any{"id": "other", "name": "Other"})
	var key struct{ Plaintext string }
	_ = json.Unmarshal(do(query, "POST", "/v1/workspaces/f/keys", "fuzz", map[string]any{"label": "r", "scopes": []string{"query:read"}, "sites": []string{"web"}}), &key)
	do(query, "POST", "/v1/sites/web/goals", "fuzz", map[string]any{"name": "Signup", "event_name": "signup"})
	do(query, "POST", "/v1/sites/web/goals", "fuzz", map[string]any{"name": "Blog", "page_path": "/blog/**"})
	do(query, "PATCH", "/v1/sites/web", "fuzz", map[string]any{"aliases": []string{"shop.test"}})
	for _, sg := range []struct {
		site string
		data string
	}{
		{"web", `{"filters":[["is","visit:country",["DE"]],["matches","event:page",["^/p"]]]}`},
		{"web", `{"filters":[["or",[["is","event:goal",["Signup"]],["contains","event:props:plan",["p"],{"case_sensitive":false}]]]]}`},
		{"other", `{"filters":[["is","visit:country",["FR"]]]}`},
	} {
		do(query, "POST", "/v1/sites/"+sg.site+"/segments", "fuzz", map[string]any{"name": "s", "type": "site", "segment_data": json.RawMessage(sg.data)})
	}
	for i, e := range queryDataSet {
		fields := map[string]any{"anon_id": e.anon, "type": e.typ, "ts": e.ts.Format(time.RFC3339Nano), "url": e.url, "user_agent": e.ua}
		if e.props != nil {
			fields["properties"] = e.props
		}
		for _, site := range []string{"web", "other"} {
			do(collector, "POST", "/v1/s2s/events", site, ev(site, 2*i+len(site), fields))
		}
	}
	// Pageviews with Plausible's engagement (and a custom event), so that
	// scroll_depth and time_on_page read measured rows.
	for i, b := range []string{
		`{"n":"pageview","u":"https://shop.test/blog/a","d":"shop.test"}`,
		`{"n":"engagement","u":"https://shop.test/blog/a","d":"shop.test","sd":60,"e":4000}`,
		`{"n":"signup","u":"https://shop.test/blog/a","d":"shop.test","$":{"amount":"9.5","currency":"EUR"}}`,
		`{"n":"pageview","u":"https://shop.test/pricing","d":"shop.test"}`,
		`{"n":"engagement","u":"https://shop.test/pricing","d":"shop.test","sd":100,"e":700}`,
	} {
		now = now.Add(time.Duration(i) * time.Second)
		req := httptest.NewRequest("POST", "/api/event", strings.NewReader(b))
		req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36")
		rec := httptest.NewRecorder()
		collector.ServeHTTP(rec, req)
		if rec.Code != http.StatusAccepted {
			f.Fatalf("%s: got %d %s", b, rec.Code, rec.Body)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range []string{"/v1/sites/web/query", "/api/v2/query"} {
			b := body
			if path == "/api/v2/query" {
				// The site in the body, where the body is an object.
				b = bytes.Replace(body, []byte("{"), []byte(`{"site_id":"web",`), 1)
			}
			req := httptest.NewRequest("POST", path, bytes.NewReader(b))
			req.Header.Set("Authorization", "Bearer "+key.Plaintext)
			rec := httptest.NewRecorder()
			query.ServeHTTP(rec, req)
			if rec.Code >= 500 {
				t.Fatalf("%s: got %d %s for body %q", path, rec.Code, rec.Body, b)
			}
		}
	})
}
