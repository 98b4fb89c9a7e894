package server

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tally-analytics/tally/privacy"
)

// trackerHarness is a harness with site web (aliases example.com and an
// Umami website id) and site shop in another workspace.
func trackerHarness(t *testing.T, opts ...harnessOption) *harness {
	h := newHarness(t, opts...)
	h.setupTenant("acme", "web")
	h.setupTenant("other", "shop")
	mustStatus(t, h.q("PATCH", "/v1/sites/web", testAdminToken,
		map[string]any{"aliases": []string{"example.com", umamiWebsite}}), 200, "")
	return h
}

const umamiWebsite = "0b5d0e6a-6c7e-4b6e-9a0c-2b8f1c3d4e5f"

// trackerRow is what a stored event of a tracker format holds.
type trackerRow struct {
	typ, anon, url, ref, raw, browser, credential string
}

func (h *harness) trackerRows(site string) []trackerRow {
	h.t.Helper()
	var out []trackerRow
	for _, e := range h.segmentEvents(site) {
		out = append(out, trackerRow{typ: e.typ, anon: e.anon, url: e.url.String, ref: e.ref.String, raw: e.raw,
			browser: e.browser.String, credential: e.credential.String})
	}
	return out
}

// TestPlausibleEventsAPI: Plausible's tracker's short fields and the
// documented long ones map onto events of the site the domain names, in
// the cookieless form, answered 202 "ok" as Plausible answers.
func TestPlausibleEventsAPI(t *testing.T) {
	t.Parallel()
	h := trackerHarness(t)
	post := func(body any, headers ...string) response {
		h.clock.Advance(time.Second) // events at one millisecond would be ordered by value
		return h.c("POST", "/api/event", "", body, append([]string{"User-Agent", chromeUA, "Content-Type", "text/plain"}, headers...)...)
	}
	// The tracker's own body: short names, a referrer, utm parameters.
	r := post(`{"n":"pageview","v":36,"u":"https://www.example.com/pricing?utm_source=news&utm_medium=mail&x=1","d":"example.com","r":"https://news.test/story?id=3"}`)
	if r.status != 202 || string(r.body) != "ok" || r.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("got %d %q (ACAO %q), want 202 \"ok\" with CORS", r.status, r.body, r.header.Get("Access-Control-Allow-Origin"))
	}
	// The documented API's long names, props and revenue; www. and a
	// second, unknown site in domain.
	mustStatusText(t, post(map[string]any{"name": "Purchase", "url": "https://example.com/checkout", "domain": "www.example.com,unknown.org",
		"props":   map[string]any{"plan": "pro", "seats": 3, "empty": "", "list": []int{1}, "obj": map[string]any{}},
		"revenue": map[string]any{"amount": "49.90", "currency": "eur"}, "interactive": false}), 202)
	// A site's own id names it too.
	mustStatusText(t, post(map[string]any{"name": 404, "url": "https://example.com/missing", "domain": "web"}), 202)
	// An engagement event is answered and not stored.
	mustStatusText(t, post(`{"n":"engagement","sd":40,"e":1200,"d":"example.com","u":"https://example.com/pricing","v":36}`), 202)

	rows := h.trackerRows("web")
	if len(rows) != 3 {
		t.Fatalf("got %d events, want 3: %+v", len(rows), rows)
	}
	for _, want := range []struct{ typ, url, ref string }{
		{"pageview", "https://www.example.com/pricing", "https://news.test/story"},
		{"Purchase", "https://example.com/checkout", ""},
		{"404", "https://example.com/missing", ""},
	} {
		var found *trackerRow
		for i := range rows {
			if rows[i].typ == want.typ {
				found = &rows[i]
			}
		}
		if found == nil || found.url != want.url || found.ref != want.ref {
			t.Errorf("%s: got %+v, want url %q referrer %q", want.typ, found, want.url, want.ref)
			continue
		}
		if !privacy.IsCookielessID(found.anon) || found.browser != "Chrome" || found.credential != "site" {
			t.Errorf("%s: got anon %q browser %q credential %q, want a cookieless id, Chrome, site", want.typ, found.anon, found.browser, found.credential)
		}
		if strings.Contains(found.raw, "utm_") || strings.Contains(found.raw, "id=3") || strings.Contains(found.raw, `"anon_id"`) {
			t.Errorf("%s: raw %s keeps a query string or an anon_id", want.typ, found.raw)
		}
	}
	// One visitor (address and User-Agent) in one visit, its campaign from
	// the utm parameters though the stored URL has none.
	if rows[0].anon != rows[1].anon || rows[1].anon != rows[2].anon {
		t.Errorf("got anon ids %q %q %q, want one visitor", rows[0].anon, rows[1].anon, rows[2].anon)
	}
	var src, medium string
	if err := h.sqlDB().QueryRow(`SELECT utm_source, utm_medium FROM sessions WHERE site_id = 'web'`).Scan(&src, &medium); err != nil || src != "news" || medium != "mail" {
		t.Errorf("visit campaign: got %q %q (%v), want news mail", src, medium, err)
	}
	var props map[string]any
	for _, row := range rows {
		if row.typ == "Purchase" {
			var raw struct {
				Properties map[string]any `json:"properties"`
			}
			json.Unmarshal([]byte(row.raw), &raw)
			props = raw.Properties
		}
	}
	want := map[string]any{"plan": "pro", "seats": float64(3), "revenue": map[string]any{"amount": 49.9, "currency": "EUR"}}
	if b1, b2 := mustJSONText(props), mustJSONText(want); b1 != b2 {
		t.Errorf("Purchase properties: got %s, want %s", b1, b2)
	}

	// Revenue reads through the query API's goal metrics.
	mustStatus(t, h.q("POST", "/v1/sites/web/goals", testAdminToken, map[string]any{"name": "Purchase", "event_name": "Purchase", "currency": "EUR"}), 201, "")
	res := h.q("POST", "/v1/sites/web/query", testAdminToken, map[string]any{"metrics": []string{"total_revenue", "visitors"},
		"date_range": "all", "filters": []any{[]any{"is", "event:goal", []string{"Purchase"}}}})
	mustStatus(t, res, 200, "")
	if got := string(res.body); !strings.Contains(got, `"metrics":[{"currency":"EUR","long":"€49.90","short":"€49.9","value":49.9},1]`) || !strings.Contains(got, `"revenue_currency":"EUR"`) {
		t.Errorf("revenue: got %s, want total_revenue 49.9 EUR for 1 visitor", got)
	}
}

