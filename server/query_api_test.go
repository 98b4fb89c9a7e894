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
// by hand (docs/query-api.md). All times UTC; Berlin is UTC+1 in January.
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
			Dimensions []string          `json:"dimensions"`
			Metrics    []json.RawMessage `json:"metrics"`
			Comparison *struct {
				Dimensions []string          `json:"dimensions"`
				Metrics    []json.RawMessage `json:"metrics"`
				Change     []*float64        `json:"change"`
			} `json:"comparison"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	// A number as it is, null as null, a revenue object as its value.
	nums := func(list []json.RawMessage) string {
		s := make([]string, len(list))
		for i, raw := range list {
			var v struct{ Value float64 }
			switch {
			case string(raw) == "null":
				s[i] = "null"
			case strings.HasPrefix(string(raw), "{") && json.Unmarshal(raw, &v) == nil:
				s[i] = strconv.FormatFloat(v.Value, 'f', -1, 64)
			default:
				s[i] = string(raw)
			}
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
	t.Parallel()
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
		{"percentage has one decimal, as Plausible", q(list("visitors", "percentage"), list("event:name"), []any{"is", "event:page", list("/pricing")}), "pageview: 3 100; signup: 1 33.3"},
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
	t.Parallel()
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
			"Direct / None: 2 2 50; Google: 1 1 25; Hacker News: 1 1 25; news: 1 1 25"},
		{"visit:referrer", q(list("visits"), list("visit:referrer")), "Direct / None: 3; google.com: 1; news.ycombinator.com/item: 1"},
		{"is Direct / None referrer", q(list("visits"), nil, []any{"is", "visit:referrer", list("Direct / None")}), "3"},
		{"is_not Direct / None referrer", q(list("visits"), nil, []any{"is_not", "visit:referrer", list("Direct / None")}), "2"},
		{"(not set) is no referrer", q(list("visits"), nil, []any{"is", "visit:referrer", list("(not set)")}), "0"},
		{"visit:entry_page", q(list("visits", "bounce_rate"), list("visit:entry_page")), "/: 3 0; /blog/a: 1 0; /pricing: 1 100"},
		{"visit:exit_page", q(list("visits"), list("visit:exit_page")), "/pricing: 3; /blog/b: 1; /docs: 1"},
		{"visit:utm_source", q(list("visitors"), list("visit:utm_source")), "(not set): 4; news: 1"},
		{"visit:utm_medium", q(list("visitors"), list("visit:utm_medium")), "(not set): 4; email: 1"},
		{"visit:utm_campaign", q(list("visitors"), list("visit:utm_campaign")), "(not set): 4; jan: 1"},
		{"visit:utm_term", q(list("visits"), list("visit:utm_term")), "(not set): 5"},
		{"visit:utm_content", q(list("visits"), list("visit:utm_content")), "(not set): 5"},
		{"visit:country", q(list("visitors"), list("visit:country")), "(not set): 1; DE: 1; FR: 1; US: 1"},
		{"visit:city_name", q(list("visitors"), list("visit:city_name")), "(not set): 1; Berlin: 1; New York: 1; Paris: 1"},
		// A CDN's city header has no GeoNames id (query_regions_test.go has ids).
		{"visit:city", q(list("visitors"), list("visit:city")), "(not set): 4"},
		{"visit:browser", q(list("visitors"), list("visit:browser")), "Firefox: 2; Chrome: 1; Safari: 1"},
		{"visit:os", q(list("visitors"), list("visit:os")), "GNU/Linux: 2; Windows: 1; iOS: 1"},
		{"visit:device", q(list("visitors"), list("visit:device")), "Desktop: 3; Mobile: 1"},
		{"time:day counts a visit on its start day", q(list("visits", "visit_duration"), list("time:day")),
			"2026-01-10: 1 360; 2026-01-12: 2 1350; 2026-01-15: 1 60; 2026-01-20: 1 0"},
		{"source and device", q(list("visits"), list("visit:device", "visit:source")),
			"Desktop Direct / None: 1; Desktop Google: 1; Desktop Hacker News: 1; Desktop news: 1; Mobile Direct / None: 1"},
		{"is Direct / None", q(list("visitors", "visits"), nil, []any{"is", "visit:source", list("Direct / None")}), "2 2"},
		{"is_not Direct / None", q(list("visitors", "visits"), nil, []any{"is_not", "visit:source", list("Direct / None")}), "2 3"},
		{"is (not set)", q(list("visits"), nil, []any{"is", "visit:country", list("DE", "FR")}), "3"},
		{"contains on city", q(list("visits"), nil, []any{"contains", "visit:city_name", list("york")}), "0"},
		{"contains on city, case-insensitive", q(list("visits"), nil, []any{"contains", "visit:city_name", list("york"), map[string]any{"case_sensitive": false}}), "1"},
		{"matches on entry page", q(list("visits"), nil, []any{"matches", "visit:entry_page", list("^/blog")}), "1"},
		{"utm filter", q(list("visitors"), nil, []any{"is", "visit:utm_campaign", list("jan")}), "1"},
		{"or of visit filters", q(list("visits"), nil, []any{"or", []any{[]any{"is", "visit:browser", list("Firefox")}, []any{"is", "visit:os", list("iOS")}}}), "3"},
		{"event metrics by a visit dimension", q(list("visitors", "pageviews"), list("visit:source")),
			"Direct / None: 2 4; Google: 1 2; Hacker News: 1 1; news: 1 2"},
		{"event metrics and visits by a visit dimension", q(list("visits", "pageviews"), list("visit:source")),
			"Direct / None: 2 4; Google: 1 2; Hacker News: 1 1; news: 1 2"},
		{"event dimension, visit filter", q(list("visitors", "pageviews"), list("event:page"), []any{"is", "visit:source", list("Direct / None")}),
			"/: 2 2; /docs: 1 1; /pricing: 1 1"},
		{"visits of events", q(list("visits"), list("event:page")), "/: 3; /pricing: 3; /blog/a: 1; /blog/b: 1; /docs: 1"},
		// bounce_rate of the visits that entered on /pricing (e's bounce), as Plausible.
		{"session metrics of visits with a matching event", q(list("visits", "bounce_rate", "visit_duration"), nil, []any{"is", "event:page", list("/pricing")}), "3 100 620"},
		{"session metrics by source, event filter", q(list("visits", "visit_duration"), list("visit:source"), []any{"contains", "event:page", list("blog")}), "Google: 1 1200"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := queryRows(t, h, tn.readKey, "web", tt.body); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestQueryTimeZone: PATCH sets an IANA time zone (audited, shown on the
// site, anything else 400), and the query API's days, hours, relative
// ranges and answer's range are in it.
func TestQueryTimeZone(t *testing.T) {
	t.Parallel()
	h, tn := newQueryHarness(t)
	mustStatus(t, h.q("POST", "/v1/sites/web/gdpr/delete", testAdminToken, map[string]any{"subject": map[string]any{"user_id": "u-erase"}}), 200, "")
	for _, bad := range []any{"Mars/Olympus", "", "Local", "../../etc/passwd", "/usr/share/zoneinfo/UTC", 3, nil, "Europe/Berlin\x00"} {
		r := h.q("PATCH", "/v1/sites/web", tn.adminKey, map[string]any{"time_zone": bad})
		mustStatus(t, r, 400, "invalid_time_zone")
	}
	r := h.q("PATCH", "/v1/sites/web", tn.adminKey, map[string]any{"time_zone": "Europe/Berlin"})
	mustStatus(t, r, 200, "")
	if got := r.json(t)["time_zone"]; got != "Europe/Berlin" {
		t.Fatalf("got time_zone %v, want Europe/Berlin", got)
	}
	other := h.setupTenant("other", "elsewhere")
	mustStatus(t, h.q("PATCH", "/v1/sites/web", other.adminKey, map[string]any{"time_zone": "UTC"}), 404, "not_found")
	mustStatus(t, h.q("PATCH", "/v1/sites/web", tn.readKey, map[string]any{"time_zone": "UTC"}), 403, "forbidden")
	audit := h.q("GET", "/v1/workspaces/acme/audit", testAdminToken, nil).json(t)["entries"].([]any)
	last := audit[0].(map[string]any)
	if meta := last["metadata"].(map[string]any); last["action"] != "site.update" || meta["time_zone"] != "Europe/Berlin" || meta["previous_time_zone"] != "UTC" {
		t.Fatalf("got audit entry %v, want site.update with time_zone Europe/Berlin, previous UTC", last)
	}
	sites := h.q("GET", "/v1/workspaces/acme/sites", testAdminToken, nil).json(t)["sites"].([]any)
	if got := sites[0].(map[string]any)["time_zone"]; got != "Europe/Berlin" {
		t.Fatalf("got listed time_zone %v, want Europe/Berlin", got)
	}

	tests := []struct {
		name string
		body map[string]any
		want string
	}{
		// 22:45 and 23:50 UTC on Jan 12 are Jan 12 23:45 and Jan 13 00:50 in Berlin.
		{"pageviews by Berlin day", q(list("pageviews"), list("time:day")),
			"2026-01-10: 2; 2026-01-12: 1; 2026-01-13: 3; 2026-01-15: 2; 2026-01-20: 1"},
		{"visits by Berlin start day", q(list("visits"), list("time:day")),
			"2026-01-10: 1; 2026-01-12: 1; 2026-01-13: 1; 2026-01-15: 1; 2026-01-20: 1"},
		{"Berlin hours", map[string]any{"metrics": list("pageviews"), "date_range": list("2026-01-13", "2026-01-13"), "dimensions": list("time:hour")},
			"2026-01-13 00:00:00: 2; 2026-01-13 01:00:00: 1"},
		{"a Berlin day is 23:00 to 23:00 UTC", map[string]any{"metrics": list("pageviews"), "date_range": list("2026-01-12", "2026-01-12")}, "1"},
		{"7d is the 7 days before today in Berlin", map[string]any{"metrics": list("visits"), "date_range": "7d"}, "0"},
		{"30d", map[string]any{"metrics": list("visits"), "date_range": "30d"}, "5"},
		{"month", map[string]any{"metrics": list("visits"), "date_range": "month"}, "5"},
		{"year", map[string]any{"metrics": list("pageviews"), "date_range": "year"}, "9"},
		{"12mo", map[string]any{"metrics": list("pageviews"), "date_range": "12mo"}, "10"},
		{"all", map[string]any{"metrics": list("pageviews"), "date_range": "all"}, "10"},
		{"day", map[string]any{"metrics": list("pageviews"), "date_range": "day"}, "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := queryRows(t, h, tn.readKey, "web", tt.body); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
	// The answer's range is the site's: whole Berlin days.
	echo := h.q("POST", "/v1/sites/web/query", tn.readKey, map[string]any{"metrics": list("visitors"), "date_range": "7d"}).json(t)["query"].(map[string]any)
	if got, want := fmt.Sprint(echo["date_range"]), "[2026-01-24T00:00:00+01:00 2026-01-30T23:59:59+01:00]"; got != want {
		t.Errorf("got date_range %s, want %s", got, want)
	}
	// The old reads stay in UTC days.
	pv := h.q("GET", "/v1/sites/web/pageviews?from=2026-01-12&to=2026-01-12", tn.readKey, nil).json(t)
	if pv["count"] != float64(3) {
		t.Errorf("got the UTC read's Jan 12 pageviews %v, want 3", pv["count"])
	}
}

// TestQueryDaylightSaving: Berlin's spring-forward day has 23 hours, and
// events on each side of the change fall in their local hours.
func TestQueryDaylightSaving(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	mustStatus(t, h.q("PATCH", "/v1/sites/web", testAdminToken, map[string]any{"time_zone": "Europe/Berlin"}), 200, "")
	// Today is March 31, so both events are in the past.
	h.clock.Advance(60 * 24 * time.Hour)
	h.sendQ("web", 1, qev{anon: "a", typ: "pageview", url: "https://x.test/", ts: utc(3, 29, 0, 30)}) // 01:30 CET
	h.sendQ("web", 2, qev{anon: "b", typ: "pageview", url: "https://x.test/", ts: utc(3, 29, 1, 30)}) // 03:30 CEST
	body := map[string]any{"metrics": list("pageviews"), "date_range": list("2026-03-29", "2026-03-29"), "dimensions": list("time:hour"),
		"include": map[string]any{"time_labels": true}}
	r := h.q("POST", "/v1/sites/web/query", tn.readKey, body)
	mustStatus(t, r, 200, "")
	if got, want := renderRows(t, r.body), "2026-03-29 01:00:00: 1; 2026-03-29 03:00:00: 1"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	var a struct {
		Meta struct {
			TimeLabels []string `json:"time_labels"`
		} `json:"meta"`
	}
	json.Unmarshal(r.body, &a)
	if n := len(a.Meta.TimeLabels); n != 23 || a.Meta.TimeLabels[2] != "2026-03-29 03:00:00" {
		t.Errorf("got %d labels %v, want 23 with 03:00 third", n, a.Meta.TimeLabels)
	}
}

// TestQueryIncludes: total_rows, time_labels, comparisons (previous
// period, year over year, custom; by time bucket position), the echoed
// query, and the CSV answer.
func TestQueryIncludes(t *testing.T) {
	t.Parallel()
	h, tn := newQueryHarness(t)
	mustStatus(t, h.q("POST", "/v1/sites/web/gdpr/delete", testAdminToken, map[string]any{"subject": map[string]any{"user_id": "u-erase"}}), 200, "")
	cmp := func(mode string, rng []string, metrics, dims []string, extra map[string]any) map[string]any {
		c := map[string]any{"mode": mode}
		for k, v := range extra {
			c[k] = v
		}
		b := map[string]any{"metrics": metrics, "date_range": rng, "include": map[string]any{"comparisons": c}}
		if dims != nil {
			b["dimensions"] = dims
		}
		return b
	}
	tests := []struct {
		name string
		body map[string]any
		want string
	}{
		// Jan 10-20 against Dec 30 - Jan 9, which holds a's Dec 31 pageview.
		{"previous_period", cmp("previous_period", list("2026-01-10", "2026-01-20"), list("pageviews"), nil, nil), "9 vs : 1 (800)"},
		{"year_over_year from nothing", cmp("year_over_year", list("2026-01-10", "2026-01-20"), list("visitors"), nil, nil), "4 vs : 0 (100)"},
		{"by day, bucket by position", cmp("previous_period", list("2026-01-12", "2026-01-13"), list("pageviews"), list("time:day"), nil),
			"2026-01-12: 3 vs 2026-01-10: 2 (50); 2026-01-13: 1 vs 2026-01-11: 0 (100)"},
		{"custom", cmp("custom", list("2026-01-12", "2026-01-12"), list("visits", "bounce_rate"), list("visit:source"),
			map[string]any{"date_range": list("2026-01-20", "2026-01-20")}),
			"Direct / None: 1 0 vs Direct / None: 0 0 (100 null); Google: 1 0 vs Google: 0 0 (100 null)"},
		{"bounce rate changes in points", cmp("custom", list("2026-01-20", "2026-01-20"), list("bounce_rate"), nil,
			map[string]any{"date_range": list("2026-01-10", "2026-01-13")}), "100 vs : 0 (null)"},
		{"bounce rate from some", cmp("custom", list("2026-01-01", "2026-01-31"), list("bounce_rate"), nil,
			map[string]any{"date_range": list("2026-01-15", "2026-01-20")}), "20 vs : 50 (-30)"},
		{"match_day_of_week false is the default", cmp("previous_period", list("2026-01-10", "2026-01-20"), list("pageviews"), nil,
			map[string]any{"match_day_of_week": false}), "9 vs : 1 (800)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := queryRows(t, h, tn.readKey, "web", tt.body); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}

	t.Run("total_rows and time_labels", func(t *testing.T) {
		body := map[string]any{"site_id": "web", "metrics": list("pageviews"), "date_range": list("2026-01-10", "2026-01-13"), "dimensions": list("time:day"),
			"include": map[string]any{"time_labels": true, "total_rows": true}, "pagination": map[string]any{"limit": 1}}
		r := h.q("POST", "/api/v2/query", tn.readKey, body)
		mustStatus(t, r, 200, "")
		var a struct {
			Meta struct {
				TimeLabels []string `json:"time_labels"`
				TotalRows  int      `json:"total_rows"`
			} `json:"meta"`
			Query map[string]any `json:"query"`
		}
		json.Unmarshal(r.body, &a)
		if got, want := strings.Join(a.Meta.TimeLabels, " "), "2026-01-10 2026-01-11 2026-01-12 2026-01-13"; got != want {
			t.Errorf("got time_labels %s, want %s", got, want)
		}
		if a.Meta.TotalRows != 3 {
			t.Errorf("got total_rows %d, want 3", a.Meta.TotalRows)
		}
		if got, want := renderRows(t, r.body), "2026-01-10: 2"; got != want {
			t.Errorf("got %s, want %s", got, want)
		}
		got, _ := json.Marshal(a.Query)
		want := `{"date_range":["2026-01-10T00:00:00+00:00","2026-01-13T23:59:59+00:00"],"dimensions":["time:day"],"filters":[],` +
			`"include":{"time_labels":true,"total_rows":true},"metrics":["pageviews"],"order_by":[["time:day","asc"],["pageviews","desc"]],` +
			`"pagination":{"limit":1,"offset":0},"site_id":"web"}`
		if string(got) != want {
			t.Errorf("got query %s\nwant      %s", got, want)
		}
	})

	t.Run("csv", func(t *testing.T) {
		body := q(list("visitors", "pageviews"), list("event:page"), []any{"is_not", "event:page", list("/docs")})
		r := h.q("POST", "/v1/sites/web/query", tn.readKey, body, "Accept", "text/csv")
		mustStatus(t, r, 200, "")
		if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/csv") {
			t.Errorf("got Content-Type %q, want text/csv", ct)
		}
		want := "event:page,visitors,pageviews\n/,3,3\n/pricing,3,3\n/blog/a,1,1\n/blog/b,1,1\n"
		if string(r.body) != want {
			t.Errorf("got %q, want %q", r.body, want)
		}
	})
}

// TestQueryErrors: bad input is 400 invalid_query with a message naming
// it; what Plausible has and Tally does not is 400 unsupported_query
// naming it.
func TestQueryErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	base := func(k string, v any) map[string]any {
		b := map[string]any{"site_id": "web", "metrics": list("visitors"), "date_range": "7d"}
		if v == nil {
			delete(b, k)
		} else {
			b[k] = v
		}
		return b
	}
	tests := []struct {
		name   string
		body   any
		code   string
		naming string
	}{
		{"not an object", `[1]`, "invalid_json", "JSON object"},
		{"unknown field", base("colour", "red"), "invalid_query", "colour"},
		{"no metrics", base("metrics", nil), "invalid_query", "metrics"},
		{"empty metrics", base("metrics", list()), "invalid_query", "metrics"},
		{"metrics not an array", base("metrics", "visitors"), "invalid_query", "metrics"},
		{"unknown metric", base("metrics", list("visitorz")), "invalid_query", "visitorz"},
		{"repeated metric", base("metrics", list("visits", "visits")), "invalid_query", "visits"},
		{"no date_range", base("date_range", nil), "invalid_query", "date_range"},
		{"unknown date_range", base("date_range", "fortnight"), "invalid_query", "fortnight"},
		{"date_range of one date", base("date_range", list("2026-01-01")), "invalid_query", "date_range"},
		{"date_range mixed", base("date_range", list("2026-01-01", "2026-01-02T00:00:00Z")), "invalid_query", "date_range"},
		{"date_range not a date", base("date_range", list("2026-02-30", "2026-03-01")), "invalid_query", "date_range"},
		{"date_range backwards", base("date_range", list("2026-02-01", "2026-01-01")), "invalid_query", "after"},
		{"date_range a number", base("date_range", 7), "invalid_query", "date_range"},
		{"unknown dimension", base("dimensions", list("visit:planet")), "invalid_query", "visit:planet"},
		{"empty property name", base("dimensions", list("event:props:")), "invalid_query", "event:props:NAME"},
		{"two time dimensions", base("dimensions", list("time:day", "time:hour")), "invalid_query", "time dimension"},
		{"repeated dimension", base("dimensions", list("event:page", "event:page")), "invalid_query", "event:page"},
		{"filters not an array", base("filters", "x"), "invalid_query", "filters"},
		{"filter too short", base("filters", []any{[]any{"is"}}), "invalid_query", "filter"},
		{"unknown operator", base("filters", []any{[]any{"equals", "event:page", list("/")}}), "invalid_query", "equals"},
		{"filter values not strings", base("filters", []any{[]any{"is", "event:page", []any{1}}}), "invalid_query", "values"},
		{"filter on a time dimension", base("filters", []any{[]any{"is", "time:day", list("2026-01-01")}}), "invalid_query", "time"},
		{"filter on an unknown dimension", base("filters", []any{[]any{"is", "visit:planet", list("x")}}), "invalid_query", "visit:planet"},
		{"bad pattern", base("filters", []any{[]any{"matches", "event:page", list("(")}}), "invalid_query", "RE2"},
		{"long pattern", base("filters", []any{[]any{"matches", "event:page", list(strings.Repeat("a", 257))}}), "invalid_query", "256"},
		// 256 bytes that compile to 240,000 instructions (11.5 MB): refused
		// before they are compiled (issue 29).
		{"pattern of a huge program", base("filters", []any{[]any{"matches", "event:page", list("(?:" + strings.Repeat("x", 240) + "){1000}")}}), "invalid_query", "2000 instructions"},
		{"too many patterns", base("filters", []any{[]any{"matches", "event:page", manyPatterns(15)}, []any{"or", []any{[]any{"matches_not", "visit:source", manyPatterns(6)}}}}), "invalid_query", "20 matches patterns"},
		{"country not a code", base("filters", []any{[]any{"is", "visit:country", list("Germany")}}), "invalid_query", "2-letter"},
		{"unknown modifier", base("filters", []any{[]any{"is", "event:page", list("/"), map[string]any{"fuzzy": true}}}), "invalid_query", "fuzzy"},
		{"case-insensitive matches", base("filters", []any{[]any{"matches", "event:page", list("/"), map[string]any{"case_sensitive": false}}}), "invalid_query", "case_sensitive"},
		{"empty and", base("filters", []any{[]any{"and", []any{}}}), "invalid_query", "and"},
		{"not of two", base("filters", []any{[]any{"not", []any{"is", "event:page", list("/")}, []any{"is", "event:page", list("/")}}}), "invalid_query", "not"},
		{"too deep", base("filters", []any{nest(12)}), "invalid_query", "deep"},
		{"order_by not queried", base("order_by", [][]string{{"pageviews", "desc"}}), "invalid_query", "pageviews"},
		{"order_by bad direction", base("order_by", [][]string{{"visitors", "up"}}), "invalid_query", "order_by"},
		{"pagination limit 0", base("pagination", map[string]any{"limit": 0}), "invalid_query", "limit"},
		{"pagination limit too big", base("pagination", map[string]any{"limit": 10001}), "invalid_query", "limit"},
		{"pagination offset negative", base("pagination", map[string]any{"offset": -1}), "invalid_query", "offset"},
		{"pagination a fraction", base("pagination", map[string]any{"limit": 1.5}), "invalid_query", "limit"},
		{"unknown include", base("include", map[string]any{"everything": true}), "invalid_query", "everything"},
		{"time_labels without a time dimension", base("include", map[string]any{"time_labels": true}), "invalid_query", "time_labels"},
		{"percentage without dimensions", base("metrics", list("percentage")), "invalid_query", "percentage"},
		{"comparison mode unknown", base("include", map[string]any{"comparisons": map[string]any{"mode": "last_week"}}), "invalid_query", "last_week"},
		{"custom comparison without a range", base("include", map[string]any{"comparisons": map[string]any{"mode": "custom"}}), "invalid_query", "date_range"},
		{"hours of centuries", map[string]any{"metrics": list("visitors"), "date_range": list("1900-01-01", "2026-01-01"), "dimensions": list("time:hour")}, "invalid_query", "buckets"},

		{"metric scroll_depth without event:page", base("metrics", list("scroll_depth")), "invalid_query", "event:page"},
		{"metric conversion_rate without a goal", base("metrics", list("conversion_rate")), "invalid_query", "event:goal"},
		{"metric time_on_page without event:page", base("metrics", list("time_on_page")), "invalid_query", "event:page"},
		{"dimension visit:entry_page_hostname", base("dimensions", list("visit:entry_page_hostname")), "unsupported_query", "visit:entry_page_hostname"},
		{"filter on visit:screen", base("filters", []any{[]any{"is", "visit:screen", list("Desktop")}}), "unsupported_query", "visit:screen"},
		{"unknown segment", base("filters", []any{[]any{"is", "segment", []any{2}}}), "invalid_query", "Some segments don't exist"},
		{"imports not a flag", base("include", map[string]any{"imports": "yes"}), "invalid_query", "include.imports"},
		{"date_range 5m", base("date_range", "5m"), "invalid_query", "realtime, 30m, 24h"},
		{"match_day_of_week", base("include", map[string]any{"comparisons": map[string]any{"mode": "previous_period", "match_day_of_week": true}}), "unsupported_query", "match_day_of_week"},
		{"date", base("date", "2026-01-01"), "unsupported_query", "date"},
		{"session metric by event dimension", map[string]any{"metrics": list("bounce_rate"), "date_range": "7d", "dimensions": list("event:name")}, "unsupported_query", "bounce_rate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.q("POST", "/v1/sites/web/query", tn.readKey, tt.body)
			mustStatus(t, r, 400, tt.code)
			if msg := r.json(t)["error"].(map[string]any)["message"].(string); !strings.Contains(msg, tt.naming) {
				t.Errorf("got message %q, want it to name %q", msg, tt.naming)
			}
		})
	}
	mustStatus(t, h.q("POST", "/v1/sites/web/query", tn.readKey, `{"metrics":["visitors"],"date_range":"7d","x":"`+strings.Repeat("a", 70<<10)+`"}`), 413, "payload_too_large")
	// At the bounds: 20 patterns, one of them [a-z]{1000} (1,002 instructions).
	mustStatus(t, h.q("POST", "/v1/sites/web/query", tn.readKey, base("filters", []any{[]any{"matches", "event:page", append(manyPatterns(19), "[a-z]{1000}")}})), 200, "")
}

// manyPatterns is n distinct matches patterns.
func manyPatterns(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("^/p%d", i)
	}
	return out
}

// nest is a filter nested n deep in not.
func nest(n int) any {
	f := any([]any{"is", "event:page", list("/")})
	for range n {
		f = []any{"not", f}
	}
	return f
}

// TestQueryAuthorization: query:read (or admin) of the site's workspace;
// a foreign or unknown site is the ordinary 404 on both routes.
func TestQueryAuthorization(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.setupTenant("acme", "web")
	b := h.setupTenant("bravo", "other")
	restricted := h.q("POST", "/v1/workspaces/acme/keys", testAdminToken, map[string]any{"label": "r", "scopes": list("query:read"), "sites": list("web")}).json(t)["plaintext"].(string)
	mustStatus(t, h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": "web2", "name": "w"}), 201, "")
	body := func(site string) map[string]any {
		return map[string]any{"site_id": site, "metrics": list("visitors"), "date_range": "7d"}
	}
	tests := []struct {
		name, token, site string
		status            int
		code              string
	}{
		{"admin token", testAdminToken, "web", 200, ""},
		{"query:read", a.readKey, "web", 200, ""},
		{"admin key", a.adminKey, "web", 200, ""},
		{"restricted key, its site", restricted, "web", 200, ""},
		{"restricted key, another site", restricted, "web2", 404, "not_found"},
		{"ingest key", a.ingestKey, "web", 403, "forbidden"},
		{"foreign key", b.readKey, "web", 404, "not_found"},
		{"unknown site", a.readKey, "nope", 404, "not_found"},
		{"no credential", "", "web", 401, "unauthorized"},
		{"bad credential", "sk_acme_nope", "web", 401, "unauthorized"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mustStatus(t, h.q("POST", "/v1/sites/"+tt.site+"/query", tt.token, body(tt.site)), tt.status, tt.code)
			mustPlausibleStatus(t, h.q("POST", "/api/v2/query", tt.token, body(tt.site)), tt.status, "")
		})
	}
	mustPlausibleStatus(t, h.q("POST", "/api/v2/query", a.readKey, map[string]any{"metrics": list("visitors"), "date_range": "7d"}), 400, "site_id")
	mustPlausibleStatus(t, h.q("POST", "/api/v2/query", "", `not json`), 401, "")
}

// mustPlausibleStatus checks r's status and, for a failure, Plausible's
// error body: one key, "error", a message that holds want.
func mustPlausibleStatus(t *testing.T, r response, status int, want string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("got %d, want %d; body %s", r.status, status, r.body)
	}
	if status < 400 {
		return
	}
	var body map[string]any
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
	msg, ok := body["error"].(string)
	if len(body) != 1 || !ok || msg == "" || !strings.Contains(msg, want) {
		t.Fatalf("got body %s, want {\"error\": \"<message with %q>\"}", r.body, want)
	}
}

// TestQueryPlausibleErrors: POST /api/v2/query fails with Plausible's
// body, {"error": "<message>"}, and the same statuses; Tally's own route
// keeps SPEC's envelope for the same requests.
func TestQueryPlausibleErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	q := func(extra map[string]any) map[string]any {
		b := map[string]any{"site_id": "web", "metrics": list("visitors"), "date_range": "7d"}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	tests := []struct {
		name, token string
		body        any
		status      int
		code, msg   string
	}{
		{"unknown metric", tn.readKey, q(map[string]any{"metrics": list("visitorz")}), 400, "invalid_query", "visitorz"},
		{"bad date_range", tn.readKey, q(map[string]any{"date_range": "fortnight"}), 400, "invalid_query", "date_range"},
		{"bad filter", tn.readKey, q(map[string]any{"filters": []any{[]any{"is", "event:nope", list("x")}}}), 400, "invalid_query", "event:nope"},
		{"not json", tn.readKey, `{"site_id":`, 400, "invalid_query", ""},
		{"no credential", "", q(nil), 401, "unauthorized", ""},
		{"ingest key", tn.ingestKey, q(nil), 403, "forbidden", ""},
		{"unknown site", tn.readKey, q(map[string]any{"site_id": "nope"}), 404, "not_found", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mustPlausibleStatus(t, h.q("POST", "/api/v2/query", tt.token, tt.body), tt.status, tt.msg)
			if tt.code != "not_found" && tt.name != "not json" {
				mustStatus(t, h.q("POST", "/v1/sites/web/query", tt.token, tt.body), tt.status, tt.code)
			}
		})
	}
}

// TestQueryPlausibleDocsExamples runs requests copied verbatim from
// Plausible's Stats API documentation (plausible/docs,
// src/js/apiv2-examples/*-query.json) against /v1/sites/:siteId/query:
// those within what Tally supports answer 200 with the figures of a small
// data set, the others 400 naming what is not supported.
func TestQueryPlausibleDocsExamples(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	// Today is Jan 31, so "7d" is Jan 24-30.
	h.sendQ("web", 1, qev{anon: "a", typ: "pageview", url: "https://x.test/?utm_source=google&utm_medium=cpc", ts: utc(1, 25, 10, 0), ua: chromeUA})
	h.sendQ("web", 2, qev{anon: "a", typ: "purchase", url: "https://x.test/buy", ts: utc(1, 25, 10, 1), ua: chromeUA, props: map[string]any{"is_customer": true}})
	h.sendQ("web", 3, qev{anon: "b", typ: "pageview", url: "https://x.test/", ts: utc(1, 26, 10, 0), ua: firefoxLinuxUA, props: map[string]any{"is_customer": false}})
	h.sendQ("web", 4, qev{anon: "c", typ: "pageview", url: "https://x.test/", ts: utc(1, 26, 11, 0), ua: iphoneUA})
	tests := []struct {
		name, body, want string
	}{
		{"aggregate-query", `{
  "site_id": "dummy.site",
  "metrics": ["visitors", "events"],
  "date_range": "7d"
}`, "3 4"},
		// Goals are supported (docs/query-api.md#goals-and-funnels); the site
		// has none, so no row.
		{"revenue-metrics-query", `{
  "site_id": "dummy.site",
  "metrics": ["total_revenue"],
  "date_range": "all",
  "dimensions": ["event:goal"]
}`, ""},
		{"custom-date-range-query", `{
  "site_id": "dummy.site",
  "metrics": ["visitors"],
  "date_range": ["2024-08-01", "2024-08-15"]
}`, "0"},
		{"custom-properties-query", `{
  "site_id": "dummy.site",
  "metrics": ["visitors"],
  "date_range": "7d",
  "dimensions": ["time:day", "event:props:is_customer"],
  "order_by": [["time:day", "asc"], ["event:props:is_customer", "desc"]]
}`, "2026-01-25 true: 1; 2026-01-25 (none): 1; 2026-01-26 false: 1; 2026-01-26 (none): 1"},
		{"pagination-query", `{
  "site_id": "dummy.site",
  "metrics": ["visitors", "events", "pageviews"],
  "date_range": "7d",
  "dimensions": ["visit:utm_medium", "visit:utm_source"],
  "include": { "total_rows": true },
  "pagination": { "limit": 3, "offset": 1 }
}`, "cpc google: 1 2 1"},
		{"time-labels-query", `{
  "site_id": "dummy.site",
  "metrics": ["visitors"],
  "date_range": "day",
  "dimensions": ["time:hour"],
  "include": {
    "time_labels": true
  }
}`, ""},
		{"timeseries-query", `{
  "site_id": "dummy.site",
  "metrics": ["visitors", "events"],
  "date_range": "7d",
  "filters": [
    ["is", "visit:os", ["GNU/Linux", "Mac"]]
  ],
  "dimensions": ["time:day"]
}`, "2026-01-26: 1 1"}, // Plausible's names find the stored macOS/Linux rows (docs/query-api.md#value-names)
		{"utm-query", `{
  "site_id": "dummy.site",
  "metrics": ["visitors", "events", "pageviews"],
  "date_range": "7d",
  "dimensions": ["visit:utm_medium", "visit:utm_source"]
}`, "(not set) (not set): 2 2 2; cpc google: 1 2 1"},
		{"filtering-case-insensitive-query", `{
  "site_id": "dummy.site",
  "metrics": ["visitors"],
  "date_range": "7d",
  "filters": [
    ["contains", "event:page", ["BUY"], {"case_sensitive": false}]
  ]
}`, "1"},
		{"country-and-city-query", `{
  "site_id": "dummy.site",
  "metrics": ["visitors", "pageviews", "bounce_rate"],
  "date_range": "7d",
  "filters": [
    ["is_not", "visit:country_name", [""]]
  ],
  "dimensions": ["visit:country_name", "visit:city_name"]
}`, "(not set) (not set): 3 3 67"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.q("POST", "/v1/sites/web/query", tn.readKey, tt.body)
			mustStatus(t, r, 200, "")
			if got := renderRows(t, r.body); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
	// The behavioural example names a goal the site does not have: refused
	// as Plausible refuses it (has_done itself is supported).
	r := h.q("POST", "/v1/sites/web/query", tn.readKey, `{
  "site_id": "dummy.site",
  "metrics": ["visitors"],
  "date_range": "all",
  "filters": [
    ["is", "event:goal", ["Signup"]],
    ["has_done", ["is", "event:page", ["/pricing"]]]
  ]
}`)
	mustStatus(t, r, 400, "invalid_query")
	if msg := r.json(t)["error"].(map[string]any)["message"].(string); !strings.Contains(msg, `"Signup"`) {
		t.Errorf("behavioral-filters-query: got message %q, want it to name the goal Signup", msg)
	}
}

// TestQueryFilterEveryDimension filters on each dimension in turn: visitors
// of the visits (no event filter: visit figures) and visitors and
// pageviews of the events joined to their visits.
func TestQueryFilterEveryDimension(t *testing.T) {
	t.Parallel()
	h, tn := newQueryHarness(t)
	mustStatus(t, h.q("POST", "/v1/sites/web/gdpr/delete", testAdminToken, map[string]any{"subject": map[string]any{"user_id": "u-erase"}}), 200, "")
	tests := []struct {
		op, dim, value string
		visits, events string // "visitors visits" of visits; "visitors pageviews" of events
	}{
		{"is", "event:page", "/docs", "", "1 1"},
		{"is", "event:name", "signup", "", "1 0"},
		{"is", "event:props:plan", "pro", "", "1 0"},
		{"is", "visit:entry_page", "/blog/a", "1 1", "1 2"},
		{"is", "visit:exit_page", "/docs", "1 1", "1 2"},
		{"is", "visit:source", "news", "1 1", "1 2"},
		{"is", "visit:referrer", "google.com", "1 1", "1 2"},
		{"is", "visit:utm_source", "news", "1 1", "1 2"},
		{"is", "visit:utm_medium", "email", "1 1", "1 2"},
		{"is", "visit:utm_campaign", "jan", "1 1", "1 2"},
		{"is", "visit:utm_term", "(not set)", "4 5", "4 9"},
		{"is_not", "visit:utm_content", "(not set)", "0 0", "0 0"},
		{"is", "visit:country", "US", "1 1", "1 2"},
		{"is", "visit:city_name", "Paris", "1 1", "1 1"},
		{"is", "visit:browser", "Safari", "1 1", "1 2"},
		{"is", "visit:os", "GNU/Linux", "2 2", "2 3"},
		{"is", "visit:device", "Mobile", "1 1", "1 2"},
	}
	for _, tt := range tests {
		t.Run(tt.dim, func(t *testing.T) {
			f := []any{tt.op, tt.dim, list(tt.value)}
			if tt.visits != "" {
				if got := queryRows(t, h, tn.readKey, "web", q(list("visitors", "visits"), nil, f)); got != tt.visits {
					t.Errorf("visits: got %s, want %s", got, tt.visits)
				}
			}
			if got := queryRows(t, h, tn.readKey, "web", q(list("visitors", "pageviews"), nil, f)); got != tt.events {
				t.Errorf("events: got %s, want %s", got, tt.events)
			}
		})
	}
}
