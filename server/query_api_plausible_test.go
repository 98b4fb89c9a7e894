package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestQuerySiteNamed: POST /api/v2/query takes as site_id the site's id,
// its domain (an alias) or any other alias, in any case; an unknown site
// and a foreign tenant's are the same 404, naming the site asked for.
func TestQuerySiteNamed(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.setupTenant("acme", "web")
	b := h.setupTenant("bravo", "other")
	mustStatus(t, h.q("PATCH", "/v1/sites/web", testAdminToken, map[string]any{"aliases": list("shop.test", "www.shop.test")}), 200, "")
	mustStatus(t, h.q("PATCH", "/v1/sites/other", testAdminToken, map[string]any{"aliases": list("bravo.test")}), 200, "")
	body := func(site string) map[string]any {
		return map[string]any{"site_id": site, "metrics": list("visitors"), "date_range": "7d"}
	}
	tests := []struct {
		name, token, site string
		status            int
		msg               string
	}{
		{"id", a.readKey, "web", 200, ""},
		{"domain", a.readKey, "shop.test", 200, ""},
		{"another alias", a.readKey, "www.shop.test", 200, ""},
		{"alias in upper case", a.readKey, "Shop.Test", 200, ""},
		{"admin token, alias", testAdminToken, "bravo.test", 200, ""},
		{"unknown", a.readKey, "dummy.site", 404, `site "dummy.site" not found`},
		{"foreign alias", a.readKey, "bravo.test", 404, `site "bravo.test" not found`},
		{"foreign id", a.readKey, "other", 404, `site "other" not found`},
		{"foreign key, own alias", b.readKey, "bravo.test", 200, ""},
		{"no credential, unknown site", "", "dummy.site", 401, ""},
		{"empty", a.readKey, "", 400, "Missing site ID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.q("POST", "/api/v2/query", tt.token, body(tt.site))
			mustPlausibleStatus(t, r, tt.status, tt.msg)
			if tt.status == 200 && !strings.Contains(string(r.body), `"site_id":"`+siteIDOf(tt.site)+`"`) {
				t.Errorf("got %s, want the query's site_id to be the site's id", r.body)
			}
		})
	}
	// Tally's own route names the site in its path; the body's site_id is
	// not read (docs/query-api.md#plausible-compatibility).
	mustStatus(t, h.q("POST", "/v1/sites/web/query", a.readKey, body("dummy.site")), 200, "")
}

// siteIDOf is the site id a name of TestQuerySiteNamed stands for.
func siteIDOf(name string) string {
	switch strings.ToLower(name) {
	case "shop.test", "www.shop.test":
		return "web"
	case "bravo.test":
		return "other"
	}
	return name
}

// TestQueryPropertyNegations: contains_not and matches_not on a custom
// property pass only events that have it; is_not passes those without it
// too; case_sensitive: false is taken on is_not and contains_not (as
// Plausible's query tests have it).
func TestQueryPropertyNegations(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	props := []map[string]any{
		{"tier": "small-1", "value": "bx"},
		{"tier": "small-1", "value": "ax"},
		{"tier": "small-2", "value": "bx"},
		{"tier": "small-2", "value": "cx"},
		{"tier": "small-3"},
		{"value": "ax"},
		nil,
	}
	for i, p := range props {
		h.sendQ("web", i+1, qev{anon: fmt.Sprintf("v%d", i), typ: "pageview", url: "https://x.test/Home", ts: utc(1, 20, 10, i), props: p})
	}
	folded := map[string]any{"case_sensitive": false}
	tests := []struct {
		name    string
		dims    []string
		filters []any
		want    string
	}{
		{"contains and contains_not", nil, []any{[]any{"contains", "event:props:tier", list("small")}, []any{"contains_not", "event:props:value", list("b", "c")}}, "1"},
		{"matches_not", nil, []any{[]any{"matches_not", "event:props:value", list("^b")}}, "3"},
		{"is_not keeps events without it", nil, []any{[]any{"is_not", "event:props:value", list("bx")}}, "5"},
		{"contains_not case-insensitive", nil, []any{[]any{"contains_not", "event:props:value", list("B"), folded}}, "3"},
		{"is_not case-insensitive", nil, []any{[]any{"is_not", "event:props:tier", list("SMALL-1"), folded}}, "5"},
		{"is_not case-insensitive on a page", nil, []any{[]any{"is_not", "event:page", list("/home"), folded}}, "0"},
		{"by the property", list("event:props:value"), []any{[]any{"contains_not", "event:props:value", list("b")}}, "ax: 2; cx: 1"},
		{"not contains_not", nil, []any{[]any{"not", []any{"contains_not", "event:props:value", list("b")}}}, "4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{"/v1/sites/web/query", "/api/v2/query"} {
				r := h.q("POST", path, tn.readKey, q(list("visitors"), tt.dims, tt.filters...))
				mustStatus(t, r, 200, "")
				if got := renderRows(t, r.body); got != tt.want {
					t.Errorf("%s: got %s, want %s", path, got, tt.want)
				}
			}
		})
	}
	// matches stays case-sensitive only: (?i) says otherwise.
	r := h.q("POST", "/api/v2/query", tn.readKey, q(list("visitors"), nil, []any{"matches_not", "event:props:value", list("^B"), folded}))
	mustPlausibleStatus(t, r, 400, "(?i)")
}

