package server

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"
)

// sendAt posts one event of site at ts.
func (h *harness) sendAt(site string, n int, anon, typ string, ts time.Time, extra map[string]any) {
	h.t.Helper()
	fields := map[string]any{"anon_id": anon, "type": typ, "ts": ts.Format(time.RFC3339Nano)}
	for k, v := range extra {
		fields[k] = v
	}
	intake(h.t, h.c("POST", "/v1/events", site, ev(site, n, fields), "User-Agent", chromeUA))
}

func day(d, hour, minute int) time.Time { return time.Date(2026, 1, d, hour, minute, 0, 0, time.UTC) }

func TestReadDateRules(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	tests := []struct {
		query  string
		status int
		code   string
	}{
		{"", 400, "invalid_date_param"},
		{"from=2026-01-01", 400, "invalid_date_param"},
		{"to=2026-01-01", 400, "invalid_date_param"},
		{"from=2026-1-01&to=2026-01-02", 400, "invalid_date_param"},
		{"from=2026-02-30&to=2026-03-02", 400, "invalid_date_param"},
		{"from=yesterday&to=2026-01-02", 400, "invalid_date_param"},
		{"from=2026-01-01T00:00:00Z&to=2026-01-02", 400, "invalid_date_param"},
		{"from=2026-01-01&to=2026-01-02x", 400, "invalid_date_param"},
		{"from=2026-01-03&to=2026-01-02", 400, "invalid_date_range"},
		{"from=2025-01-01&to=2026-01-02", 400, "invalid_date_range"},
		{"from=2025-01-02&to=2026-01-02", 200, ""}, // 366 days
		{"from=2026-01-02&to=2026-01-02", 200, ""},
	}
	for _, endpoint := range []string{"pageviews", "events", "sessions"} {
		for _, tt := range tests {
			t.Run(endpoint+"?"+tt.query, func(t *testing.T) {
				mustStatus(t, h.q("GET", "/v1/sites/web/"+endpoint+"?"+tt.query, tn.readKey, nil), tt.status, tt.code)
			})
		}
	}
}

func TestReadAuthorization(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.setupTenant("acme", "web")
	b := h.setupTenant("bravo", "other")
	q := "?from=2026-01-01&to=2026-01-31"
	for _, endpoint := range []string{"pageviews", "events", "sessions", "users/u1/timeline"} {
		path := "/v1/sites/web/" + endpoint + q
		mustStatus(t, h.q("GET", path, "", nil), 401, "unauthorized")
		mustStatus(t, h.q("GET", path, a.ingestKey, nil), 403, "forbidden")
		mustStatus(t, h.q("GET", path, b.readKey, nil), 404, "not_found")
		mustStatus(t, h.q("GET", "/v1/sites/nope/"+endpoint+q, testAdminToken, nil), 404, "not_found")
		if endpoint != "users/u1/timeline" {
			mustStatus(t, h.q("GET", path, a.readKey, nil), 200, "")
			mustStatus(t, h.q("GET", path, a.adminKey, nil), 200, "")
			mustStatus(t, h.q("GET", "/sites/web/"+endpoint+q, testAdminToken, nil), 200, "")
		}
	}
}

