package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tally-analytics/tally/privacy"
	"github.com/tally-analytics/tally/schema"
	"github.com/tally-analytics/tally/storage"
)

const chromeUA = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/118.0.0.0 Safari/537.36"

// eventID returns a deterministic UUID.
func eventID(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }

// ev builds an event of site with id n; extra fields are merged in.
func ev(site string, n int, extra map[string]any) map[string]any {
	e := map[string]any{"id": eventID(n), "site_id": site, "anon_id": "anon-1", "type": "pageview", "url": "https://example.test/"}
	for k, v := range extra {
		if v == nil {
			delete(e, k)
			continue
		}
		e[k] = v
	}
	return e
}

// intake decodes a 202 answer.
func intake(t *testing.T, r response) intakeAnswer {
	t.Helper()
	mustStatus(t, r, 202, "")
	var a intakeAnswer
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestCollectorAuthModes(t *testing.T) {
	t.Parallel()
	type cred struct{ token, siteHeader string }
	for _, mode := range []string{KeyModeNone, KeyModeTag, KeyModeRequire} {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.RequireAPIKey = mode })
			a := h.setupTenant("acme", "acme-web")
			b := h.setupTenant("bravo", "bravo-web")
			revoked := h.q("POST", "/v1/workspaces/acme/keys", testAdminToken, map[string]any{"label": "old", "scopes": []string{"ingest:write"}}).json(t)
			mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/keys/"+revoked["id"].(string), testAdminToken, nil), 204, "")

			keyOK := map[string]int{KeyModeNone: 401, KeyModeTag: 202, KeyModeRequire: 202}[mode]
			siteOK := map[string]int{KeyModeNone: 202, KeyModeTag: 202, KeyModeRequire: 401}[mode]
			keyForbidden := map[string]int{KeyModeNone: 401, KeyModeTag: 403, KeyModeRequire: 403}[mode]
			tests := []struct {
				name   string
				cred   cred
				status int
			}{
				{"no credential", cred{}, 401},
				{"site bearer", cred{token: "acme-web"}, siteOK},
				{"unknown site bearer", cred{token: "nope"}, 401},
				{"ingest key with site header", cred{a.ingestKey, "acme-web"}, keyOK},
				{"admin key with site header", cred{a.adminKey, "acme-web"}, keyOK},
				{"ingest key without site header", cred{a.ingestKey, ""}, 401},
				{"ingest key for a foreign site", cred{a.ingestKey, "bravo-web"}, 401},
				{"ingest key for an unknown site", cred{a.ingestKey, "nope"}, 401},
				{"read-only key", cred{a.readKey, "acme-web"}, keyForbidden},
				{"revoked key", cred{revoked["plaintext"].(string), "acme-web"}, 401},
				{"foreign workspace's key", cred{b.ingestKey, "acme-web"}, 401},
			}
			for i, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					var headers []string
					if tt.cred.siteHeader != "" {
						headers = []string{"X-Site-Id", tt.cred.siteHeader}
					}
					headers = append(headers, "User-Agent", chromeUA)
					r := h.c("POST", "/v1/events", tt.cred.token, ev("acme-web", i, nil), headers...)
					code := map[int]string{202: "", 401: "unauthorized", 403: "forbidden"}[tt.status]
					mustStatus(t, r, tt.status, code)
				})
			}
			// The credential of each stored event is recorded.
			wantSite := map[string]int{KeyModeNone: 1, KeyModeTag: 1, KeyModeRequire: 0}[mode]
			if n := h.count(`SELECT COUNT(*) FROM event_credentials WHERE credential = 'site'`); n != wantSite {
				t.Errorf("got %d events sent with the site bearer, want %d", n, wantSite)
			}
			wantKey := map[string]int{KeyModeNone: 0, KeyModeTag: 1, KeyModeRequire: 1}[mode]
			if n := h.count(`SELECT COUNT(*) FROM event_credentials WHERE credential = ?`, "key:"+a.adminKID); n != wantKey {
				t.Errorf("got %d events sent with the admin key, want %d", n, wantKey)
			}
		})
	}
}

