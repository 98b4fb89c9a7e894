package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestInvalidUTF8 sends bytes that are not UTF-8 inside JSON strings to
// every intake route, on each backend: each answer is the wanted one (the
// same on both), every event answered accepted is stored, and what is
// stored is the text with U+FFFD for each such byte, wire text included,
// as its fields decode. A lone surrogate's escape in properties does not
// fail the property reads on PostgreSQL either, nor do such bytes in a
// read's path (docs/postgresql.md#text-with-nul-and-invalid-utf-8).
func TestInvalidUTF8(t *testing.T) {
	t.Parallel()
	h, tn, fix := quarantineHarness(t)
	mustStatus(t, h.q("PATCH", "/v1/sites/web", testAdminToken,
		map[string]any{"aliases": []string{"example.com", umamiWebsite}}), 200, "")
	if _, err := h.sqlDB().Exec(`INSERT INTO webhook_secrets(site_id, adapter, secret) VALUES ('web', 'payments', 'whsec')`); err != nil {
		t.Fatal(err)
	}
	const bad = "a\xffb\xc3" // 0xff, and a sequence cut short
	const fixed = "a\uFFFDb\uFFFD"
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("web:"))
	native := func(n int, fields string) string {
		return `{"id":"` + eventID(n) + `","site_id":"web","anon_id":"a","type":"pageview",` + fields + `}`
	}
	hook := bytes.Replace(chargeEvent("evt_utf8", map[string]any{"anon_id": "ANON", "user_id": "USER"}), []byte("ANON"), []byte(bad), 1)
	hook = bytes.Replace(hook, []byte("USER"), []byte(bad), 1)
	tests := []struct {
		name, path, token, body string
		want                    int
		headers                 []string
	}{
		{"type", "/v1/events", "web", native(1, `"type":"p`+bad+`"`), 400, nil},
		{"anon_id", "/v1/events", "web", native(2, `"anon_id":"`+bad+`"`), 202, nil},
		{"url", "/v1/events", "web", native(3, `"url":"https://example.test/`+bad+`"`), 202, nil},
		{"property", "/v1/events", "web", native(4, `"properties":{"plan":"`+bad+`","`+bad+`":1}`), 202, nil},
		{"lone surrogates", "/v1/events", "web", native(5, `"properties":{"plan":"\udc00","\ud800":"x\ud83d\ude00"}`), 202, nil},
		{"trait", "/v1/events", "web", native(6, `"type":"identify","user_id":"u","traits":{"email":"`+bad+`"}`), 202, nil},
		{"field of its own", "/v1/events", "web", native(7, `"extra":"`+bad+`"`), 202, nil},
		{"quarantined", "/v1/events", "web", native(8, `"type":"purchase","anon_id":"`+bad+`"`), 202, nil},
		{"batch", "/v1/events", "web", `[` + native(9, `"user_id":"`+bad+`"`) + `,` + native(10, `"referrer":"https://r.test/`+bad+`"`) + `]`, 202, nil},
		{"s2s", "/v1/s2s/events", "web", native(11, `"anon_id":"`+bad+`","user_agent":"`+bad+`","properties":{"plan":"`+bad+`"}`), 202, nil},
		{"segment track", "/v1/track", "", `{"anonymousId":"` + bad + `","event":"E` + bad + `","properties":{"plan":"` + bad + `"}}`, 200, []string{"Authorization", basic}},
		{"segment identify", "/v1/identify", "", `{"userId":"` + bad + `","traits":{"email":"` + bad + `"}}`, 200, []string{"Authorization", basic}},
		{"segment page", "/v1/page", "", `{"anonymousId":"a","properties":{"url":"https://x.test/` + bad + `","referrer":"` + bad + `"}}`, 200, []string{"Authorization", basic}},
		{"segment batch", "/v1/batch", "", `{"batch":[{"type":"track","anonymousId":"a","event":"ok"},{"type":"track","anonymousId":"a","event":"` + bad + `"},{"type":"alias","previousId":"` + bad + `","userId":"u"}]}`, 200, []string{"Authorization", basic}},
		{"plausible", "/api/event", "", `{"n":"signup` + bad + `","u":"https://example.com/` + bad + `","d":"example.com","r":"` + bad + `","p":{"plan":"` + bad + `"}}`, 202, []string{"Content-Type", "text/plain"}},
		{"umami", "/api/send", "", `{"type":"event","payload":{"website":"` + umamiWebsite + `","url":"/` + bad + `","referrer":"` + bad + `","name":"n` + bad + `","title":"` + bad + `","data":{"plan":"` + bad + `"}}}`, 200, nil},
	}
	accepted := 0
	for _, tt := range tests {
		h.clock.Advance(time.Second)
		r := h.c("POST", tt.path, tt.token, []byte(tt.body), append([]string{"User-Agent", chromeUA}, tt.headers...)...)
		if r.status != tt.want {
			t.Errorf("%s: got %d %s, want %d", tt.name, r.status, r.body, tt.want)
		}
		var a struct{ Accepted, Rejected int }
		if json.Unmarshal(r.body, &a) == nil {
			accepted += a.Accepted
			if a.Rejected != 0 {
				t.Errorf("%s: got %d messages rejected, want none: %s", tt.name, a.Rejected, r.body)
			}
		} else if r.status < 300 {
			accepted++ // Plausible's "ok", Umami's cache token
		}
	}
	h.clock.Advance(time.Second)
	r := h.hook("/v1/webhooks/payments/web", hook, signed(hook, "whsec", h.clock.Now()))
	mustStatus(t, r, 200, "")
	accepted++

	events := h.events("web")
	if len(events) != accepted {
		t.Errorf("got %d events stored, want the %d answered accepted", len(events), accepted)
	}
	for _, e := range events {
		if !utf8.ValidString(e.Raw.String) || strings.Contains(e.Raw.String, "\xff") {
			t.Errorf("event %s: got raw %q, want valid UTF-8", e.Type, e.Raw.String)
		}
	}
	if n := h.count(`SELECT COUNT(*) FROM events WHERE anon_id = ?`, fixed); n != 6 {
		t.Errorf("got %d events with anon_id %q, want 6 (native, s2s, Segment's track, identify and alias, webhook)", n, fixed)
	}

	// Reads: the property breakdown and filter over the stored values, the
	// lone surrogates included, and paths with such bytes.
	breakdown := h.q("POST", "/v1/sites/web/query", tn.readKey, map[string]any{"metrics": []string{"events"}, "date_range": "all", "dimensions": []string{"event:props:plan"}})
	mustStatus(t, breakdown, 200, "")
	if !strings.Contains(string(breakdown.body), `"`+fixed+`"`) || !strings.Contains(string(breakdown.body), "\"\uFFFD\"") {
		t.Errorf("breakdown by plan: got %q, want %q and U+FFFD among the values", breakdown.body, fixed)
	}
	filtered := h.q("POST", "/v1/sites/web/query", tn.readKey, map[string]any{"metrics": []string{"events"}, "date_range": "all",
		"filters": []any{[]any{"is", "event:props:plan", []string{"\uFFFD"}}}})
	mustStatus(t, filtered, 200, "")
	for _, p := range []string{"/v1/sites/web/users/%FF/timeline", "/v1/sites/web/dlq/%FF%00/replay"} {
		method := map[bool]string{true: "POST", false: "GET"}[strings.HasSuffix(p, "replay")]
		if r := h.q(method, p, tn.adminKey, nil); r.status != 404 {
			t.Errorf("%s %s: got %d %s, want 404", method, p, r.status, r.body)
		}
	}
	// The quarantined event replays whole once the plan takes it.
	fix()
	mustStatus(t, h.q("POST", "/v1/sites/web/dlq/"+eventID(8)+"/replay", tn.adminKey, nil), 200, "")
	if n := h.count(`SELECT COUNT(*) FROM events WHERE id_text = ? OR id = ?`, eventID(8), eventID(8)); n != 1 {
		t.Errorf("after the replay: got %d events of the quarantined id, want 1", n)
	}
}