func TestPageviewsEventsAndSessions(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	// a: 10:00, 10:20 (+ a click at 10:05) -> one session of 20 min, 3 events.
	// b: one pageview on the 2nd -> a bounce.
	// c: 23:50 on the 3rd and 00:10 on the 4th (one session starting on the
	//    3rd), then 01:00 on the 4th (a 50-minute gap: a second session).
	// d: sent out of order: 09:40 then 09:00 then 09:20 on the 5th -> one session.
	// Another site's events never count.
	h.sendAt("web", 1, "a", "pageview", day(2, 10, 0), nil)
	h.sendAt("web", 2, "a", "click", day(2, 10, 5), nil)
	h.sendAt("web", 3, "a", "pageview", day(2, 10, 20), nil)
	h.sendAt("web", 4, "b", "pageview", day(2, 15, 0), nil)
	h.sendAt("web", 5, "c", "pageview", day(3, 23, 50), nil)
	h.sendAt("web", 6, "c", "signup", day(4, 0, 10), nil)
	h.sendAt("web", 7, "c", "pageview", day(4, 1, 0), nil)
	h.sendAt("web", 8, "d", "pageview", day(5, 9, 40), nil)
	h.sendAt("web", 9, "d", "click", day(5, 9, 0), nil)
	h.sendAt("web", 10, "d", "click", day(5, 9, 20), nil)
	h.setupTenant("bravo", "other")
	h.sendAt("other", 11, "a", "pageview", day(2, 10, 0), nil)

	get := func(path string) map[string]any {
		t.Helper()
		r := h.q("GET", path, tn.readKey, nil)
		mustStatus(t, r, 200, "")
		return r.json(t)
	}
	pv := get("/v1/sites/web/pageviews?from=2026-01-01&to=2026-01-06")
	if got := fmt.Sprint(pv["count"], pv["by_day"]); got != "6 [map[count:0 date:2026-01-01] map[count:3 date:2026-01-02] map[count:1 date:2026-01-03] map[count:1 date:2026-01-04] map[count:1 date:2026-01-05] map[count:0 date:2026-01-06]]" {
		t.Errorf("pageviews: got %s", got)
	}
	pv = get("/v1/sites/web/pageviews?from=2026-01-03&to=2026-01-03") // both ends inclusive
	if pv["count"] != float64(1) || len(pv["by_day"].([]any)) != 1 {
		t.Errorf("one-day range: got %v", pv)
	}
	evs := get("/v1/sites/web/events?from=2026-01-01&to=2026-01-31")
	if got := fmt.Sprint(evs["by_name"]); got != "[map[count:6 name:pageview] map[count:3 name:click] map[count:1 name:signup]]" {
		t.Errorf("events: got %s", got)
	}
	evs = get("/v1/sites/web/events?from=2026-01-04&to=2026-01-05") // ties: count desc, then name asc
	if got := fmt.Sprint(evs["by_name"]); got != "[map[count:2 name:click] map[count:2 name:pageview] map[count:1 name:signup]]" {
		t.Errorf("events on the 4th-5th: got %s", got)
	}
	// Sessions: a (20 min, 3 events), b (0, 1, bounce), c1 (20 min, 2 events, starts on the 3rd),
	// c2 (0, 1, bounce), d (40 min, 3 events).
	ss := get("/v1/sites/web/sessions?from=2026-01-01&to=2026-01-31")
	want := map[string]float64{"count": 5, "avg_duration_s": (1200 + 0 + 1200 + 0 + 2400) / 5.0, "avg_events": 10 / 5.0, "bounce_rate": 2 / 5.0}
	for k, v := range want {
		if got := ss[k].(float64); got < v-1e-9 || got > v+1e-9 {
			t.Errorf("sessions %s: got %v, want %v", k, got, v)
		}
	}
	ss = get("/v1/sites/web/sessions?from=2026-01-03&to=2026-01-03") // only c1 starts on the 3rd
	if ss["count"] != float64(1) || ss["avg_duration_s"] != float64(1200) || ss["bounce_rate"] != float64(0) {
		t.Errorf("sessions starting on the 3rd: got %v", ss)
	}
	empty := h.q("GET", "/v1/sites/web/sessions?from=2025-06-01&to=2025-06-30", tn.readKey, nil)
	if strings.TrimSpace(string(empty.body)) != `{"count":0,"avg_duration_s":0,"avg_events":0,"bounce_rate":0}` {
		t.Errorf("empty range: got %s", empty.body)
	}
	empty = h.q("GET", "/v1/sites/web/events?from=2025-06-01&to=2025-06-30", tn.readKey, nil)
	if strings.TrimSpace(string(empty.body)) != `{"by_name":[]}` {
		t.Errorf("empty range: got %s", empty.body)
	}
}