func TestCollectorWireFormat(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	post := func(body any) response { return h.c("POST", "/v1/events", "web", body, "User-Agent", chromeUA) }

	single := `{"id":"` + eventID(1) + `", "site_id":"web","anon_id":"a","type":"pageview","future_field":{"x":[1,2]}}`
	if a := intake(t, post(single)); a != (intakeAnswer{Accepted: 1}) {
		t.Fatalf("got %+v, want one accepted", a)
	}
	stored, ok := h.eventByID(eventID(1))
	if !ok {
		t.Fatalf("a 202 event is not in the database at once")
	}
	if raw := stored.Raw.String; raw != single {
		t.Fatalf("got raw %s, want the exact wire bytes %s", raw, single)
	}

	e2 := `{"id":"` + eventID(2) + `","site_id":"web","anon_id":"a","type":"click"}`
	e3 := `{"type":"click","anon_id":"b","site_id":"web","id":"` + eventID(3) + `"}`
	if a := intake(t, post("[\n"+e2+" , "+e3+"]")); a.Accepted != 2 {
		t.Fatalf("got %+v, want two accepted", a)
	}
	for id, want := range map[string]string{eventID(2): e2, eventID(3): e3} {
		if e, ok := h.eventByID(id); !ok || e.Raw.String != want {
			t.Errorf("batch element %s: got raw %q (stored %v), want its own bytes %q", id, e.Raw.String, ok, want)
		}
	}

	tests := []struct {
		name   string
		body   any
		status int
		code   string
		paths  string
	}{
		{"not json", `{"id":`, 400, "invalid_event", ""},
		{"broken element rejects the whole batch", []any{ev("web", 10, nil), ev("web", 11, map[string]any{"anon_id": nil}), ev("web", 12, map[string]any{"type": "bad type"})}, 400, "invalid_event", "/1/anon_id,/2/type"},
		{"site_id of another site", ev("other", 13, nil), 400, "invalid_event", "/site_id"},
		{"too large", `[` + strings.Repeat(" ", 1<<20) + `]`, 413, "payload_too_large", ""},
		{"batch of 501", func() []any {
			var b []any
			for i := range 501 {
				b = append(b, ev("web", 100+i, nil))
			}
			return b
		}(), 400, "invalid_event", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := post(tt.body)
			mustStatus(t, r, tt.status, tt.code)
			if tt.paths != "" {
				var env struct {
					Error struct{ Details []struct{ Path string } }
				}
				json.Unmarshal(r.body, &env)
				var paths []string
				for _, d := range env.Error.Details {
					paths = append(paths, d.Path)
				}
				if got := strings.Join(paths, ","); got != tt.paths {
					t.Fatalf("got detail paths %q, want %q", got, tt.paths)
				}
			}
		})
	}
	if n := h.count(`SELECT COUNT(*) FROM events`); n != 3 {
		t.Fatalf("got %d stored events, want 3: rejected requests must store nothing", n)
	}
	// The s2s endpoint and the unprefixed aliases take the same format.
	intake(t, h.c("POST", "/events", "web", ev("web", 20, nil), "User-Agent", chromeUA))
	intake(t, h.c("POST", "/s2s/events", "web", ev("web", 21, nil)))
	intake(t, h.c("POST", "/v1/s2s/events", "web", ev("web", 22, nil)))
}