// mustStatusText checks a text answer's status.
func mustStatusText(t *testing.T, r response, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("got %d %s, want %d", r.status, r.body, status)
	}
}

func mustJSONText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestTrackerBadInput: bad input of any shape is a clear 4xx, never a 500,
// and stores nothing.
func TestTrackerBadInput(t *testing.T) {
	t.Parallel()
	h := trackerHarness(t)
	big := `{"n":"pageview","u":"https://example.com/","d":"example.com","p":{"x":"` + strings.Repeat("a", 1<<20) + `"}}`
	for _, tc := range []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"plausible empty", "/api/event", ``, 400, "invalid_event"},
		{"plausible not json", "/api/event", `{"n":`, 400, "invalid_event"},
		{"plausible array", "/api/event", `[{"n":"pageview"}]`, 400, "invalid_event"},
		{"plausible string", "/api/event", `"x"`, 400, "invalid_event"},
		{"plausible no domain, no url", "/api/event", `{"n":"pageview"}`, 400, "invalid_event"},
		{"plausible domain a number", "/api/event", `{"n":"pageview","u":"https://example.com/","d":7}`, 400, "invalid_event"},
		{"plausible blank domain", "/api/event", `{"n":"pageview","u":"https://example.com/","d":" , "}`, 400, "invalid_event"},
		{"plausible unknown domain", "/api/event", `{"n":"pageview","u":"https://example.com/","d":"nobody.org"}`, 401, "unauthorized"},
		{"plausible no name", "/api/event", `{"u":"https://example.com/","d":"example.com"}`, 400, "invalid_event"},
		{"plausible name object", "/api/event", `{"n":{},"u":"https://example.com/","d":"example.com"}`, 400, "invalid_event"},
		{"plausible name blank", "/api/event", `{"n":"  ","u":"https://example.com/","d":"example.com"}`, 400, "invalid_event"},
		{"plausible name too long", "/api/event", `{"n":"` + strings.Repeat("x", 121) + `","u":"https://example.com/","d":"example.com"}`, 400, "invalid_event"},
		{"plausible no url", "/api/event", `{"n":"pageview","d":"example.com"}`, 400, "invalid_event"},
		{"plausible url number", "/api/event", `{"n":"pageview","u":5,"d":"example.com"}`, 400, "invalid_event"},
		{"plausible url data", "/api/event", `{"n":"pageview","u":"data:text/html,x","d":"example.com"}`, 400, "invalid_event"},
		{"plausible url too long", "/api/event", `{"n":"pageview","u":"https://example.com/` + strings.Repeat("a", 2000) + `","d":"example.com"}`, 400, "invalid_event"},
		{"plausible referrer number", "/api/event", `{"n":"pageview","u":"https://example.com/","d":"example.com","r":1}`, 400, "invalid_event"},
		{"plausible props array", "/api/event", `{"n":"x","u":"https://example.com/","d":"example.com","p":[1]}`, 400, "invalid_event"},
		{"plausible props bad string", "/api/event", `{"n":"x","u":"https://example.com/","d":"example.com","p":"{"}`, 400, "invalid_event"},
		{"plausible prop too long", "/api/event", `{"n":"x","u":"https://example.com/","d":"example.com","p":{"k":"` + strings.Repeat("v", 2001) + `"}}`, 400, "invalid_event"},
		{"plausible revenue number", "/api/event", `{"n":"x","u":"https://example.com/","d":"example.com","$":5}`, 400, "invalid_event"},
		{"plausible revenue no currency", "/api/event", `{"n":"x","u":"https://example.com/","d":"example.com","$":{"amount":5}}`, 400, "invalid_event"},
		{"plausible revenue bad amount", "/api/event", `{"n":"x","u":"https://example.com/","d":"example.com","$":{"amount":"five","currency":"EUR"}}`, 400, "invalid_event"},
		{"plausible revenue bad currency", "/api/event", `{"n":"x","u":"https://example.com/","d":"example.com","$":{"amount":5,"currency":"E1R"}}`, 400, "invalid_event"},
		{"plausible body too large", "/api/event", big, 413, "payload_too_large"},
		{"plausible engagement unknown domain", "/api/event", `{"n":"engagement","u":"https://example.com/","d":"nobody.org"}`, 401, "unauthorized"},
		{"umami empty", "/api/send", ``, 400, "invalid_event"},
		{"umami not json", "/api/send", `{"type":`, 400, "invalid_event"},
		{"umami no type", "/api/send", `{"payload":{"website":"web"}}`, 400, "invalid_event"},
		{"umami bad type", "/api/send", `{"type":"pageview","payload":{"website":"web"}}`, 400, "invalid_event"},
		{"umami no payload", "/api/send", `{"type":"event"}`, 400, "invalid_event"},
		{"umami payload array", "/api/send", `{"type":"event","payload":[]}`, 400, "invalid_event"},
		{"umami no website", "/api/send", `{"type":"event","payload":{"url":"/"}}`, 400, "invalid_event"},
		{"umami website number", "/api/send", `{"type":"event","payload":{"website":7}}`, 400, "invalid_event"},
		{"umami unknown website", "/api/send", `{"type":"event","payload":{"website":"9f5d0e6a-6c7e-4b6e-9a0c-2b8f1c3d4e5f"}}`, 401, "unauthorized"},
		{"umami bad hostname", "/api/send", `{"type":"event","payload":{"website":"web","hostname":"a b"}}`, 400, "invalid_event"},
		{"umami hostname number", "/api/send", `{"type":"event","payload":{"website":"web","hostname":1}}`, 400, "invalid_event"},
		{"umami name too long", "/api/send", `{"type":"event","payload":{"website":"web","name":"` + strings.Repeat("n", 51) + `"}}`, 400, "invalid_event"},
		{"umami screen too long", "/api/send", `{"type":"event","payload":{"website":"web","screen":"123456789012"}}`, 400, "invalid_event"},
		{"umami url object", "/api/send", `{"type":"event","payload":{"website":"web","url":{}}}`, 400, "invalid_event"},
		{"umami data array", "/api/send", `{"type":"event","payload":{"website":"web","name":"x","data":[1]}}`, 400, "invalid_event"},
		{"umami bad ip", "/api/send", `{"type":"event","payload":{"website":"web","ip":"300.1.1.1"}}`, 400, "invalid_event"},
		{"umami identify without data", "/api/send", `{"type":"identify","payload":{"website":"web"}}`, 400, "invalid_event"},
	} {
		r := h.c("POST", tc.path, "", tc.body, "User-Agent", chromeUA)
		if r.status != tc.status || r.code() != tc.code {
			t.Errorf("%s: got %d %q, want %d %q; body %.300s", tc.name, r.status, r.code(), tc.status, tc.code, r.body)
		}
	}
	if n := h.count(`SELECT COUNT(*) FROM events`); n != 0 {
		t.Fatalf("bad input stored %d events, want 0", n)
	}
}