// TestQueryTimeBuckets ports Plausible's comparison and week tests: a
// compared time series has every bucket of the range, zeros included,
// each paired with the bucket at its place in the other period; change is
// computed from percentage to one decimal; a first partial week is
// labelled with the range's first day, in results and time_labels.
func TestQueryTimeBuckets(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "ts")
	for _, id := range []string{"br", "wk"} {
		mustStatus(t, h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": id, "name": id}), 201, "")
	}
	n := 0
	send := func(site, ua string, ts time.Time) {
		n++
		h.sendQ(site, n, qev{anon: fmt.Sprint("v", n), typ: "pageview", url: "https://x.test/", ts: ts, ua: ua})
	}
	for _, ts := range []time.Time{utc(1, 1, 0, 0), utc(1, 1, 0, 25), utc(1, 6, 0, 0), utc(1, 7, 0, 0), utc(1, 8, 0, 0)} {
		send("ts", chromeUA, ts)
	}
	for _, b := range []struct {
		ua   string
		ts   time.Time
		many int
	}{{firefoxLinuxUA, utc(1, 1, 0, 0), 4}, {iphoneUA, utc(1, 1, 0, 0), 3}, {chromeUA, utc(1, 1, 0, 0), 1},
		{chromeUA, utc(1, 7, 0, 0), 3}, {firefoxLinuxUA, utc(1, 7, 0, 0), 2}, {iphoneUA, utc(1, 8, 0, 0), 1}} {
		for range b.many {
			send("br", b.ua, b.ts)
		}
	}
	for _, ts := range []time.Time{utc(1, 1, 0, 0), utc(1, 4, 23, 59), utc(1, 8, 23, 59)} {
		send("wk", chromeUA, ts)
	}
	previous := map[string]any{"comparisons": map[string]any{"mode": "previous_period"}}
	tests := []struct {
		name, site string
		body       map[string]any
		want       string
	}{
		{"time series compared", "ts", map[string]any{"metrics": list("pageviews"), "date_range": list("2026-01-07", "2026-01-13"), "dimensions": list("time:day"), "include": previous},
			"2026-01-07: 1 vs 2025-12-31: 0 (100); 2026-01-08: 1 vs 2026-01-01: 2 (-50); 2026-01-09: 0 vs 2026-01-02: 0 (0); " +
				"2026-01-10: 0 vs 2026-01-03: 0 (0); 2026-01-11: 0 vs 2026-01-04: 0 (0); 2026-01-12: 0 vs 2026-01-05: 0 (0); 2026-01-13: 0 vs 2026-01-06: 1 (-100)"},
		{"aggregate compared", "ts", map[string]any{"metrics": list("pageviews"), "date_range": list("2026-01-07", "2026-01-13"), "include": previous},
			"2 vs : 3 (-33)"},
		{"by browser, change of percentage", "br", map[string]any{"metrics": list("visitors", "percentage"), "date_range": list("2026-01-07", "2026-01-13"),
			"dimensions": list("visit:browser"), "include": previous, "pagination": map[string]any{"limit": 2}},
			"Chrome: 3 50 vs Chrome: 1 12.5 (200 300); Firefox: 2 33.3 vs Firefox: 4 50 (-50 -33)"},
		{"by browser, the next page", "br", map[string]any{"metrics": list("visitors", "percentage"), "date_range": list("2026-01-07", "2026-01-13"),
			"dimensions": list("visit:browser"), "include": previous, "pagination": map[string]any{"limit": 2, "offset": 2}},
			"Safari: 1 16.7 vs Safari: 3 37.5 (-67 -55)"},
		{"first partial week", "wk", map[string]any{"metrics": list("visitors"), "date_range": list("2025-12-21", "2026-01-08"), "dimensions": list("time:week")},
			"2025-12-29: 2; 2026-01-05: 1"},
		{"first week from the 1st", "wk", map[string]any{"metrics": list("visitors"), "date_range": list("2026-01-01", "2026-01-31"), "dimensions": list("time:week")},
			"2026-01-01: 2; 2026-01-05: 1"},
		{"weeks compared", "wk", map[string]any{"metrics": list("visitors"), "date_range": list("2026-01-01", "2026-01-14"), "dimensions": list("time:week"), "include": previous},
			"2026-01-01: 2 vs 2025-12-18: 0 (100); 2026-01-05: 1 vs 2025-12-22: 0 (100); 2026-01-12: 0 vs 2025-12-29: 0 (0)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.body["site_id"] = tt.site
			for _, path := range []string{"/v1/sites/" + tt.site + "/query", "/api/v2/query"} {
				r := h.q("POST", path, tn.readKey, tt.body)
				mustStatus(t, r, 200, "")
				if got := renderRows(t, r.body); got != tt.want {
					t.Errorf("%s:\ngot  %s\nwant %s", path, got, tt.want)
				}
			}
		})
	}
	t.Run("week time_labels", func(t *testing.T) {
		r := h.q("POST", "/api/v2/query", tn.readKey, map[string]any{"site_id": "wk", "metrics": list("visitors"), "date_range": list("2025-12-21", "2026-01-08"),
			"dimensions": list("time:week"), "include": map[string]any{"time_labels": true}})
		mustStatus(t, r, 200, "")
		var a struct {
			Meta struct {
				TimeLabels []string `json:"time_labels"`
			} `json:"meta"`
		}
		if err := json.Unmarshal(r.body, &a); err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Join(a.Meta.TimeLabels, " "), "2025-12-21 2025-12-22 2025-12-29 2026-01-05"; got != want {
			t.Errorf("got time_labels %s, want %s", got, want)
		}
	})
}

