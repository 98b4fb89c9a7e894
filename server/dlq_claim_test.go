package server

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tally-analytics/tally/internal/dbtest"
	"github.com/tally-analytics/tally/schema"
)

// Two replays of one DLQ entry at once, on two instances of one
// PostgreSQL database (on SQLite, two requests to the one instance): the
// first holds its claim while the collector answers, the other is refused
// with 409 replay_in_progress and sends nothing, and the event is stored
// once (docs/intake.md#dead-letter-queue).
func TestDLQReplayClaimedOnce(t *testing.T) {
	t.Parallel()
	// The first replay's forward waits at this gate until the test lets it
	// go; later ones pass straight to the collector.
	arrived, release := make(chan struct{}), make(chan struct{})
	var target *url.URL
	var passed atomic.Bool
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if passed.CompareAndSwap(false, true) {
			close(arrived)
			<-release
		}
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
	}))
	t.Cleanup(gate.Close)
	var let sync.Once
	letGo := func() { let.Do(func() { close(release) }) }
	// Before the gate closes (cleanups run last first): a failed check
	// must not leave the first replay waiting.
	t.Cleanup(letGo)
	a, tn, fix := quarantineHarness(t, func(c *Config) { c.CollectorURL = gate.URL })
	target, _ = url.Parse(a.collector.URL)
	if q := intake(t, a.c("POST", "/v1/events", "web", ev("web", 1, map[string]any{"type": "purchase"}), "User-Agent", chromeUA)); q.Quarantined != 1 {
		t.Fatalf("got %+v, want 1 quarantined", q)
	}
	fix()
	b := a
	if dbtest.Postgres() {
		plan, err := schema.LoadPlan(a.srv.cfg.PlanPath)
		if err != nil {
			t.Fatal(err)
		}
		b = newHarnessAt(t, a.path, func(c *Config) { c.Plan, c.PlanPath = plan, a.srv.cfg.PlanPath })
	}
	replay := "/v1/sites/web/dlq/" + eventID(1) + "/replay"
	done := make(chan response)
	go func() { done <- a.q("POST", replay, tn.adminKey, nil) }()
	<-arrived
	mustStatus(t, b.q("POST", replay, tn.adminKey, nil), 409, "replay_in_progress")
	letGo()
	mustStatus(t, <-done, 200, "")
	if n := a.count(`SELECT COUNT(*) FROM events WHERE id = ?`, eventID(1)); n != 1 {
		t.Errorf("got %d stored events, want 1", n)
	}
	if n := a.count(`SELECT COUNT(*) FROM audit_log WHERE action = 'dlq.replay'`); n != 1 {
		t.Errorf("got %d dlq.replay audit rows, want 1", n)
	}
	mustStatus(t, b.q("POST", replay, tn.adminKey, nil), 404, "not_found")
}