func TestCollectorDedup(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/dedup.db"
	h := newHarnessAt(t, path)
	h.setupTenant("acme", "web")
	h.setupTenant("bravo", "other")
	post := func(body any, site string) intakeAnswer {
		return intake(t, h.c("POST", "/v1/events", site, body, "User-Agent", chromeUA))
	}
	if a := post(ev("web", 1, nil), "web"); a.Accepted != 1 {
		t.Fatalf("got %+v", a)
	}
	if a := post(ev("web", 1, nil), "web"); a != (intakeAnswer{Duplicates: 1}) {
		t.Fatalf("repeat: got %+v, want one duplicate", a)
	}
	if a := post([]any{ev("web", 2, nil), ev("web", 2, nil), ev("web", 1, nil)}, "web"); a != (intakeAnswer{Accepted: 1, Duplicates: 2}) {
		t.Fatalf("batch with repeats: got %+v, want 1 accepted 2 duplicates", a)
	}
	if a := post(ev("other", 1, nil), "other"); a.Accepted != 1 {
		t.Fatalf("same id on another site: got %+v, want accepted", a)
	}
	h.clock.Advance(24 * time.Hour)
	if a := post(ev("web", 1, nil), "web"); a.Duplicates != 1 {
		t.Fatalf("24 h later: got %+v, want a duplicate", a)
	}
	h.stop()

	// The window survives a restart: the database is the source of truth.
	h2 := newHarnessAt(t, path)
	if a := intake(t, h2.c("POST", "/v1/events", "web", ev("web", 2, nil), "User-Agent", chromeUA)); a.Duplicates != 1 {
		t.Fatalf("after restart: got %+v, want a duplicate", a)
	}
	if n := h2.count(`SELECT COUNT(*) FROM events WHERE site_id = 'web'`); n != 2 {
		t.Fatalf("got %d stored events, want 2", n)
	}
	// Expired ids are pruned after the window.
	h2.clock.Advance(49 * time.Hour)
	if err := h2.db.Prune(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := h2.count(`SELECT COUNT(*) FROM event_ids`); n != 0 {
		t.Errorf("got %d dedup ids after the window, want 0", n)
	}
}

func TestCollectorBotGate(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	bot := "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
	tests := []struct {
		name     string
		path     string
		header   string
		field    any
		accepted int
	}{
		{"browser endpoint, bot header", "/v1/events", bot, nil, 0},
		{"browser endpoint, headless browser", "/v1/events", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/120.0.0.0 Safari/537.36", nil, 0},
		{"browser endpoint, no user agent", "/v1/events", "", nil, 1},
		{"browser endpoint, browser", "/v1/events", chromeUA, nil, 1},
		{"browser endpoint ignores the field", "/v1/events", chromeUA, bot, 1},
		{"s2s reads the field", "/v1/s2s/events", chromeUA, bot, 0},
		{"s2s ignores its own header", "/v1/s2s/events", bot, chromeUA, 1},
		{"s2s without field", "/v1/s2s/events", bot, nil, 1},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ev("web", i, map[string]any{"user_agent": tt.field})
			a := intake(t, h.request("POST", h.collector.URL+tt.path, "web", e, "User-Agent", tt.header))
			if a.Accepted != tt.accepted || a.Dropped != 1-tt.accepted {
				t.Fatalf("got %+v, want accepted %d", a, tt.accepted)
			}
		})
	}
	if n := h.count(`SELECT COUNT(*) FROM events`); n != 5 {
		t.Fatalf("got %d stored, want 5", n)
	}
}