// TestQueryImportsMetaWithoutImports: include.imports on a site that has
// never imported answers Plausible's meta, imports_included false and
// imports_skip_reason no_imported_data without a warning, whatever the
// query (one the rollups could not answer included).
func TestQueryImportsMetaWithoutImports(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	h.sendQ("web", 1, qev{anon: "a", typ: "pageview", url: "https://x.test/", ts: utc(1, 20, 10, 0)})
	imports := map[string]any{"imports": true}
	for _, body := range []map[string]any{
		{"metrics": list("visitors"), "date_range": january},
		{"metrics": list("visitors"), "date_range": january, "dimensions": list("visit:city")},
		{"metrics": list("visitors"), "date_range": january, "dimensions": list("time:hour")},
		{"metrics": list("visitors"), "date_range": january, "filters": []any{[]any{"is", "visit:country", list("DE")}}, "dimensions": list("visit:source")},
	} {
		body["site_id"], body["include"] = "web", imports
		r := h.q("POST", "/api/v2/query", tn.readKey, body)
		mustStatus(t, r, 200, "")
		var a struct {
			Meta map[string]any `json:"meta"`
		}
		if err := json.Unmarshal(r.body, &a); err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(a.Meta)
		if want := `{"imports_included":false,"imports_skip_reason":"no_imported_data"}`; string(got) != want {
			t.Errorf("%v: got meta %s, want %s", body["dimensions"], got, want)
		}
	}
}

