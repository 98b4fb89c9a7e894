package server

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tally-analytics/tally/privacy"
)

// qev is one event of the query API's data set.
type qev struct {
	anon, typ, url, ref string
	ts                  time.Time
	ua                  string
	country, city       string
	props               map[string]any
	user                string
	consent             string
}

const (
	firefoxLinuxUA = "Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0"
	iphoneUA       = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1"
)

// withProxyGeo trusts CF-IPCountry and CF-IPCity, so a test sets each
// event's country and city.
func withProxyGeo(c *Config) {
	loc, err := privacy.NewLocator("", true)
	if err != nil {
		panic(err)
	}
	c.Locator = loc
}

// sendQ stores e through the server intake endpoint, as a server would
// send it.
func (h *harness) sendQ(site string, n int, e qev) {
	h.t.Helper()
	fields := map[string]any{"anon_id": e.anon, "type": e.typ, "ts": e.ts.Format(time.RFC3339Nano), "url": e.url}
	if e.ref != "" {
		fields["referrer"] = e.ref
	}
	if e.ua != "" {
		fields["user_agent"] = e.ua
	}
	if e.props != nil {
		fields["properties"] = e.props
	}
	if e.user != "" {
		fields["user_id"] = e.user
	}
	if e.consent != "" {
		fields["consent"] = e.consent
	}
	var headers []string
	if e.country != "" {
		headers = append(headers, "CF-IPCountry", e.country)
	}
	if e.city != "" {
		headers = append(headers, "CF-IPCity", e.city)
	}
	intake(h.t, h.c("POST", "/v1/s2s/events", site, ev(site, n, fields), headers...))
}

func utc(month time.Month, d, hour, minute int) time.Time {
	return time.Date(2026, month, d, hour, minute, 0, 0, time.UTC)
}

// queryDataSet is the fixed data set whose figures the query tests compute
// by hand (README "Query API"). All times UTC; Berlin is UTC+1 in January.
//
//	a: Chrome/Windows desktop, DE Berlin
//	   visit A1 Jan 10 10:00-10:06: pageview /?utm_source=news&utm_medium=email&utm_campaign=jan,
//	            pageview /pricing, signup on /pricing {plan: pro}
//	   visit A2 Jan 12 23:50 - Jan 13 00:10 (across UTC midnight), from Google:
//	            pageview /blog/a, pageview /blog/b
//	   outside the range: pageview / on Dec 31 12:00
//	b: Safari/iOS mobile, US New York; visit B1 Jan 12 22:45-23:10 (across Berlin's midnight):
//	   pageview /, pageview /pricing, sent in reverse order
//	c: cookieless (consent denied), no location; visit Jan 15 08:00-08:01: pageview /, pageview /docs
//	d: the subject erased (user u-erase); Jan 15 09:00 pageview /pricing
//	e: Firefox/Linux desktop, FR Paris; Jan 20 12:00 pageview /pricing from news.ycombinator.com (a bounce)
var queryDataSet = []qev{
	{anon: "a", typ: "pageview", url: "https://shop.test/?utm_source=news&utm_medium=email&utm_campaign=jan", ts: utc(1, 10, 10, 0), ua: chromeUA, country: "DE", city: "Berlin"},
	{anon: "a", typ: "pageview", url: "https://shop.test/pricing", ts: utc(1, 10, 10, 5), ua: chromeUA, country: "DE", city: "Berlin"},
	{anon: "a", typ: "signup", url: "https://shop.test/pricing", ts: utc(1, 10, 10, 6), ua: chromeUA, country: "DE", city: "Berlin", props: map[string]any{"plan": "pro"}},
	{anon: "a", typ: "pageview", url: "https://shop.test/blog/a", ref: "https://www.google.com/", ts: utc(1, 12, 23, 50), ua: chromeUA, country: "DE", city: "Berlin"},
	{anon: "a", typ: "pageview", url: "https://shop.test/blog/b", ts: utc(1, 13, 0, 10), ua: chromeUA, country: "DE", city: "Berlin"},
	{anon: "a", typ: "pageview", url: "https://shop.test/", ts: time.Date(2025, 12, 31, 12, 0, 0, 0, time.UTC), ua: chromeUA, country: "DE", city: "Berlin"},
	{anon: "b", typ: "pageview", url: "https://shop.test/pricing", ts: utc(1, 12, 23, 10), ua: iphoneUA, country: "US", city: "New York"},
	{anon: "b", typ: "pageview", url: "https://shop.test/", ts: utc(1, 12, 22, 45), ua: iphoneUA, country: "US", city: "New York"},
	{anon: "c", typ: "pageview", url: "https://shop.test/", ts: utc(1, 15, 8, 0), ua: firefoxLinuxUA, consent: "denied"},
	{anon: "c", typ: "pageview", url: "https://shop.test/docs", ts: utc(1, 15, 8, 1), ua: firefoxLinuxUA, consent: "denied"},
	{anon: "d", typ: "pageview", url: "https://shop.test/pricing", ts: utc(1, 15, 9, 0), ua: chromeUA, user: "u-erase", country: "DE"},
	{anon: "e", typ: "pageview", url: "https://shop.test/pricing", ref: "https://news.ycombinator.com/item?id=1", ts: utc(1, 20, 12, 0), ua: firefoxLinuxUA, country: "FR", city: "Paris"},
}

