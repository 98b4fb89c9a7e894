package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tally-analytics/tally/schema"
)

func TestPlanReload(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "plan.json")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"events":{"pageview":{"type":"object"}}}`)
	plan, err := schema.LoadPlan(path)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *Config) { c.Plan, c.PlanPath = plan, path })
	tn := h.setupTenant("acme", "web")
	click := func(n int) response {
		return h.c("POST", "/v1/events", "web", ev("web", n, map[string]any{"type": "click"}), "User-Agent", chromeUA)
	}
	mustStatus(t, click(1), 400, "schema_validation_failed")

	write(`{"events":{"pageview":{"type":"object"},"*":{"type":"object"}}}`)
	mustStatus(t, h.q("POST", "/v1/plan/reload", tn.adminKey, nil), 403, "forbidden")
	mustStatus(t, h.q("POST", "/plan/reload", testAdminToken, nil), 404, "not_found") // new endpoints exist only under /v1
	r := h.q("POST", "/v1/plan/reload", testAdminToken, nil)
	mustStatus(t, r, 200, "")
	if got := r.json(t); got["mode"] != "reject" || len(got["events"].([]any)) != 2 {
		t.Fatalf("got %v", got)
	}
	intake(t, click(2))

	write(`{"events":{"pageview":{"type":"objekt"}}}`)
	r = h.q("POST", "/v1/plan/reload", testAdminToken, nil)
	mustStatus(t, r, 400, "invalid_plan")
	if msg := r.json(t)["error"].(map[string]any)["message"].(string); msg == "" || !strings.Contains(msg, `event "pageview"`) {
		t.Errorf("got message %q, want it to name the broken event", msg)
	}
	intake(t, click(3)) // the previous plan (with its wildcard) stays active

	h2 := newHarness(t)
	mustStatus(t, h2.q("POST", "/v1/plan/reload", testAdminToken, nil), 409, "plan_not_configured")
}

func TestDebugEndpointsOnlyInDevMode(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	mustStatus(t, h.q("GET", "/v1/debug/decisions", testAdminToken, nil), 404, "not_found")
	mustStatus(t, h.q("POST", "/v1/debug/reset", testAdminToken, nil), 404, "not_found")
	if h.srv.Decisions(DebugFilter{}) != nil {
		t.Fatal("the feed records outside dev mode")
	}
	dev := newHarness(t, func(c *Config) { c.DebugFeedSize = 3 })
	dev.setupTenant("acme", "web")
	for i := range 5 {
		intake(t, dev.c("POST", "/v1/events", "web", ev("web", i, nil), "User-Agent", chromeUA))
	}
	r := dev.q("GET", "/v1/debug/decisions", "", nil)
	mustStatus(t, r, 200, "")
	if got := len(r.json(t)["decisions"].([]any)); got != 3 {
		t.Fatalf("got %d decisions, want the newest 3", got)
	}
	mustStatus(t, dev.q("GET", "/v1/debug/decisions?limit=4", "", nil), 400, "invalid_limit")
}