func TestCollectorConsent(t *testing.T) {
	t.Parallel()
	t.Run("cookieless by default", func(t *testing.T) {
		h := newHarness(t)
		h.setupTenant("acme", "web")
		denied := ev("web", 1, map[string]any{"consent": "denied", "user_id": "alice", "traits": map[string]any{"email": "a@x"},
			"url": "https://example.test/p?email=a@x", "referrer": "https://r.test/?q=alice", "type": "identify"})
		a := intake(t, h.c("POST", "/v1/events", "web", denied, "User-Agent", chromeUA))
		if a.Accepted != 1 {
			t.Fatalf("got %+v, want accepted", a)
		}
		list := h.events("")
		if len(list) != 1 {
			t.Fatalf("got %d stored events, want 1", len(list))
		}
		e := list[0]
		anon, url, ref, raw := e.AnonID, e.URL.String, e.Referrer.String, e.Raw.String
		if !strings.HasPrefix(anon, privacy.CookielessPrefix) || e.UserID.Valid || url != "https://example.test/p" || ref != "https://r.test/" {
			t.Fatalf("got anon %s user %v url %s referrer %s, want the cookieless form", anon, nullStr(e.UserID), url, ref)
		}
		for _, secret := range []string{"alice", "a@x", "anon-1"} {
			if strings.Contains(raw, secret) {
				t.Errorf("raw keeps %q: %s", secret, raw)
			}
		}
		if n := h.count(`SELECT COUNT(*) FROM identity_links`) + h.count(`SELECT COUNT(*) FROM user_profiles`); n != 0 {
			t.Errorf("got %d identity rows for a consent-denied event, want 0", n)
		}
		// Same visitor on the same day keeps one cookieless id; the next day another.
		intake(t, h.c("POST", "/v1/events", "web", ev("web", 2, map[string]any{"consent": "denied"}), "User-Agent", chromeUA))
		h.clock.Advance(24 * time.Hour)
		intake(t, h.c("POST", "/v1/events", "web", ev("web", 3, map[string]any{"consent": "denied"}), "User-Agent", chromeUA))
		if n := h.count(`SELECT COUNT(DISTINCT anon_id) FROM events`); n != 2 {
			t.Errorf("got %d distinct cookieless ids over two days, want 2", n)
		}
		metric := metricValue(t, h, `service_events_dropped_total{endpoint="events",reason="accepted_consent"}`)
		if metric != "3" {
			t.Errorf("got accepted_consent %s, want 3", metric)
		}
	})
	t.Run("require mode", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.ConsentMode = privacy.ConsentRequire })
		h.setupTenant("acme", "web")
		batch := []any{ev("web", 1, map[string]any{"consent": "granted"}), ev("web", 2, map[string]any{"consent": "denied"}), ev("web", 3, nil)}
		r := h.c("POST", "/v1/events", "web", batch, "User-Agent", chromeUA)
		if a := intake(t, r); a != (intakeAnswer{Accepted: 1, Dropped: 2}) {
			t.Fatalf("got %+v, want 1 accepted 2 dropped", a)
		}
		if got := r.header.Get(dropReasonsHeader); got != "consent_required" {
			t.Errorf("got %s %q, want consent_required", dropReasonsHeader, got)
		}
		if got := metricValue(t, h, `service_events_dropped_total{endpoint="events",reason="consent_required"}`); got != "2" {
			t.Errorf("got consent_required %s, want 2", got)
		}
	})
}

func TestCollectorRateLimitAndQuota(t *testing.T) {
	t.Parallel()
	t.Run("rate limit", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.RateLimit = 2 }) // burst 4
		h.setupTenant("acme", "web")
		h.setupTenant("bravo", "other")
		batch := func(site string, from, n int) []any {
			var b []any
			for i := range n {
				b = append(b, ev(site, from+i, nil))
			}
			return b
		}
		intake(t, h.c("POST", "/v1/events", "web", batch("web", 0, 3), "User-Agent", chromeUA))
		r := h.c("POST", "/v1/events", "web", batch("web", 10, 2), "User-Agent", chromeUA)
		mustStatus(t, r, 429, "rate_limited")
		if r.header.Get("Retry-After") != "1" {
			t.Errorf("got Retry-After %q, want 1", r.header.Get("Retry-After"))
		}
		intake(t, h.c("POST", "/v1/events", "other", batch("other", 20, 4), "User-Agent", chromeUA)) // other sites keep their own bucket
		h.clock.Advance(time.Second)
		intake(t, h.c("POST", "/v1/events", "web", batch("web", 10, 2), "User-Agent", chromeUA))
		if got := metricValue(t, h, `service_events_dropped_total{endpoint="events",reason="rate_limit"}`); got != "2" {
			t.Errorf("got rate_limit drops %s, want 2", got)
		}
		for range 5 { // the metrics endpoint is never limited
			if r := h.c("GET", "/metrics", "", nil); r.status != 200 {
				t.Fatalf("metrics: got %d", r.status)
			}
		}
	})
	t.Run("quota", func(t *testing.T) {
		path := t.TempDir() + "/quota.db"
		h := newHarnessAt(t, path, func(c *Config) { c.Quota = 3 })
		h.setupTenant("acme", "web")
		intake(t, h.c("POST", "/v1/events", "web", []any{ev("web", 1, nil), ev("web", 2, nil)}, "User-Agent", chromeUA))
		intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, nil), "User-Agent", chromeUA)) // a duplicate uses no quota
		intake(t, h.c("POST", "/v1/events", "web", ev("web", 3, nil), "User-Agent", chromeUA))
		r := h.c("POST", "/v1/events", "web", ev("web", 4, nil), "User-Agent", chromeUA)
		mustStatus(t, r, 429, "quota_exceeded")
		// 2026-01-31T09:05:00.12Z to 2026-02-01T00:00:00Z.
		if got := r.header.Get("Retry-After"); got != "53699" {
			t.Errorf("got Retry-After %s, want the seconds to the next month (53699)", got)
		}
		h.stop()
		h2 := newHarnessAt(t, path, func(c *Config) { c.Quota = 3 }) // usage survives a restart
		mustStatus(t, h2.c("POST", "/v1/events", "web", ev("web", 5, nil), "User-Agent", chromeUA), 429, "quota_exceeded")
		h2.clock.Advance(15 * time.Hour) // February: a new month
		intake(t, h2.c("POST", "/v1/events", "web", ev("web", 6, nil), "User-Agent", chromeUA))
	})
	t.Run("a re-created site starts with a fresh quota", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.Quota = 1 })
		h.setupTenant("acme", "web")
		intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, nil), "User-Agent", chromeUA))
		mustStatus(t, h.c("POST", "/v1/events", "web", ev("web", 2, nil), "User-Agent", chromeUA), 429, "quota_exceeded")
		mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/sites/web", testAdminToken, nil), 204, "")
		mustStatus(t, h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": "web", "name": "again"}), 201, "")
		intake(t, h.c("POST", "/v1/events", "web", ev("web", 3, nil), "User-Agent", chromeUA))
	})
}