func TestTimeline(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	// u1 uses a phone (p) and a laptop (l); the laptop's early events came
	// before u1 signed in there. Another visitor (x) never links to u1.
	h.sendAt("web", 1, "l", "pageview", day(2, 9, 0), map[string]any{"url": "https://a.test/1", "referrer": "https://r.test/"})
	h.sendAt("web", 2, "p", "pageview", day(2, 10, 0), map[string]any{"user_id": "u1"})
	h.sendAt("web", 3, "x", "pageview", day(2, 10, 30), nil)
	h.sendAt("web", 4, "l", "identify", day(2, 11, 0), map[string]any{"user_id": "u1", "traits": map[string]any{"plan": "pro"}})
	h.sendAt("web", 5, "p", "click", day(2, 12, 0), nil)

	r := h.q("GET", "/v1/sites/web/users/u1/timeline", tn.readKey, nil)
	mustStatus(t, r, 200, "")
	var body struct {
		Events     []map[string]any
		NextBefore *string `json:"next_before"`
	}
	json.Unmarshal(r.body, &body)
	var ids []string
	for _, e := range body.Events {
		ids = append(ids, e["id"].(string)[24:])
	}
	if got := strings.Join(ids, ","); got != "000000000005,000000000004,000000000002,000000000001" || body.NextBefore != nil {
		t.Fatalf("got %s next %v, want both devices' events newest first", got, body.NextBefore)
	}
	first := body.Events[3]
	var keys []string
	for k := range first {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if got := strings.Join(keys, ","); got != "anon_id,browser,city,country,device_type,id,os,referrer,ts,type,url" {
		t.Errorf("got row fields %s", got)
	}
	if first["url"] != "https://a.test/1" || first["referrer"] != "https://r.test/" || first["ts"] != "2026-01-02T09:00:00.000Z" ||
		first["browser"] != "Chrome" || first["device_type"] != "desktop" || first["country"] != nil || first["anon_id"] != "l" {
		t.Errorf("got row %v", first)
	}
	mustStatus(t, h.q("GET", "/v1/sites/web/users/nobody/timeline", tn.readKey, nil), 404, "user_not_found")
	mustStatus(t, h.q("GET", "/v1/sites/web/users/u1/timeline?limit=0", tn.readKey, nil), 400, "invalid_limit")
	mustStatus(t, h.q("GET", "/v1/sites/web/users/u1/timeline?limit=1001", tn.readKey, nil), 400, "invalid_limit")
	mustStatus(t, h.q("GET", "/v1/sites/web/users/u1/timeline?before=soon", tn.readKey, nil), 400, "invalid_cursor")
}

func TestTimelinePagingWithEqualTimestamps(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	// 12 events over two devices, many sharing a millisecond.
	stamps := []int{0, 0, 0, 1, 1, 2, 3, 3, 3, 3, 4, 5}
	for i, m := range stamps {
		anon := []string{"p", "l"}[i%2]
		h.sendAt("web", i+1, anon, "pageview", day(3, 8, m), map[string]any{"user_id": "u1"})
	}
	for _, limit := range []int{1, 2, 3, 5, 12, 100} {
		seen := map[string]bool{}
		var order []string
		cursor := ""
		for page := 0; ; page++ {
			if page > 20 {
				t.Fatal("paging does not end")
			}
			path := fmt.Sprintf("/v1/sites/web/users/u1/timeline?limit=%d", limit)
			if cursor != "" {
				path += "&before=" + url.QueryEscape(cursor)
			}
			var body struct {
				Events     []map[string]any
				NextBefore *string `json:"next_before"`
			}
			r := h.q("GET", path, tn.readKey, nil)
			mustStatus(t, r, 200, "")
			json.Unmarshal(r.body, &body)
			for _, e := range body.Events {
				id := e["id"].(string)
				if seen[id] {
					t.Fatalf("limit %d: %s repeated", limit, id)
				}
				seen[id] = true
				order = append(order, e["ts"].(string))
			}
			if body.NextBefore == nil {
				break
			}
			if *body.NextBefore != order[len(order)-1] {
				t.Fatalf("limit %d: next_before %s, want the last row's ts %s", limit, *body.NextBefore, order[len(order)-1])
			}
			cursor = *body.NextBefore
		}
		if len(seen) != len(stamps) {
			t.Fatalf("limit %d: got %d events over all pages, want %d", limit, len(seen), len(stamps))
		}
		if !sort.SliceIsSorted(order, func(i, j int) bool { return order[i] > order[j] }) {
			t.Fatalf("limit %d: not newest first: %v", limit, order)
		}
	}
}
