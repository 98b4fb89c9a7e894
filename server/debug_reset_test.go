package server

import (
	"fmt"
	"testing"

	"github.com/tally-analytics/tally/schema"
)

// siteRows counts each reset table's rows of site.
func siteRows(t *testing.T, h *harness, site string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range []string{"events", "sessions", "dlq", "identity_links", "user_profiles",
		"event_ids", "daily_events", "daily_sessions", "site_usage", "daily_dimensions"} {
		out[table] = h.count(`SELECT COUNT(*) FROM `+table+` WHERE site_id = ?`, site)
	}
	return out
}

// A reset that names a site deletes that site's collected data, decisions
// and counts; the other site's stay whole.
func TestDebugResetOneSite(t *testing.T) {
	t.Parallel()
	plan, err := schema.ParsePlan([]byte(`{"mode":"quarantine","events":{"purchase":{"type":"object","required":["properties"]},"*":{"type":"object"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *Config) { c.DebugFeedSize, c.Plan, c.Quota = 100, plan, 5 })
	sites := []string{"web", "shop"}
	for _, site := range sites {
		h.setupTenant("ws-"+site, site)
		intake(t, h.c("POST", "/v1/events", site, []any{
			ev(site, 1, map[string]any{"user_id": "u1", "referrer": "https://ref.test/"}),
			ev(site, 2, map[string]any{"type": "identify", "user_id": "u1", "traits": map[string]any{"plan": "pro"}}),
			ev(site, 3, map[string]any{"type": "purchase"}), // quarantined
		}, "User-Agent", chromeUA))
	}
	before := siteRows(t, h, "shop")
	for table, n := range siteRows(t, h, "web") {
		if n == 0 {
			t.Fatalf("the test stores no %s row, so it cannot show the reset deletes them", table)
		}
	}
	shopSummary := summaryOf(t, h, "?site_id=shop")

	tests := []struct {
		name, path string
		body       any
	}{
		{"in the body", "/v1/debug/reset", map[string]any{"site_id": "web"}},
		{"in the query", "/v1/debug/reset?site_id=web", "{}"},
		{"in both", "/v1/debug/reset?site_id=web", map[string]any{"site_id": "web"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if i > 0 { // data again for this reset to delete
				intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, nil)))
			}
			r := h.q("POST", tt.path, "", tt.body)
			mustStatus(t, r, 200, "")
			if i == 0 {
				if got := r.json(t)["deleted"].(map[string]any)["events"]; got != float64(2) {
					t.Errorf("got %v events deleted, want 2", got)
				}
			}
			for table, n := range siteRows(t, h, "web") {
				if n != 0 {
					t.Errorf("got %d %s rows of the reset site, want 0", n, table)
				}
			}
			if got := siteRows(t, h, "shop"); fmt.Sprint(got) != fmt.Sprint(before) {
				t.Errorf("got the other site's rows %v, want them untouched: %v", got, before)
			}
			if got := summaryOf(t, h, "?site_id=web"); got != (debugSummary{}) {
				t.Errorf("got the reset site's summary %+v, want zeros", got)
			}
			if got := summaryOf(t, h, "?site_id=shop"); got != shopSummary {
				t.Errorf("got the other site's summary %+v, want %+v", got, shopSummary)
			}
			if got := summaryOf(t, h, ""); got != shopSummary {
				t.Errorf("got the total %+v, want the other site's alone, %+v", got, shopSummary)
			}
			if got := len(h.srv.Decisions(DebugFilter{SiteID: "web"})); got != 0 {
				t.Errorf("got %d decisions of the reset site, want 0", got)
			}
			if got := len(h.srv.Decisions(DebugFilter{SiteID: "shop"})); got != 3 {
				t.Errorf("got %d decisions of the other site, want 3", got)
			}
		})
	}
	// The dedup ids and the quota count went too: the same ids are new,
	// and the month's quota (5) is whole again.
	a := intake(t, h.c("POST", "/v1/events", "web", []any{ev("web", 1, nil), ev("web", 2, nil), ev("web", 4, nil), ev("web", 5, nil), ev("web", 6, nil)}))
	if a.Accepted != 5 {
		t.Errorf("after the reset: got %+v, want the 5 events accepted", a)
	}
	if got := h.db.MonthlyAccepted("shop"); got != 2 {
		t.Errorf("got the other site's quota count %d, want 2", got)
	}
}

func TestDebugResetSiteErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.DebugFeedSize = 10 })
	h.setupTenant("acme", "web")
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, nil)))
	for _, tt := range []struct {
		path   string
		body   any
		status int
		code   string
	}{
		{"/v1/debug/reset", map[string]any{"site_id": "nosuch"}, 404, "not_found"},
		{"/v1/debug/reset?site_id=nosuch", "{}", 404, "not_found"},
		{"/v1/debug/reset", map[string]any{"site_id": 7}, 400, "invalid_site_id"},
		{"/v1/debug/reset", map[string]any{"site_id": ""}, 400, "invalid_site_id"},
		{"/v1/debug/reset?site_id=shop", map[string]any{"site_id": "web"}, 400, "invalid_site_id"},
		{"/v1/debug/reset", "[]", 400, "invalid_json"},
	} {
		mustStatus(t, h.q("POST", tt.path, "", tt.body), tt.status, tt.code)
	}
	if got := h.count(`SELECT COUNT(*) FROM events`); got != 1 {
		t.Errorf("got %d events after refused resets, want 1", got)
	}
}

// A site's reset gives it a full rate-limit bucket again; the other
// site's bucket stays as it was.
func TestDebugResetOneSiteRefillsItsBucket(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.DebugFeedSize, c.RateLimit = 10, 1 }) // a bucket of 2; the clock stands still
	for _, site := range []string{"web", "shop"} {
		h.setupTenant("ws-"+site, site)
		intake(t, h.c("POST", "/v1/events", site, []any{ev(site, 1, nil), ev(site, 2, nil)}))
		mustStatus(t, h.c("POST", "/v1/events", site, ev(site, 3, nil)), 429, "rate_limited")
	}
	mustStatus(t, h.q("POST", "/v1/debug/reset", "", map[string]any{"site_id": "web"}), 200, "")
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 3, nil)))
	mustStatus(t, h.c("POST", "/v1/events", "shop", ev("shop", 3, nil)), 429, "rate_limited")
}