func TestCollectorEnrichmentAndIdentity(t *testing.T) {
	t.Parallel()
	loc, err := privacy.NewLocator("../testdata/geoip-test.mmdb", false)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *Config) { c.Locator = loc })
	h.setupTenant("acme", "web")
	iphone := "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1"
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, map[string]any{"user_id": "u1"}), "User-Agent", iphone))
	intake(t, h.c("POST", "/v1/s2s/events", "web", ev("web", 2, map[string]any{"anon_id": "anon-2", "user_id": "u1", "type": "identify",
		"traits": map[string]any{"plan": "free", "name": "Al"}, "user_agent": chromeUA})))
	intake(t, h.c("POST", "/v1/s2s/events", "web", ev("web", 3, map[string]any{"anon_id": "anon-2", "user_id": "u1", "type": "identify",
		"traits": map[string]any{"plan": "pro"}})))

	type row struct{ browser, os, device, country, city *string }
	get := func(id string) row {
		var r row
		if err := h.sqlDB().QueryRow(`SELECT browser, os, device_type, country, city FROM events WHERE id = ?`, id).Scan(&r.browser, &r.os, &r.device, &r.country, &r.city); err != nil {
			t.Fatal(err)
		}
		return r
	}
	str := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return *p
	}
	// httptest clients connect from 127.0.0.1, which the test database places in Amsterdam.
	if r := get(eventID(1)); str(r.browser) != "Mobile Safari" || str(r.os) != "iOS" || str(r.device) != "mobile" || str(r.country) != "NL" || str(r.city) != "Amsterdam" {
		t.Errorf("browser event: got %s %s %s %s %s", str(r.browser), str(r.os), str(r.device), str(r.country), str(r.city))
	}
	if r := get(eventID(2)); str(r.browser) != "Chrome" || str(r.os) != "Windows" || str(r.device) != "desktop" || r.country != nil {
		t.Errorf("s2s event: got %s %s %s country %s, want the user_agent field's families and no location", str(r.browser), str(r.os), str(r.device), str(r.country))
	}
	if r := get(eventID(3)); r.browser != nil || r.device != nil {
		t.Errorf("s2s without user_agent: got %s %s, want nulls", str(r.browser), str(r.device))
	}
	if n := h.count(`SELECT COUNT(*) FROM identity_links WHERE site_id = 'web' AND user_id = 'u1'`); n != 2 {
		t.Errorf("got %d identity links, want 2 (anon-1 and anon-2)", n)
	}
	var traits string
	if err := h.sqlDB().QueryRow(`SELECT traits FROM user_profiles WHERE site_id = 'web' AND user_id = 'u1'`).Scan(&traits); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	json.Unmarshal([]byte(traits), &got)
	if got["plan"] != "pro" || got["name"] != "Al" {
		t.Errorf("got traits %s, want later identify merged over earlier", traits)
	}
}