// TestQueryRevenueMoney: total_revenue and average_revenue are
// Plausible's {currency, long, short, value}; a goal without revenue is
// null (an empty CSV cell), and so is its change.
func TestQueryRevenueMoney(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	for _, g := range []map[string]any{{"name": "Purchase", "event_name": "purchase", "currency": "USD"}, {"name": "Signup", "event_name": "signup"}} {
		mustStatus(t, h.q("POST", "/v1/sites/web/goals", testAdminToken, g), 201, "")
	}
	h.sendQ("web", 1, qev{anon: "a", typ: "purchase", url: "https://x.test/buy", ts: utc(1, 20, 10, 0), props: map[string]any{"revenue": 1319, "currency": "USD"}})
	h.sendQ("web", 2, qev{anon: "b", typ: "purchase", url: "https://x.test/buy", ts: utc(1, 20, 11, 0), props: map[string]any{"revenue": map[string]any{"amount": "2000", "currency": "USD"}}})
	h.sendQ("web", 3, qev{anon: "c", typ: "signup", url: "https://x.test/", ts: utc(1, 20, 12, 0)})
	goals := func(names ...string) []any { return []any{"is", "event:goal", names} }
	metricsOf := func(t *testing.T, r response) string {
		t.Helper()
		mustStatus(t, r, 200, "")
		var a struct {
			Results []struct {
				Dimensions []string        `json:"dimensions"`
				Metrics    json.RawMessage `json:"metrics"`
				Comparison map[string]any  `json:"comparison"`
			} `json:"results"`
		}
		if err := json.Unmarshal(r.body, &a); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, res := range a.Results {
			line := strings.Join(res.Dimensions, " ") + ": " + string(res.Metrics)
			if res.Comparison != nil {
				c, _ := json.Marshal(res.Comparison)
				line += " vs " + string(c)
			}
			out = append(out, line)
		}
		return strings.Join(out, "; ")
	}
	tests := []struct {
		name string
		body map[string]any
		want string
	}{
		{"average and total", q(list("average_revenue", "total_revenue"), nil, goals("Purchase")),
			`: [{"currency":"USD","long":"$1,659.50","short":"$1.7K","value":1659.5},{"currency":"USD","long":"$3,319.00","short":"$3.3K","value":3319}]`},
		{"a goal without revenue", q(list("visitors", "total_revenue"), list("event:goal"), goals("Purchase", "Signup")),
			`Purchase: [2,{"currency":"USD","long":"$3,319.00","short":"$3.3K","value":3319}]; Signup: [1,null]`},
		{"no revenue at all", q(list("total_revenue", "average_revenue"), nil, goals("Signup")), `: [null,null]`},
		{"compared with none", map[string]any{"metrics": list("total_revenue"), "date_range": list("2026-01-20", "2026-01-20"),
			"filters": []any{goals("Purchase")}, "include": map[string]any{"comparisons": map[string]any{"mode": "previous_period"}}},
			`: [{"currency":"USD","long":"$3,319.00","short":"$3.3K","value":3319}] vs {"change":[100],"dimensions":[],"metrics":[{"currency":"USD","long":"$0.00","short":"$0.0","value":0}]}`},
		{"a goal without revenue compared", map[string]any{"metrics": list("total_revenue"), "date_range": list("2026-01-20", "2026-01-20"),
			"filters": []any{goals("Signup")}, "include": map[string]any{"comparisons": map[string]any{"mode": "previous_period"}}},
			`: [null] vs {"change":[null],"dimensions":[],"metrics":[null]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.body["site_id"] = "web"
			for _, path := range []string{"/v1/sites/web/query", "/api/v2/query"} {
				if got := metricsOf(t, h.q("POST", path, tn.readKey, tt.body)); got != tt.want {
					t.Errorf("%s:\ngot  %s\nwant %s", path, got, tt.want)
				}
			}
		})
	}
	r := h.q("POST", "/v1/sites/web/query", tn.readKey, q(list("visitors", "total_revenue"), list("event:goal"), goals("Purchase", "Signup")), "Accept", "text/csv")
	mustStatus(t, r, 200, "")
	if got, want := string(r.body), "event:goal,visitors,total_revenue\nPurchase,2,3319\nSignup,1,\n"; got != want {
		t.Errorf("csv: got %q, want %q", got, want)
	}
}

// TestMoney checks Plausible's English amounts: long with separators and
// the currency's decimals, short to one decimal with K, M, B, T.
func TestMoney(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		v           float64
		cur         string
		long, short string
	}{
		{600, "USD", "$600.00", "$600.0"},
		{1659.5, "USD", "$1,659.50", "$1.7K"},
		{3000, "USD", "$3,000.00", "$3.0K"},
		{999.96, "EUR", "€999.96", "€1.0K"},
		{1234567.891, "EUR", "€1,234,567.89", "€1.2M"},
		{0, "GBP", "£0.00", "£0.0"},
		{-12.5, "USD", "-$12.50", "-$12.5"},
		{1500, "JPY", "¥1,500", "¥1.5K"},
		{42, "CHF", "CHF\u00a042.00", "CHF\u00a042.0"},
		// Half to even on the thousandths, as Plausible's decimals round.
		{50.45, "USD", "$50.45", "$50.4"},
		{50.55, "USD", "$50.55", "$50.6"},
		{67.066, "USD", "$67.07", "$67.1"},
		{0.125, "EUR", "€0.12", "€0.1"},
		{1.5, "BHD", "BHD\u00a01.500", "BHD\u00a01.5"},
	} {
		if m := money(c.v, c.cur); m.Long != c.long || m.Short != c.short || m.Value != c.v || m.Currency != c.cur {
			t.Errorf("money(%v, %s): got %+v, want long %q short %q", c.v, c.cur, m, c.long, c.short)
		}
	}
}

// TestQueryLiveRanges: realtime is the last 5 minutes and 30m the last
// 30 (both to 5 seconds after now), 24h the last 24 hours, as Plausible
// has them, on the server's clock.
func TestQueryLiveRanges(t *testing.T) {
	h := newHarness(t) // not parallel: it moves the clock
	tn := h.setupTenant("acme", "web")
	now := h.clock.Now() // 2026-01-31 09:05:00.120 UTC
	for i, ago := range []time.Duration{time.Minute, 15 * time.Minute, 23 * time.Hour, 25 * time.Hour} {
		h.sendQ("web", i+1, qev{anon: fmt.Sprint("v", i), typ: "pageview", url: "https://x.test/", ts: now.Add(-ago)})
	}
	tests := []struct {
		rng, want string
		shown     []string
	}{
		{"realtime", "1", []string{"2026-01-31T09:00:00+00:00", "2026-01-31T09:05:05+00:00"}},
		{"30m", "2", []string{"2026-01-31T08:35:00+00:00", "2026-01-31T09:05:05+00:00"}},
		{"24h", "3", []string{"2026-01-30T09:05:00+00:00", "2026-01-31T09:05:00+00:00"}},
	}
	for _, tt := range tests {
		for _, path := range []string{"/v1/sites/web/query", "/api/v2/query"} {
			r := h.q("POST", path, tn.readKey, map[string]any{"site_id": "web", "metrics": list("visitors"), "date_range": tt.rng})
			mustStatus(t, r, 200, "")
			if got := renderRows(t, r.body); got != tt.want {
				t.Errorf("%s %s: got %s visitors, want %s", path, tt.rng, got, tt.want)
			}
			var a struct {
				Query struct {
					DateRange []string `json:"date_range"`
				} `json:"query"`
			}
			if err := json.Unmarshal(r.body, &a); err != nil {
				t.Fatal(err)
			}
			if got, want := strings.Join(a.Query.DateRange, " "), strings.Join(tt.shown, " "); got != want {
				t.Errorf("%s %s: got date_range %s, want %s", path, tt.rng, got, want)
			}
		}
	}
	// Ten minutes on, the last 5 minutes hold nobody.
	h.clock.Advance(10 * time.Minute)
	if got := queryRows(t, h, tn.readKey, "web", map[string]any{"metrics": list("visitors"), "date_range": "realtime"}); got != "0" {
		t.Errorf("realtime 10 minutes later: got %s, want 0", got)
	}
}

// TestQueryBehaviouralFilters: has_done keeps the visits with an event
// that passes its inner filter (on events only), has_not_done those
// without, for visit and event metrics alike, as Plausible's behavioural
// filters do.
func TestQueryBehaviouralFilters(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	for _, g := range []map[string]any{{"name": "Signup", "event_name": "signup"}, {"name": "Home", "page_path": "/"}} {
		mustStatus(t, h.q("POST", "/v1/sites/web/goals", testAdminToken, g), 201, "")
	}
	for i, e := range []qev{
		{anon: "a", typ: "pageview", url: "https://x.test/", ts: utc(1, 20, 10, 0)},
		{anon: "a", typ: "signup", url: "https://x.test/", ts: utc(1, 20, 10, 1)},
		{anon: "b", typ: "pageview", url: "https://x.test/", ts: utc(1, 20, 11, 0)},
		{anon: "b", typ: "pageview", url: "https://x.test/pricing", ts: utc(1, 20, 11, 2)},
		{anon: "c", typ: "pageview", url: "https://x.test/blog", ts: utc(1, 20, 12, 0)},
		{anon: "c", typ: "pageview", url: "https://x.test/welcome", ts: utc(1, 21, 12, 0)},
		{anon: "c", typ: "signup", url: "https://x.test/welcome", ts: utc(1, 21, 12, 1)},
	} {
		h.sendQ("web", i+1, e)
	}
	done := []any{"has_done", []any{"is", "event:name", list("signup")}}
	notDone := []any{"has_not_done", []any{"is", "event:name", list("signup")}}
	tests := []struct {
		name    string
		metrics []string
		dims    []string
		filters []any
		want    string
	}{
		{"has_done", list("visitors", "visits", "pageviews", "bounce_rate"), nil, []any{done}, "2 2 2 0"},
		{"has_not_done", list("visitors", "visits", "pageviews", "bounce_rate"), nil, []any{notDone}, "2 2 3 50"},
		{"pages of visits that did", list("visitors"), list("event:page"), []any{done, []any{"is", "event:name", list("pageview")}}, "/: 1; /welcome: 1"},
		{"with an event filter", list("pageviews"), nil, []any{[]any{"is", "event:page", list("/")}, notDone}, "1"},
		{"a goal inside", list("visitors"), nil, []any{[]any{"has_done", []any{"is", "event:goal", list("Signup")}}}, "2"},
		{"inside not", list("visits"), nil, []any{[]any{"not", done}}, "2"},
		{"an or inside", list("visits"), nil, []any{[]any{"has_done", []any{"or", []any{[]any{"is", "event:name", list("signup")}, []any{"is", "event:page", list("/pricing")}}}}}, "3"},
		{"by day", list("visits"), list("time:day"), []any{done}, "2026-01-20: 1; 2026-01-21: 1"},
		{"by source", list("visitors"), list("visit:source"), []any{notDone}, "Direct / None: 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{"/v1/sites/web/query", "/api/v2/query"} {
				r := h.q("POST", path, tn.readKey, q(tt.metrics, tt.dims, tt.filters...))
				mustStatus(t, r, 200, "")
				if got := renderRows(t, r.body); got != tt.want {
					t.Errorf("%s: got %s, want %s", path, got, tt.want)
				}
			}
		})
	}
	for _, c := range []struct {
		name   string
		filter any
		naming string
	}{
		{"a visit filter inside", []any{"has_done", []any{"is", "visit:country", list("DE")}}, "visit:country"},
		{"nested", []any{"has_done", []any{"has_not_done", []any{"is", "event:name", list("x")}}}, "has_not_done"},
		{"no filter", []any{"has_done"}, "has_done"},
		{"two filters", []any{"has_done", []any{"is", "event:name", list("x")}, []any{"is", "event:name", list("y")}}, "has_done"},
		{"an unknown goal inside", []any{"has_done", []any{"is", "event:goal", list("Nope")}}, "Nope"},
	} {
		mustPlausibleStatus(t, h.q("POST", "/api/v2/query", tn.readKey, q(list("visitors"), nil, c.filter)), 400, c.naming)
	}
	// A funnel takes them too.
	r := h.q("POST", "/v1/sites/web/funnel", tn.readKey, map[string]any{"steps": list("Home", "Signup"), "date_range": january, "filters": []any{notDone}})
	mustStatus(t, r, 200, "")
	if !strings.Contains(string(r.body), `{"goal":"Signup","visitors":0`) {
		t.Errorf("funnel without signups: got %s, want no visitor at Signup", r.body)
	}
}
