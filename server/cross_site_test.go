package server

import (
	"strings"
	"testing"
)

// The dev reset takes no credential, so it must refuse what a web page of
// another origin can send: forms (urlencoded, multipart, text/plain) and
// requests carrying a foreign Origin or Sec-Fetch-Site: cross-site.
func TestDebugResetRefusesCrossSiteRequests(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.DebugFeedSize = 100 })
	h.setupTenant("acme", "web")
	n := 0
	send := func() {
		n++
		intake(t, h.c("POST", "/v1/events", "web", ev("web", n, nil), "User-Agent", chromeUA))
	}
	send()
	refused := []struct {
		name    string
		body    any
		headers []string
		status  int
		code    string
	}{
		{"no content type (the old curl)", nil, nil, 415, "unsupported_media_type"},
		{"urlencoded form", "a=b", []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"},
		{"text/plain form", `{"a":1}`, []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type"},
		{"multipart form", "--x--\r\n", []string{"Content-Type", "multipart/form-data; boundary=x"}, 415, "unsupported_media_type"},
		{"form with a foreign Origin", "a=b", []string{"Content-Type", "application/x-www-form-urlencoded", "Origin", "https://evil.example"}, 403, "forbidden"},
		{"JSON with a foreign Origin", "{}", []string{"Origin", "https://evil.example"}, 403, "forbidden"},
		{"JSON from a cross-site fetch", "{}", []string{"Sec-Fetch-Site", "cross-site"}, 403, "forbidden"},
		{"JSON from a same-site fetch", "{}", []string{"Sec-Fetch-Site", "same-site"}, 403, "forbidden"},
		{"JSON with an opaque Origin", "{}", []string{"Origin", "null"}, 403, "forbidden"},
		{"JSON that is not an object", "[1]", nil, 400, "invalid_json"},
		{"JSON that does not parse", "{", nil, 400, "invalid_json"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			r := h.q("POST", "/v1/debug/reset", "", tt.body, tt.headers...)
			mustStatus(t, r, tt.status, tt.code)
			if msg, _ := r.json(t)["error"].(map[string]any)["message"].(string); msg == "" {
				t.Errorf("got no message, want one saying what to send")
			}
			if got := h.count(`SELECT COUNT(*) FROM events`); got != 1 {
				t.Fatalf("got %d events after a refused reset, want 1", got)
			}
			if got := len(h.srv.Decisions(DebugFilter{})); got != 1 {
				t.Fatalf("got %d decisions after a refused reset, want 1", got)
			}
		})
	}
	accepted := []struct {
		name    string
		body    any
		headers []string
	}{
		{"JSON content type, no body", nil, []string{"Content-Type", "application/json"}},
		{"empty JSON object", "{}", nil},
		{"JSON with a charset", "{}", []string{"Content-Type", "application/json; charset=utf-8"}},
		{"same-origin page", "{}", []string{"Origin", h.query.URL, "Sec-Fetch-Site", "same-origin"}},
	}
	for _, tt := range accepted {
		t.Run(tt.name, func(t *testing.T) {
			r := h.q("POST", "/v1/debug/reset", "", tt.body, tt.headers...)
			mustStatus(t, r, 200, "")
			if ok, _ := r.json(t)["ok"].(bool); !ok {
				t.Fatalf("got %s, want ok true", r.body)
			}
			if got := h.count(`SELECT COUNT(*) FROM events`); got != 0 {
				t.Fatalf("got %d events after the reset, want 0", got)
			}
			send()
		})
	}
}

// The refusal says how to call the reset the right way.
func TestDebugResetMessageShowsTheWay(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.DebugFeedSize = 10 })
	r := h.q("POST", "/v1/debug/reset", "", nil)
	mustStatus(t, r, 415, "unsupported_media_type")
	if !strings.Contains(string(r.body), "Content-Type: application/json") {
		t.Fatalf("got %s, want the message to name Content-Type: application/json", r.body)
	}
}

// The dev endpoints serve only requests addressed to a loopback host, so a
// page whose name was rebound to 127.0.0.1 (same-origin to the browser)
// can neither read the feed nor wipe the data; DEV_ALLOW_REMOTE lifts it.
func TestDebugEndpointsRefuseForeignHosts(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		host    string
		anyHost bool
		want    int
	}{
		{"evil.example", false, 403},
		{"evil.example:8081", false, 403},
		{"127.0.0.1.nip.io", false, 403},
		{"localhost:8081", false, 200},
		{"127.0.0.2", false, 200},
		{"[::1]:8081", false, 200},
		{"evil.example", true, 200},
	} {
		t.Run(tt.host, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.DebugFeedSize = 10; c.DebugAnyHost = tt.anyHost })
			h.setupTenant("acme", "web")
			intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, nil), "User-Agent", chromeUA))
			for _, r := range []response{
				h.q("GET", "/v1/debug/decisions", "", nil, "Host", tt.host),
				h.q("POST", "/v1/debug/reset", "", "{}", "Host", tt.host, "Origin", "http://"+tt.host),
			} {
				if r.status != tt.want {
					t.Fatalf("got %d %s, want %d", r.status, r.body, tt.want)
				}
			}
			wantEvents := 0
			if tt.want == 403 {
				wantEvents = 1
			}
			if got := h.count(`SELECT COUNT(*) FROM events`); got != wantEvents {
				t.Fatalf("got %d events, want %d", got, wantEvents)
			}
		})
	}
}