func TestCollectorSessions(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	base := time.Date(2026, 1, 30, 10, 0, 0, 0, time.UTC)
	at := func(n int, anon string, minutes int) map[string]any {
		return ev("web", n, map[string]any{"anon_id": anon, "ts": base.Add(time.Duration(minutes) * time.Minute).Format(time.RFC3339)})
	}
	send := func(events ...any) {
		t.Helper()
		intake(t, h.c("POST", "/v1/events", "web", events, "User-Agent", chromeUA))
	}
	type sess struct {
		start, end string
		count      int
	}
	sessions := func(anon string) []sess {
		rows, err := h.sqlDB().Query(`SELECT started_at, ended_at, event_count FROM sessions WHERE anon_id = ? ORDER BY started_at`, anon)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []sess
		for rows.Next() {
			var s sess
			rows.Scan(&s.start, &s.end, &s.count)
			out = append(out, s)
		}
		return out
	}
	// a: 10:00, 10:10, then 10:50 (a 40-minute gap) -> two sessions.
	send(at(1, "a", 0), at(2, "a", 10))
	send(at(3, "a", 50))
	if got := fmt.Sprint(sessions("a")); got != "[{2026-01-30T10:00:00.000Z 2026-01-30T10:10:00.000Z 2} {2026-01-30T10:50:00.000Z 2026-01-30T10:50:00.000Z 1}]" {
		t.Fatalf("got %s", got)
	}
	// 10:30 arrives late and bridges both (gaps of 20 minutes): one session.
	send(at(4, "a", 30))
	if got := fmt.Sprint(sessions("a")); got != "[{2026-01-30T10:00:00.000Z 2026-01-30T10:50:00.000Z 4}]" {
		t.Fatalf("after the bridging event: got %s", got)
	}
	// Exactly 30 minutes is no gap "over" 30 minutes: same session.
	send(at(5, "a", 80))
	// b arrives fully out of order.
	send(at(6, "b", 100), at(7, "b", 0), at(8, "b", 45), at(9, "b", 20))
	if got := fmt.Sprint(sessions("b")); got != "[{2026-01-30T10:00:00.000Z 2026-01-30T10:45:00.000Z 3} {2026-01-30T11:40:00.000Z 2026-01-30T11:40:00.000Z 1}]" {
		t.Fatalf("out of order: got %s", got)
	}
	// A duplicate does not count twice.
	send(at(9, "b", 20))
	// The daily rollup matches the sessions table.
	var sessionsN, durMS, events, bounces int
	if err := h.sqlDB().QueryRow(`SELECT sessions, duration_ms, events, bounces FROM daily_sessions WHERE site_id = 'web' AND day = '2026-01-30'`).Scan(&sessionsN, &durMS, &events, &bounces); err != nil {
		t.Fatal(err)
	}
	want := [4]int{3, (80 + 45 + 0) * 60000, 9, 1}
	if got := [4]int{sessionsN, durMS, events, bounces}; got != want {
		t.Fatalf("got rollup %v, want %v (sessions, duration ms, events, bounces)", got, want)
	}
	var pageviews int
	h.sqlDB().QueryRow(`SELECT count FROM daily_events WHERE site_id = 'web' AND day = '2026-01-30' AND type = 'pageview'`).Scan(&pageviews)
	if pageviews != 9 {
		t.Errorf("got %d pageviews in the rollup, want 9", pageviews)
	}
}