// TestUmamiSend: Umami's tracker's and @umami/node's bodies map onto
// events of the site the website names, answered 200 with a token as
// text; the token sent back in x-umami-cache is ignored.
func TestUmamiSend(t *testing.T) {
	t.Parallel()
	h := trackerHarness(t)
	post := func(body string, headers ...string) response {
		return h.c("POST", "/api/send", "", body, append([]string{"User-Agent", chromeUA}, headers...)...)
	}
	r := post(`{"type":"event","payload":{"website":"` + umamiWebsite + `","hostname":"example.com","screen":"1280x720","language":"en-US","title":"Caf%C3%A9","url":"/caf%C3%A9?utm_source=news","referrer":"https://news.test/a?b=1"}}`)
	if r.status != 200 || len(r.body) < 16 || strings.ContainsAny(string(r.body), "\r\n") {
		t.Fatalf("got %d %q, want 200 and a token", r.status, r.body)
	}
	mustStatusText(t, post(`{"type":"event","payload":{"website":"`+umamiWebsite+`","hostname":"example.com","url":"/cafe","name":"signup","data":{"plan":"pro"}}}`, "X-Umami-Cache", string(r.body)), 200)
	mustStatusText(t, post(`{"type":"identify","payload":{"website":"web","data":{"tier":"gold"}}}`), 200)
	mustStatusText(t, post(`{"type":"event","payload":{"website":"web","name":"server-side","ip":"203.0.113.9"}}`), 200)

	rows := h.trackerRows("web")
	if len(rows) != 4 {
		t.Fatalf("got %d events, want 4: %+v", len(rows), rows)
	}
	for i, want := range []struct{ typ, url, ref string }{
		{"pageview", "https://example.com/caf%C3%A9", "https://news.test/a"},
		{"signup", "https://example.com/cafe", ""},
		{"identify", "", ""},
		{"server-side", "", ""},
	} {
		got := rows[i]
		if got.typ != want.typ || got.url != want.url || got.ref != want.ref || !privacy.IsCookielessID(got.anon) {
			t.Errorf("event %d: got %+v, want %+v with a cookieless id", i, got, want)
		}
		if strings.Contains(got.raw, "203.0.113.9") || strings.Contains(got.raw, "utm_source") {
			t.Errorf("event %d: raw %s keeps the address or a query string", i, got.raw)
		}
	}
	if rows[0].anon != rows[1].anon {
		t.Errorf("one browser: got anon ids %q and %q, want one", rows[0].anon, rows[1].anon)
	}
	if rows[3].anon == rows[0].anon {
		t.Errorf("payload.ip names another visitor: got the browser's anon id")
	}
	if !strings.Contains(rows[1].raw, `"properties":{"plan":"pro"}`) || !strings.Contains(rows[2].raw, `"properties":{"tier":"gold"}`) {
		t.Errorf("data as properties: got %s and %s", rows[1].raw, rows[2].raw)
	}
	var page string
	if err := h.sqlDB().QueryRow(`SELECT entry_page FROM sessions WHERE site_id = 'web' AND entry_page IS NOT NULL`).Scan(&page); err != nil || page != "/café" {
		t.Errorf("entry page: got %q (%v), want /café", page, err)
	}
}

