package server

import (
	"bytes"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tally-analytics/tally/privacy"
)

const firefoxUA = "Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0"

// A consent-denied visitor is one visitor a day however many page loads
// (each with its own anon id) it makes: the cookieless id is made of site,
// client address and User-Agent (docs/intake.md#gates-in-order, gate 5), and
// neither the address nor anything of it is stored or logged.
func TestCookielessVisitorByAddress(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	loc, err := privacy.NewLocator("", true)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *Config) { c.Locator = loc; c.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	h.setupTenant("acme", "web")
	const addr1, addr2 = "203.0.113.71", "198.51.100.72"
	stored := func(n int) string {
		t.Helper()
		var anon string
		if err := h.sqlDB().QueryRow(`SELECT anon_id FROM events WHERE id = ?`, eventID(n)).Scan(&anon); err != nil {
			t.Fatalf("event %d: %v", n, err)
		}
		return anon
	}
	pageLoad := func(n int, addr, ua string) string {
		t.Helper()
		e := ev("web", n, map[string]any{"consent": "denied", "anon_id": "page-load-" + eventID(n)})
		intake(t, h.c("POST", "/v1/events", "web", e, "User-Agent", ua, "X-Forwarded-For", addr+", 10.9.8.7"))
		return stored(n)
	}

	first := pageLoad(1, addr1, chromeUA)
	h.clock.Advance(2 * time.Minute)
	if got := pageLoad(2, addr1, chromeUA); got != first {
		t.Errorf("second page load of one browser: got anon id %s, want %s", got, first)
	}
	if n := h.count(`SELECT COUNT(*) FROM sessions WHERE site_id = 'web' AND anon_id = ? AND event_count = 2`, first); n != 1 {
		t.Errorf("got %d sessions of two events for the two page loads, want 1", n)
	}
	tests := []struct {
		name string
		n    int
		addr string
		ua   string
	}{
		{"another User-Agent", 3, addr1, firefoxUA},
		{"another address", 4, addr2, chromeUA},
	}
	for _, tt := range tests {
		if got := pageLoad(tt.n, tt.addr, tt.ua); got == first || !privacy.IsCookielessID(got) {
			t.Errorf("%s: got anon id %s, want another cookieless id than %s", tt.name, got, first)
		}
	}
	h.clock.Advance(24 * time.Hour)
	if got := pageLoad(5, addr1, chromeUA); got == first {
		t.Errorf("next UTC day: got the same anon id %s, want another", got)
	}
	if n := h.count(`SELECT COUNT(DISTINCT anon_id) FROM events WHERE site_id = 'web'`); n != 4 {
		t.Errorf("got %d visitors, want 4 (one browser twice, another browser, another address, the next day)", n)
	}

	// Neither address is anywhere in the database file, its WAL or the logs,
	// as text or as the 4 bytes of the address.
	for _, a := range []string{addr1, addr2} {
		bin := netip.MustParseAddr(a).As4()
		for _, path := range []string{h.path, h.path + "-wal"} {
			b, err := os.ReadFile(path)
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			if bytes.Contains(b, []byte(a)) || bytes.Contains(b, bin[:]) {
				t.Errorf("%s holds the client address %s", path, a)
			}
		}
		if strings.Contains(logs.String(), a) {
			t.Errorf("logs hold the client address %s:\n%s", a, logs.String())
		}
	}
}

// Where the collector knows no address of the visitor, the cookieless id
// stays the sender's anon id under the day's salt: /s2s/events (its address
// is the sending server's) and Segment messages with neither context.ip
// nor context.userAgent (a server SDK's). A Segment message with
// context.ip, or sent by the browser SDK (context.userAgent, the request's
// address), is told apart by address and User-Agent.
func TestCookielessVisitorWithoutAddress(t *testing.T) {
	t.Parallel()
	loc, err := privacy.NewLocator("", true)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *Config) { c.Locator = loc })
	h.setupTenant("acme", "web")
	segment := func(anon, ctx string) string {
		return `{"type":"page","anonymousId":"` + anon + `","context":{` + ctx + `"consent":{"categoryPreferences":{"Analytics":false}}}}`
	}
	const xff = "X-Forwarded-For"
	tests := []struct {
		name     string
		send     func(n int, anon string)
		wantSame bool
	}{
		{"s2s: the anon id, not the sending server's address", func(n int, anon string) {
			intake(t, h.c("POST", "/v1/s2s/events", "web", ev("web", n, map[string]any{"consent": "denied", "anon_id": anon, "user_agent": chromeUA}), xff, "203.0.113.9"))
		}, false},
		{"segment with context.ip", func(n int, anon string) {
			segmentOKAnswer(t, h.segmentPost("/v1/batch", "web", `{"batch":[`+segment(anon, `"ip":"203.0.113.10","userAgent":"`+chromeUA+`",`)+`]}`, xff, "198.51.100.1"))
		}, true},
		{"segment browser SDK: the request's address", func(n int, anon string) {
			segmentOKAnswer(t, h.segmentPost("/v1/batch", "web", `{"batch":[`+segment(anon, `"userAgent":"`+chromeUA+`",`)+`]}`, xff, "203.0.113.11"))
		}, true},
		{"segment server SDK, no visitor details: the anon id", func(n int, anon string) {
			segmentOKAnswer(t, h.segmentPost("/v1/batch", "web", `{"batch":[`+segment(anon, ``)+`]}`, xff, "203.0.113.12"))
		}, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(h.events(""))
			tt.send(100+2*i, "visitor-a")
			tt.send(101+2*i, "visitor-b")
			var ids []string
			for _, e := range h.events("")[before:] {
				ids = append(ids, e.AnonID)
			}
			if len(ids) != 2 || !privacy.IsCookielessID(ids[0]) || !privacy.IsCookielessID(ids[1]) {
				t.Fatalf("got anon ids %v, want two cookieless ids", ids)
			}
			if same := ids[0] == ids[1]; same != tt.wantSame {
				t.Errorf("two anon ids sent: got ids %v (same %v), want same %v", ids, same, tt.wantSame)
			}
		})
	}
	// The same s2s anon id on one day is one visitor.
	before := h.count(`SELECT COUNT(DISTINCT anon_id) FROM events`)
	intake(t, h.c("POST", "/v1/s2s/events", "web", ev("web", 200, map[string]any{"consent": "denied", "anon_id": "visitor-a"})))
	if n := h.count(`SELECT COUNT(DISTINCT anon_id) FROM events`); n != before {
		t.Errorf("s2s, the same anon id again: got %d visitors, want %d", n, before)
	}
}