func TestCollectorPlan(t *testing.T) {
	t.Parallel()
	plan := func(mode string) *schema.Plan {
		p, err := schema.ParsePlan([]byte(`{"mode":"` + mode + `","events":{"purchase":{"type":"object","required":["properties"],
			"properties":{"properties":{"type":"object","required":["amount"]}}},"pageview":{"type":"object"}}}`))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := ev("web", 1, map[string]any{"type": "purchase", "properties": map[string]any{"amount": 5}})
	bad := ev("web", 2, map[string]any{"type": "purchase", "properties": map[string]any{}})
	unknown := ev("web", 3, map[string]any{"type": "mystery"})
	t.Run("reject", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.Plan = plan(schema.ModeReject) })
		h.setupTenant("acme", "web")
		r := h.c("POST", "/v1/events", "web", []any{good, bad, unknown}, "User-Agent", chromeUA)
		mustStatus(t, r, 400, "schema_validation_failed")
		var env struct {
			Error struct {
				Details []struct{ Path, Message string }
			}
		}
		json.Unmarshal(r.body, &env)
		t.Logf("details %v", env.Error.Details)
		if fmt.Sprint(env.Error.Details) != "[{/1/properties/amount missing required property 'amount'} {/2/type unknown event}]" {
			t.Fatalf("got details %v", env.Error.Details)
		}
		if n := h.count(`SELECT COUNT(*) FROM events`) + h.count(`SELECT COUNT(*) FROM dlq`); n != 0 {
			t.Fatalf("got %d stored rows after a reject, want 0", n)
		}
		if got := metricValue(t, h, `service_events_dropped_total{endpoint="events",reason="schema_invalid"}`); got != "3" {
			t.Errorf("got schema_invalid drops %s, want 3 (the whole batch)", got)
		}
		if got := metricValue(t, h, `service_validation_duration_seconds_count{endpoint="events"}`); got != "3" {
			t.Errorf("got %s validations timed, want 3", got)
		}
		intake(t, h.c("POST", "/v1/events", "web", good, "User-Agent", chromeUA))
	})
	t.Run("quarantine", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.Plan = plan(schema.ModeQuarantine) })
		h.setupTenant("acme", "web")
		a := intake(t, h.c("POST", "/v1/events", "web", []any{good, bad, unknown}, "User-Agent", chromeUA))
		if a != (intakeAnswer{Accepted: 1, Quarantined: 2}) {
			t.Fatalf("got %+v, want 1 accepted 2 quarantined", a)
		}
		var payload, errs string
		if err := h.sqlDB().QueryRow(`SELECT payload, error FROM dlq WHERE id = ?`, eventID(3)).Scan(&payload, &errs); err != nil {
			t.Fatal(err)
		}
		if errs != `[{"path":"/type","message":"unknown event"}]` {
			t.Errorf("got DLQ error %s", errs)
		}
		if !strings.Contains(payload, `"mystery"`) {
			t.Errorf("got payload %s", payload)
		}
		if got := metricValue(t, h, `service_events_quarantined_total{endpoint="events"}`); got != "2" {
			t.Errorf("got quarantined metric %s, want 2", got)
		}
	})
}

func TestCollectorCORS(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	r := h.c("OPTIONS", "/v1/events", "", nil, "Origin", "https://shop.example", "Access-Control-Request-Method", "POST",
		"Access-Control-Request-Headers", "authorization, content-type")
	if r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != "*" ||
		!strings.Contains(r.header.Get("Access-Control-Allow-Headers"), "Authorization") ||
		!strings.Contains(r.header.Get("Access-Control-Allow-Methods"), "POST") {
		t.Fatalf("preflight: got %d %v", r.status, r.header)
	}
	r = h.c("POST", "/v1/events", "web", ev("web", 1, nil), "Origin", "https://shop.example", "User-Agent", chromeUA)
	if r.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("got no CORS header on the POST answer")
	}
}

