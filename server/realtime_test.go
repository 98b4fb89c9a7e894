package server

import (
	"testing"
	"time"
)

// Realtime counts the distinct visitors with an event received in the last
// five minutes by the service's clock, of the site asked for only.
func TestRealtime(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	other := h.setupTenant("bravo", "shop")
	send := func(site string, n int, anon string) {
		t.Helper()
		intake(t, h.c("POST", "/v1/events", site, ev(site, n, map[string]any{"anon_id": anon}), "User-Agent", chromeUA))
	}
	visitors := func() float64 {
		t.Helper()
		r := h.q("GET", "/v1/sites/web/realtime", tn.readKey, nil)
		mustStatus(t, r, 200, "")
		return r.json(t)["visitors"].(float64)
	}
	if got := visitors(); got != 0 {
		t.Errorf("no events: got %v visitors, want 0", got)
	}
	send("web", 1, "a")
	send("web", 2, "b")
	send("shop", 3, "z")
	h.clock.Advance(3 * time.Minute)
	send("web", 4, "a")
	send("web", 5, "c")
	// An event dated long ago counts by when it was received.
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 6, map[string]any{"anon_id": "d", "ts": "2025-06-01T00:00:00Z"}), "User-Agent", chromeUA))

	steps := []struct {
		advance time.Duration
		want    float64
	}{
		{0, 4},                // a, b, c, d; not the other site's z
		{2 * time.Minute, 4},  // b's event is exactly five minutes old: still in
		{time.Millisecond, 3}, // b gone; a's later event keeps a
		{3 * time.Minute, 0},
	}
	for i, s := range steps {
		h.clock.Advance(s.advance)
		if got := visitors(); got != s.want {
			t.Errorf("step %d: got %v visitors, want %v", i, got, s.want)
		}
	}

	mustStatus(t, h.q("GET", "/v1/sites/web/realtime", other.readKey, nil), 404, "not_found")
	mustStatus(t, h.q("GET", "/v1/sites/web/realtime", tn.ingestKey, nil), 403, "forbidden")
	mustStatus(t, h.q("GET", "/v1/sites/web/realtime", "", nil), 401, "unauthorized")
	mustStatus(t, h.q("GET", "/v1/sites/nowhere/realtime", testAdminToken, nil), 404, "not_found")
}
