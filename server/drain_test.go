package server

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// After Drain, /healthz answers 503 "draining" on both listeners, with and
// without /v1, while intake and reads answer as before and what intake
// accepted is stored.
func TestDrainTurnsOnlyHealthzUnhealthy(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	if r := h.c("GET", "/v1/healthz", "", nil); r.status != 200 {
		t.Fatalf("before Drain: got %d %s, want 200", r.status, r.body)
	}
	h.srv.Drain()
	tests := []struct {
		name   string
		send   func() response
		status int
		health string // the "status" of a /healthz answer
	}{
		{"collector /v1/healthz", func() response { return h.c("GET", "/v1/healthz", "", nil) }, 503, "draining"},
		{"collector /healthz", func() response { return h.c("GET", "/healthz", "", nil) }, 503, "draining"},
		{"query /v1/healthz", func() response { return h.q("GET", "/v1/healthz", "", nil) }, 503, "draining"},
		{"query /healthz", func() response { return h.q("GET", "/healthz", "", nil) }, 503, "draining"},
		{"intake", func() response { return h.c("POST", "/v1/events", "web", ev("web", 1, nil)) }, 202, ""},
		{"read", func() response {
			return h.q("GET", "/v1/sites/web/pageviews?from=2026-01-31&to=2026-01-31", tn.readKey, nil)
		}, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.send()
			if r.status != tt.status {
				t.Fatalf("got %d %s, want %d", r.status, r.body, tt.status)
			}
			if tt.health == "" {
				return
			}
			m := r.json(t)
			if m["status"] != tt.health || m["reason"] != drainingReason {
				t.Fatalf("got %s, want status %q and reason %q", r.body, tt.health, drainingReason)
			}
		})
	}
	if n := h.count(`SELECT COUNT(*) FROM events WHERE site_id = 'web'`); n != 1 {
		t.Fatalf("got %d stored events, want 1", n)
	}
}

// BenchmarkCloseWhileDraining is what the draining check adds to every
// request on the instance's listeners: the wrapped handler against the bare
// one, which does nothing.
func BenchmarkCloseWhileDraining(b *testing.B) {
	s := &Server{}
	bare := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	req := httptest.NewRequest("GET", "/healthz", nil)
	w := httptest.NewRecorder()
	for _, bc := range []struct {
		name string
		h    http.Handler
	}{{"bare", bare}, {"wrapped", s.closeWhileDraining(bare)}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				bc.h.ServeHTTP(w, req)
			}
		})
	}
}