// A full write queue answers 503 with Retry-After and the unavailable
// code, stores nothing of what it refused and counts it as dropped; every
// event answered 202 is stored.
func TestCollectorFullQueue(t *testing.T) {
	t.Parallel()
	h := newHarnessStorage(t, storage.Options{Path: filepath.Join(t.TempDir(), "test.db"), QueueSize: 1})
	h.setupTenant("acme", "web")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	var next, accepted, refused atomic.Int64
	send := func() {
		body, _ := json.Marshal(ev("web", int(next.Add(1)), nil))
		req, _ := http.NewRequest("POST", h.collector.URL+"/v1/events", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer web")
		req.Header.Set("User-Agent", chromeUA)
		res, err := client.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		defer res.Body.Close()
		r := response{status: res.StatusCode, header: res.Header}
		r.body, _ = io.ReadAll(res.Body)
		switch r.status {
		case 202:
			accepted.Add(int64(intake(t, r).Accepted))
		case 503:
			if r.code() != "unavailable" || r.header.Get("Retry-After") != "1" {
				t.Errorf("got 503 %q with Retry-After %q, want unavailable with 1", r.code(), r.header.Get("Retry-After"))
			}
			refused.Add(1)
		default:
			t.Errorf("got %d %s, want 202 or 503", r.status, r.body)
		}
	}
	// 32 concurrent senders against a queue of one job: some find it full.
	for deadline := time.Now().Add(30 * time.Second); refused.Load() == 0 && time.Now().Before(deadline); {
		var wg sync.WaitGroup
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 10 {
					send()
				}
			}()
		}
		wg.Wait()
	}
	if refused.Load() == 0 {
		t.Fatal("no request found the queue full in 30 s")
	}
	if n := h.count(`SELECT COUNT(*) FROM events`); n != int(accepted.Load()) {
		t.Fatalf("got %d stored events, want the %d answered 202", n, accepted.Load())
	}
	if got, want := metricValue(t, h, `service_events_dropped_total{endpoint="events",reason="internal"}`), fmt.Sprint(refused.Load()); got != want {
		t.Fatalf("got %s events dropped as internal, want %s", got, want)
	}
	t.Logf("%d accepted, %d refused", accepted.Load(), refused.Load())
}

// A client that goes away after sending still gets its events stored, and
// the metrics count them as accepted, not dropped.
func TestCollectorStoresEventsOfAGoneClient(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	for i, consent := range []string{"granted", "denied"} { // denied also creates the day's salt
		body, _ := json.Marshal(ev("web", i, map[string]any{"consent": consent}))
		ctx, cancel := context.WithCancel(t.Context())
		cancel() // as net/http does when the connection closes
		req := httptest.NewRequestWithContext(ctx, "POST", "/v1/events", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer web")
		req.Header.Set("User-Agent", chromeUA)
		rec := httptest.NewRecorder()
		h.srv.Collector().ServeHTTP(rec, req)
		if rec.Code != 202 {
			t.Fatalf("%s: got %d %s, want 202", consent, rec.Code, rec.Body)
		}
	}
	if n := h.count(`SELECT COUNT(*) FROM events`); n != 2 {
		t.Fatalf("got %d stored events, want 2", n)
	}
	if got := metricValue(t, h, `service_events_dropped_total{endpoint="events",reason="internal"}`); got != "0" {
		t.Fatalf("got %s events dropped as internal, want 0", got)
	}
}

// A site deleted after a request's credential check, but before its events
// reach the writer, gets nothing stored: the request is answered as for an
// unknown site, and a site re-created with that id starts empty.
func TestCollectorSiteDeletedMidRequest(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	// The request reads the clock right after its credential check: the
	// site goes away at that moment.
	h.clock.OnNextRead(func() {
		mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/sites/web", testAdminToken, nil), 204, "")
	})
	mustStatus(t, h.c("POST", "/v1/events", "web", ev("web", 1, nil), "User-Agent", chromeUA), 401, "unauthorized")
	if n := h.count(`SELECT COUNT(*) FROM events WHERE site_id = 'web'`); n != 0 {
		t.Fatalf("got %d stored events of the deleted site, want 0", n)
	}
	mustStatus(t, h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": "web", "name": "again"}), 201, "")
	if a := intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, nil), "User-Agent", chromeUA)); a.Accepted != 1 {
		t.Fatalf("re-created site: got %+v, want the event accepted (not a duplicate)", a)
	}
}