// TestTrackerGates: the gates of the native intake apply: bots dropped
// (Plausible's x-plausible-dropped), consent required drops every event
// (they carry no consent), the rate limit, and a preflight allows Umami's
// cache header.
func TestTrackerGates(t *testing.T) {
	t.Parallel()
	h := trackerHarness(t, func(c *Config) { c.BotFilter = privacy.BotFilterOn; c.RateLimit = 1 })
	body := `{"n":"pageview","u":"https://example.com/","d":"example.com"}`
	r := h.c("POST", "/api/event", "", body, "User-Agent", "Googlebot/2.1 (+http://www.google.com/bot.html)")
	if r.status != 202 || r.header.Get("X-Plausible-Dropped") != "1" {
		t.Fatalf("bot: got %d %q dropped %q, want 202 with X-Plausible-Dropped 1", r.status, r.body, r.header.Get("X-Plausible-Dropped"))
	}
	mustStatusText(t, h.c("POST", "/api/event", "", body, "User-Agent", chromeUA), 202)
	mustStatusText(t, h.c("POST", "/api/event", "", body, "User-Agent", chromeUA), 202)
	r = h.c("POST", "/api/send", "", `{"type":"event","payload":{"website":"web"}}`, "User-Agent", chromeUA)
	if r.status != 429 || r.code() != "rate_limited" || r.header.Get("Retry-After") == "" {
		t.Fatalf("rate limit: got %d %q (Retry-After %q), want 429 rate_limited", r.status, r.code(), r.header.Get("Retry-After"))
	}
	if n := h.count(`SELECT COUNT(*) FROM events`); n != 2 {
		t.Fatalf("got %d events, want 2", n)
	}
	pre := h.c("OPTIONS", "/api/send", "", nil, "Origin", "https://example.com", "Access-Control-Request-Method", "POST",
		"Access-Control-Request-Headers", "content-type,x-umami-cache")
	if pre.status != 204 || !strings.Contains(strings.ToLower(pre.header.Get("Access-Control-Allow-Headers")), "x-umami-cache") {
		t.Fatalf("preflight: got %d %q, want 204 allowing x-umami-cache", pre.status, pre.header.Get("Access-Control-Allow-Headers"))
	}

	req := trackerHarness(t, func(c *Config) { c.ConsentMode = privacy.ConsentRequire })
	r = req.c("POST", "/api/event", "", body, "User-Agent", chromeUA)
	if r.status != 202 || r.header.Get("X-Plausible-Dropped") != "1" {
		t.Fatalf("consent required: got %d dropped %q, want 202 dropped 1", r.status, r.header.Get("X-Plausible-Dropped"))
	}
	if n := req.count(`SELECT COUNT(*) FROM events`); n != 0 {
		t.Fatalf("consent required: got %d events, want 0", n)
	}
}

// TestTrackerRoutesRequireMode: with REQUIRE_API_KEY=require the routes do
// not exist (the ordinary 404); with tag they do.
func TestTrackerRoutesRequireMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode   string
		status int
	}{{KeyModeRequire, 404}, {KeyModeTag, 202}, {KeyModeNone, 202}} {
		h := trackerHarness(t, func(c *Config) { c.RequireAPIKey = tc.mode })
		r := h.c("POST", "/api/event", "", `{"n":"pageview","u":"https://example.com/","d":"example.com"}`, "User-Agent", chromeUA)
		if r.status != tc.status {
			t.Errorf("%s: /api/event got %d %s, want %d", tc.mode, r.status, r.body, tc.status)
		}
		want := map[int]int{404: 404, 202: 200}[tc.status]
		if r := h.c("POST", "/api/send", "", `{"type":"event","payload":{"website":"web"}}`, "User-Agent", chromeUA); r.status != want {
			t.Errorf("%s: /api/send got %d %s, want %d", tc.mode, r.status, r.body, want)
		}
		if tc.status == 404 {
			mustStatus(t, r, 404, "not_found")
		}
	}
}
