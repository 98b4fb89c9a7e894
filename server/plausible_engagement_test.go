package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tally-analytics/tally/schema"
)

// Plausible's engagement events add their scroll depth (the deepest kept)
// and engaged time (summed) to the newest pageview of the same visitor and
// URL, and are not stored as events; a bad measure is 400
// (docs/intake.md#engagement).
func TestPlausibleEngagementStored(t *testing.T) {
	t.Parallel()
	h := trackerHarness(t)
	ua := chromeUA
	post := func(body string) response {
		h.clock.Advance(time.Second)
		return h.c("POST", "/api/event", "", body, "User-Agent", ua, "Content-Type", "text/plain")
	}
	page := func(path string) string {
		return fmt.Sprintf(`{"n":"pageview","u":"https://example.com%s?utm_source=x","d":"example.com"}`, path)
	}
	engage := func(path string, sd, e any) string {
		return fmt.Sprintf(`{"n":"engagement","u":"https://example.com%s?utm_source=x","d":"example.com","sd":%v,"e":%v,"p":{"a":"b"},"v":36}`, path, sd, e)
	}
	// An engagement before any pageview of its page changes nothing.
	mustStatusText(t, post(engage("/a", 50, 100)), 202)
	mustStatusText(t, post(page("/a")), 202)
	mustStatusText(t, post(engage("/a", 40, 1200)), 202)
	mustStatusText(t, post(engage("/a", 30, 800)), 202)
	mustStatusText(t, post(page("/b")), 202)
	mustStatusText(t, post(engage("/b", 250, 0)), 202) // clamped to 100
	mustStatusText(t, post(page("/a")), 202)
	mustStatusText(t, post(engage("/a", 10.4, 500)), 202) // the newer pageview of /a
	// Without e (Plausible's own tests send sd alone) it measures depth only.
	mustStatusText(t, post(`{"n":"engagement","u":"https://example.com/b?utm_source=x","d":"example.com","sd":5}`), 202)
	for _, bad := range []string{
		`{"n":"engagement","u":"https://example.com/a","d":"example.com","e":1}`,
		engage("/a", `"x"`, 1), engage("/a", 10, -1), engage("/a", 10, 90000000),
	} {
		if r := post(bad); r.status != 400 || !strings.Contains(string(r.body), "an engagement") {
			t.Errorf("%s: got %d %s, want 400 naming the measure", bad, r.status, r.body)
		}
	}
	rows, err := h.sqlDB().Query(`SELECT type, url, COALESCE(scroll_depth, -1), COALESCE(engaged_ms, -1) FROM events WHERE site_id = 'web' ORDER BY ts_ms`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var typ, url string
		var sd, ms int64
		if err := rows.Scan(&typ, &url, &sd, &ms); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %s %d %d", typ, url, sd, ms))
	}
	want := []string{"pageview https://example.com/a 40 2000", "pageview https://example.com/b 100 0", "pageview https://example.com/a 10 500"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("got %q, want %q", got, want)
	}

	// The query API: per page, the visitors' deepest scroll averaged and
	// their engaged seconds; a second visitor, and a page without
	// engagement (0).
	ua = firefoxUA
	mustStatusText(t, post(page("/a")), 202)
	mustStatusText(t, post(engage("/a", 60, 1000)), 202)
	mustStatusText(t, post(page("/c")), 202)
	for _, c := range []struct {
		name string
		body map[string]any
		want string
	}{
		{"by page", map[string]any{"metrics": []string{"visitors", "scroll_depth", "time_on_page"}, "dimensions": []string{"event:page"},
			"order_by": [][]string{{"event:page", "asc"}}},
			`[{"dimensions":["/a"],"metrics":[2,50,2]},{"dimensions":["/b"],"metrics":[1,100,0]},{"dimensions":["/c"],"metrics":[1,null,0]}]`},
		{"one page by filter", map[string]any{"metrics": []string{"scroll_depth"}, "filters": []any{[]any{"is", "event:page", []string{"/a"}}}},
			`[{"dimensions":[],"metrics":[50]}]`},
	} {
		c.body["site_id"], c.body["date_range"] = "web", "all"
		r := h.q("POST", "/api/v2/query", testAdminToken, c.body)
		if got := mustJSONText(r.json(t)["results"]); r.status != 200 || got != c.want {
			t.Errorf("%s: got %d %s, want %s", c.name, r.status, r.body, c.want)
		}
	}
}