// newQueryHarness loads queryDataSet into site web of workspace acme.
func newQueryHarness(t *testing.T) (*harness, tenant) {
	t.Helper()
	h := newHarness(t, withProxyGeo)
	tn := h.setupTenant("acme", "web")
	for i, e := range queryDataSet {
		h.sendQ("web", i+1, e)
	}
	return h, tn
}

// queryRows posts body to the site's query route and renders the results
// as "dim dim: metric metric" lines joined by "; ".
func queryRows(t *testing.T, h *harness, token, site string, body map[string]any) string {
	t.Helper()
	r := h.q("POST", "/v1/sites/"+site+"/query", token, body)
	mustStatus(t, r, 200, "")
	return renderRows(t, r.body)
}

func renderRows(t *testing.T, body []byte) string {
	t.Helper()
	var a struct {
		Results []struct {
			Dimensions []string  `json:"dimensions"`
			Metrics    []float64 `json:"metrics"`
			Comparison *struct {
				Dimensions []string   `json:"dimensions"`
				Metrics    []float64  `json:"metrics"`
				Change     []*float64 `json:"change"`
			} `json:"comparison"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	nums := func(list []float64) string {
		s := make([]string, len(list))
		for i, v := range list {
			s[i] = strconv.FormatFloat(v, 'f', -1, 64)
		}
		return strings.Join(s, " ")
	}
	var out []string
	for _, r := range a.Results {
		line := nums(r.Metrics)
		if len(r.Dimensions) > 0 {
			line = strings.Join(r.Dimensions, " ") + ": " + line
		}
		if c := r.Comparison; c != nil {
			ch := make([]string, len(c.Change))
			for i, v := range c.Change {
				ch[i] = "null"
				if v != nil {
					ch[i] = strconv.FormatFloat(*v, 'f', -1, 64)
				}
			}
			line += fmt.Sprintf(" vs %s: %s (%s)", strings.Join(c.Dimensions, " "), nums(c.Metrics), strings.Join(ch, " "))
		}
		out = append(out, line)
	}
	return strings.Join(out, "; ")
}

// january is the data set's range, whole days in the site's zone.
var january = []string{"2026-01-01", "2026-01-31"}

// q builds a query body over january.
func q(metrics []string, dims []string, filters ...any) map[string]any {
	b := map[string]any{"site_id": "web", "metrics": metrics, "date_range": january}
	if dims != nil {
		b["dimensions"] = dims
	}
	if len(filters) > 0 {
		b["filters"] = filters
	}
	return b
}

func list(s ...string) []string { return s }

// TestQueryEventLevel checks every event dimension, filter operator and
// event metric against the data set's hand-computed figures, after the
// erasure of subject d (so d is in no figure).
func TestQueryEventLevel(t *testing.T) {
	h, tn := newQueryHarness(t)
	before := queryRows(t, h, tn.readKey, "web", q(list("visitors", "pageviews", "events"), nil))
	if want := "5 10 11"; before != want {
		t.Fatalf("before the erasure: got %s, want %s", before, want)
	}
	mustStatus(t, h.q("POST", "/v1/sites/web/gdpr/delete", testAdminToken, map[string]any{"subject": map[string]any{"user_id": "u-erase"}}), 200, "")
	pve := list("visitors", "pageviews", "events")
	tests := []struct {
		name string
		body map[string]any
		want string
	}{
		{"aggregate", q(pve, nil), "4 9 10"},
		{"event:page", q(pve, list("event:page")),
			"/: 3 3 3; /pricing: 3 3 4; /blog/a: 1 1 1; /blog/b: 1 1 1; /docs: 1 1 1"},
		{"event:name", q(list("visitors", "events"), list("event:name")), "pageview: 4 9; signup: 1 1"},
		{"event:props:plan", q(list("visitors", "events"), list("event:props:plan")), "(none): 4 9; pro: 1 1"},
		{"time:day", q(list("pageviews"), list("time:day")),
			"2026-01-10: 2; 2026-01-12: 3; 2026-01-13: 1; 2026-01-15: 2; 2026-01-20: 1"},
		{"time:week", q(list("pageviews"), list("time:week")), "2026-01-05: 2; 2026-01-12: 6; 2026-01-19: 1"},
		{"time:month", q(list("pageviews"), list("time:month")), "2026-01-01: 9"},
		{"time:hour", map[string]any{"metrics": list("pageviews"), "date_range": list("2026-01-12", "2026-01-12"), "dimensions": list("time:hour")},
			"2026-01-12 22:00:00: 1; 2026-01-12 23:00:00: 2"},
		{"time over a day is by hour", map[string]any{"metrics": list("pageviews"), "date_range": list("2026-01-12", "2026-01-12"), "dimensions": list("time")},
			"2026-01-12 22:00:00: 1; 2026-01-12 23:00:00: 2"},
		{"datetime range, ends included", map[string]any{"metrics": list("pageviews"), "date_range": list("2026-01-12T23:10:00Z", "2026-01-13T00:10:00Z")}, "3"},
		{"datetime range with an offset", map[string]any{"metrics": list("pageviews"), "date_range": list("2026-01-13T00:00:00+01:00", "2026-01-13T00:49:59+01:00")}, "1"},
		{"is", q(pve, nil, []any{"is", "event:page", list("/pricing")}), "3 3 4"},
		{"is, any of", q(pve, nil, []any{"is", "event:page", list("/docs", "/blog/a")}), "2 2 2"},
		{"is_not", q(pve, nil, []any{"is_not", "event:page", list("/pricing")}), "3 6 6"},
		{"contains", q(pve, nil, []any{"contains", "event:page", list("blog")}), "1 2 2"},
		{"contains, case-insensitive", q(pve, nil, []any{"contains", "event:page", list("PRICING"), map[string]any{"case_sensitive": false}}), "3 3 4"},
		{"contains is case-sensitive by default", q(pve, nil, []any{"contains", "event:page", list("PRICING")}), "0 0 0"},
		{"is, case-insensitive", q(pve, nil, []any{"is", "event:name", list("SignUp"), map[string]any{"case_sensitive": false}}), "1 0 1"},
		{"contains_not", q(pve, nil, []any{"contains_not", "event:page", list("/p", "/b")}), "3 4 4"},
		{"matches", q(pve, nil, []any{"matches", "event:page", list(`^/blog/[a-z]+$`)}), "1 2 2"},
		{"matches_not", q(pve, nil, []any{"matches_not", "event:page", list(`^/(blog|docs)`)}), "4 6 7"},
		{"event:name filter", q(pve, list("event:page"), []any{"is", "event:name", list("signup")}), "/pricing: 1 0 1"},
		{"event:props filter", q(pve, nil, []any{"is", "event:props:plan", list("pro")}), "1 0 1"},
		{"event:props (none) filter", q(pve, nil, []any{"is", "event:props:plan", list("(none)")}), "4 9 9"},
		{"or", q(pve, nil, []any{"or", []any{[]any{"is", "event:page", list("/docs")}, []any{"is", "event:name", list("signup")}}}), "2 1 2"},
		{"and", q(pve, nil, []any{"and", []any{[]any{"contains", "event:page", list("/")}, []any{"is", "event:name", list("signup")}}}), "1 0 1"},
		{"not", q(pve, nil, []any{"not", []any{"is", "event:name", list("pageview")}}), "1 0 1"},
		{"nested", q(pve, nil, []any{"not", []any{"or", []any{[]any{"is", "event:page", list("/")}, []any{"not", []any{"contains", "event:page", list("blog")}}}}}), "1 2 2"},
		{"top-level filters all hold", q(pve, nil, []any{"is", "event:page", list("/pricing")}, []any{"is", "event:name", list("pageview")}), "3 3 3"},
		{"two dimensions", q(list("events"), list("event:name", "event:page")),
			"pageview /: 3; pageview /pricing: 3; pageview /blog/a: 1; pageview /blog/b: 1; pageview /docs: 1; signup /pricing: 1"},
		{"percentage", q(list("visitors", "percentage"), list("event:name")), "pageview: 4 100; signup: 1 25"},
		{"order_by", func() map[string]any {
			b := q(list("visitors"), list("event:page"))
			b["order_by"] = [][]string{{"visitors", "asc"}, {"event:page", "desc"}}
			return b
		}(), "/docs: 1; /blog/b: 1; /blog/a: 1; /pricing: 3; /: 3"},
		{"pagination", func() map[string]any {
			b := q(list("visitors"), list("event:page"))
			b["pagination"] = map[string]any{"limit": 2, "offset": 1}
			return b
		}(), "/pricing: 3; /blog/a: 1"},
		{"no data", map[string]any{"metrics": list("visitors", "events"), "date_range": list("2024-01-01", "2024-01-31")}, "0 0"},
		{"no data by a dimension", map[string]any{"metrics": list("visitors"), "date_range": list("2024-01-01", "2024-01-31"), "dimensions": list("event:page")}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := queryRows(t, h, tn.readKey, "web", tt.body); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestQueryVisitLevel checks every visit dimension and metric, visit
// filters, and events joined to their visits, against the data set's
// hand-computed figures after the erasure of subject d. Visits: A1 (Jan 10,
// 3 events, 360 s, utm news), A2 (Jan 12 23:50, across UTC midnight, 1,200
// s, from google.com), B1 (Jan 12 22:45, sent out of order, 1,500 s,
// direct), C (cookieless, 60 s, direct), E (a bounce from Hacker News).
func TestQueryVisitLevel(t *testing.T) {
	h, tn := newQueryHarness(t)
	if got, want := queryRows(t, h, tn.readKey, "web", q(list("visitors", "visits"), nil)), "5 6"; got != want {
		t.Fatalf("before the erasure: got %s, want %s", got, want)
	}
	mustStatus(t, h.q("POST", "/v1/sites/web/gdpr/delete", testAdminToken, map[string]any{"subject": map[string]any{"user_id": "u-erase"}}), 200, "")
	tests := []struct {
		name string
		body map[string]any
		want string
	}{
		{"aggregate", q(list("visitors", "visits", "bounce_rate", "visit_duration", "views_per_visit"), nil), "4 5 20 624 1.8"},
		{"visit:source", q(list("visitors", "visits", "percentage"), list("visit:source")),
			"Direct / None: 2 2 50; google.com: 1 1 25; news: 1 1 25; news.ycombinator.com: 1 1 25"},
		{"visit:referrer", q(list("visits"), list("visit:referrer")), "(not set): 3; google.com: 1; news.ycombinator.com/item: 1"},
		{"visit:entry_page", q(list("visits", "bounce_rate"), list("visit:entry_page")), "/: 3 0; /blog/a: 1 0; /pricing: 1 100"},
		{"visit:exit_page", q(list("visits"), list("visit:exit_page")), "/pricing: 3; /blog/b: 1; /docs: 1"},
		{"visit:utm_source", q(list("visitors"), list("visit:utm_source")), "(not set): 4; news: 1"},
		{"visit:utm_medium", q(list("visitors"), list("visit:utm_medium")), "(not set): 4; email: 1"},
		{"visit:utm_campaign", q(list("visitors"), list("visit:utm_campaign")), "(not set): 4; jan: 1"},
		{"visit:utm_term", q(list("visits"), list("visit:utm_term")), "(not set): 5"},
		{"visit:utm_content", q(list("visits"), list("visit:utm_content")), "(not set): 5"},
		{"visit:country", q(list("visitors"), list("visit:country")), "(not set): 1; DE: 1; FR: 1; US: 1"},
		{"visit:city", q(list("visitors"), list("visit:city")), "(not set): 1; Berlin: 1; New York: 1; Paris: 1"},
		{"visit:browser", q(list("visitors"), list("visit:browser")), "Firefox: 2; Chrome: 1; Mobile Safari: 1"},
		{"visit:os", q(list("visitors"), list("visit:os")), "Linux: 2; Windows: 1; iOS: 1"},
		{"visit:device", q(list("visitors"), list("visit:device")), "desktop: 3; mobile: 1"},
		{"time:day counts a visit on its start day", q(list("visits", "visit_duration"), list("time:day")),
			"2026-01-10: 1 360; 2026-01-12: 2 1350; 2026-01-15: 1 60; 2026-01-20: 1 0"},
		{"source and device", q(list("visits"), list("visit:device", "visit:source")),
			"desktop Direct / None: 1; desktop google.com: 1; desktop news: 1; desktop news.ycombinator.com: 1; mobile Direct / None: 1"},
		{"is Direct / None", q(list("visitors", "visits"), nil, []any{"is", "visit:source", list("Direct / None")}), "2 2"},
		{"is_not Direct / None", q(list("visitors", "visits"), nil, []any{"is_not", "visit:source", list("Direct / None")}), "2 3"},
		{"is (not set)", q(list("visits"), nil, []any{"is", "visit:country", list("DE", "FR")}), "3"},
		{"contains on city", q(list("visits"), nil, []any{"contains", "visit:city", list("york")}), "0"},
		{"contains on city, case-insensitive", q(list("visits"), nil, []any{"contains", "visit:city", list("york"), map[string]any{"case_sensitive": false}}), "1"},
		{"matches on entry page", q(list("visits"), nil, []any{"matches", "visit:entry_page", list("^/blog")}), "1"},
		{"utm filter", q(list("visitors"), nil, []any{"is", "visit:utm_campaign", list("jan")}), "1"},
		{"or of visit filters", q(list("visits"), nil, []any{"or", []any{[]any{"is", "visit:browser", list("Firefox")}, []any{"is", "visit:os", list("iOS")}}}), "3"},
		{"event metrics by a visit dimension", q(list("visitors", "pageviews"), list("visit:source")),
			"Direct / None: 2 4; google.com: 1 2; news: 1 2; news.ycombinator.com: 1 1"},
		{"event metrics and visits by a visit dimension", q(list("visits", "pageviews"), list("visit:source")),
			"Direct / None: 2 4; google.com: 1 2; news: 1 2; news.ycombinator.com: 1 1"},
		{"event dimension, visit filter", q(list("visitors", "pageviews"), list("event:page"), []any{"is", "visit:source", list("Direct / None")}),
			"/: 2 2; /docs: 1 1; /pricing: 1 1"},
		{"visits of events", q(list("visits"), list("event:page")), "/: 3; /pricing: 3; /blog/a: 1; /blog/b: 1; /docs: 1"},
		{"session metrics of visits with a matching event", q(list("visits", "bounce_rate", "visit_duration"), nil, []any{"is", "event:page", list("/pricing")}), "3 33 620"},
		{"session metrics by source, event filter", q(list("visits", "views_per_visit"), list("visit:source"), []any{"contains", "event:page", list("blog")}), "google.com: 1 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := queryRows(t, h, tn.readKey, "web", tt.body); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}