// A tracking plan judges events, not engagement: with a plan that knows
// only pageviews, rejecting the rest, an engagement still reaches its
// pageview.
func TestPlausibleEngagementPassesThePlan(t *testing.T) {
	t.Parallel()
	plan, err := schema.ParsePlan([]byte(`{"mode":"reject","events":{"pageview":{"type":"object"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	h := trackerHarness(t, func(c *Config) { c.Plan = plan })
	post := func(body string) response {
		h.clock.Advance(time.Second)
		return h.c("POST", "/api/event", "", body, "User-Agent", chromeUA, "Content-Type", "text/plain")
	}
	mustStatusText(t, post(`{"n":"pageview","u":"https://example.com/a","d":"example.com"}`), 202)
	mustStatusText(t, post(`{"n":"engagement","u":"https://example.com/a","d":"example.com","sd":70,"e":900}`), 202)
	mustStatus(t, post(`{"n":"Signup","u":"https://example.com/a","d":"example.com"}`), 400, "schema_validation_failed")
	var sd, ms int
	if err := h.sqlDB().QueryRow(`SELECT scroll_depth, engaged_ms FROM events WHERE site_id = 'web'`).Scan(&sd, &ms); err != nil || sd != 70 || ms != 900 {
		t.Errorf("got %d %d (%v), want 70 900", sd, ms, err)
	}
}

// Engagement with goals (issue 31): an engagement is never a pageview, an
// event or a goal's conversion (an event goal named "engagement"
// included), and scroll_depth and time_on_page read with a page goal's
// filter as with any filter, given the event:page dimension or top-level
// filter Plausible asks for; without one, or with only a goal filter, a
// behavioural or a negated event:page filter, Plausible's 400.
func TestPlausibleEngagementWithGoals(t *testing.T) {
	t.Parallel()
	h := trackerHarness(t)
	post := func(ua, body string) {
		t.Helper()
		h.clock.Advance(time.Second)
		mustStatusText(t, h.c("POST", "/api/event", "", body, "User-Agent", ua, "Content-Type", "text/plain"), 202)
	}
	ev := func(ua, name, path, more string) {
		t.Helper()
		post(ua, fmt.Sprintf(`{"n":%q,"u":"https://example.com%s","d":"example.com"%s}`, name, path, more))
	}
	ev(chromeUA, "pageview", "/blog/a", "")
	ev(chromeUA, "engagement", "/blog/a", `,"sd":40,"e":2000`)
	ev(chromeUA, "Signup", "/blog/a", "")
	ev(chromeUA, "pageview", "/pricing", "")
	ev(chromeUA, "engagement", "/pricing", `,"sd":80,"e":1000`)
	ev(firefoxUA, "pageview", "/blog/b", "")
	ev(firefoxUA, "engagement", "/blog/b", `,"sd":100,"e":3000`)
	ev(firefoxUA, "engagement", "/blog/b", `,"sd":90,"e":1000`)
	for _, g := range []map[string]any{
		{"name": "Blog", "page_path": "/blog/**"}, {"name": "Signup", "event_name": "Signup"}, {"name": "Engaged", "event_name": "engagement"},
	} {
		mustStatusText(t, h.q("POST", "/v1/sites/web/goals", testAdminToken, g), 201)
	}
	page := []any{"is", "event:page", []string{"/blog/a", "/pricing"}}
	blog := []any{"is", "event:goal", []string{"Blog"}}
	for _, c := range []struct {
		name   string
		body   map[string]any
		status int
		want   string
	}{
		{"no engagement among events", map[string]any{"metrics": []string{"visitors", "events", "pageviews"}, "dimensions": []string{"event:name"}}, 200,
			`[{"dimensions":["pageview"],"metrics":[2,3,3]},{"dimensions":["Signup"],"metrics":[1,1,0]}]`},
		{"no engagement among conversions", map[string]any{"metrics": []string{"visitors", "events", "conversion_rate"}, "dimensions": []string{"event:goal"}}, 200,
			`[{"dimensions":["Blog"],"metrics":[2,2,100]},{"dimensions":["Signup"],"metrics":[1,1,50]}]`},
		{"the engagement goal converts no one", map[string]any{"metrics": []string{"visitors", "events"}, "filters": []any{[]any{"is", "event:goal", []string{"Engaged"}}}}, 200,
			`[{"dimensions":[],"metrics":[0,0]}]`},
		{"a page goal's pageviews", map[string]any{"metrics": []string{"visitors", "pageviews"}, "filters": []any{blog}}, 200,
			`[{"dimensions":[],"metrics":[2,2]}]`},
		{"by page, filtered by a page goal", map[string]any{"metrics": []string{"visitors", "scroll_depth", "time_on_page"}, "dimensions": []string{"event:page"},
			"filters": []any{blog}, "order_by": [][]string{{"event:page", "asc"}}}, 200,
			`[{"dimensions":["/blog/a"],"metrics":[1,40,2]},{"dimensions":["/blog/b"],"metrics":[1,100,4]}]`},
		{"a page filter and a page goal", map[string]any{"metrics": []string{"scroll_depth", "time_on_page"}, "filters": []any{page, blog}}, 200,
			`[{"dimensions":[],"metrics":[40,2]}]`},
		// One visitor over both pages: its deepest scroll, its time summed.
		{"a page filter alone", map[string]any{"metrics": []string{"scroll_depth", "time_on_page"}, "filters": []any{page}}, 200,
			`[{"dimensions":[],"metrics":[80,3]}]`},
		{"a page goal alone", map[string]any{"metrics": []string{"scroll_depth"}, "filters": []any{blog}}, 400, "scroll_depth"},
		{"only a behavioural page filter", map[string]any{"metrics": []string{"time_on_page"}, "filters": []any{[]any{"has_done", page}}}, 400, "time_on_page"},
		{"only a negated page filter", map[string]any{"metrics": []string{"scroll_depth"}, "filters": []any{[]any{"not", page}}}, 400, "scroll_depth"},
	} {
		c.body["site_id"], c.body["date_range"] = "web", "all"
		r := h.q("POST", "/api/v2/query", testAdminToken, c.body)
		if c.status != 200 {
			if r.status != c.status || !strings.Contains(string(r.body), `can only be queried with an event:page filter or dimension`) || !strings.Contains(string(r.body), c.want) {
				t.Errorf("%s: got %d %s, want %d naming %s and the event:page rule", c.name, r.status, r.body, c.status, c.want)
			}
			continue
		}
		if got := mustJSONText(r.json(t)["results"]); r.status != 200 || got != c.want {
			t.Errorf("%s: got %d %s, want %s", c.name, r.status, r.body, c.want)
		}
	}
}
