package server

import (
	"fmt"
	"testing"
)

// TestGoalAnswersFollowTheirData: over a closed range, whose answers the
// service keeps (docs/query-api.md#how-reports-stay-fast), the goal
// breakdown and the funnel change at once when a goal is created or
// deleted, when a late event lands on a closed day, and when a subject is
// erased; reading the same view again gives the same answer.
func TestGoalAnswersFollowTheirData(t *testing.T) {
	t.Parallel()
	h, tn := newGoalHarness(t, false)
	closed := list("2026-01-01", "2026-01-30") // the clock is at Jan 31, 09:05
	byGoal := q(list("visitors", "events", "conversion_rate"), list("event:goal"))
	byGoal["date_range"] = closed
	funnel := map[string]any{"steps": list("Visit pricing", "Signup", "Pro purchase"), "date_range": closed}
	goalID := func(name string) int {
		r := h.q("GET", "/v1/sites/web/goals", tn.readKey, nil)
		mustStatus(t, r, 200, "")
		for _, g := range r.json(t)["goals"].([]any) {
			if g := g.(map[string]any); g["name"] == name {
				return int(g["id"].(float64))
			}
		}
		t.Fatalf("no goal %q", name)
		return 0
	}
	for i, c := range []struct {
		name       string
		change     func()
		goals, fun string
	}{
		{"before", func() {},
			"Purchase: 5 5 83.33; Visit pricing: 5 5 83.33; Pro purchase: 4 4 66.67; Signup: 4 4 66.67; Blog: 1 1 16.67; Docs: 1 1 16.67",
			"Visit pricing 5 100 0; Signup 3 60 2; Pro purchase 1 20 2"},
		{"a goal created", func() {
			mustStatus(t, h.q("POST", "/v1/sites/web/goals", tn.adminKey, map[string]any{"name": "Any docs", "page_path": "/docs/**"}), 201, "")
		},
			"Purchase: 5 5 83.33; Visit pricing: 5 5 83.33; Pro purchase: 4 4 66.67; Signup: 4 4 66.67; Any docs: 1 2 16.67; Blog: 1 1 16.67; Docs: 1 1 16.67",
			"Visit pricing 5 100 0; Signup 3 60 2; Pro purchase 1 20 2"},
		{"a goal deleted", func() {
			mustStatus(t, h.q("DELETE", fmt.Sprintf("/v1/sites/web/goals/%d", goalID("Blog")), tn.adminKey, nil), 204, "")
		},
			"Purchase: 5 5 83.33; Visit pricing: 5 5 83.33; Pro purchase: 4 4 66.67; Signup: 4 4 66.67; Any docs: 1 2 16.67; Docs: 1 1 16.67",
			"Visit pricing 5 100 0; Signup 3 60 2; Pro purchase 1 20 2"},
		// v3 (pricing, then a pro purchase on Jan 14) signs up in between,
		// late: it now completes the funnel.
		{"a late event", func() {
			h.sendQ("web", 100, qev{anon: "v3", typ: "signup", url: "https://shop.test/signup", ts: utc(1, 14, 10, 0).Add(30e9), country: "FR"})
		},
			"Purchase: 5 5 83.33; Signup: 5 5 83.33; Visit pricing: 5 5 83.33; Pro purchase: 4 4 66.67; Any docs: 1 2 16.67; Docs: 1 1 16.67",
			"Visit pricing 5 100 0; Signup 4 80 1; Pro purchase 2 40 2"},
		{"an erasure", func() {
			mustStatus(t, h.q("POST", "/v1/sites/web/gdpr/delete", tn.adminKey, map[string]any{"subject": map[string]any{"anon_id": "v3"}},
				"Content-Type", "application/json"), 200, "")
		},
			"Purchase: 4 4 80; Signup: 4 4 80; Visit pricing: 4 4 80; Pro purchase: 3 3 60; Any docs: 1 2 20; Docs: 1 1 20",
			"Visit pricing 4 100 0; Signup 3 75 1; Pro purchase 1 25 2"},
	} {
		c.change()
		for again := range 2 {
			if got := queryRows(t, h, tn.readKey, "web", byGoal); got != c.goals {
				t.Errorf("%d %s (view %d): got goals %s, want %s", i, c.name, again+1, got, c.goals)
			}
			if got, _ := funnelRows(t, h, tn.readKey, funnel); got != c.fun {
				t.Errorf("%d %s (view %d): got funnel %s, want %s", i, c.name, again+1, got, c.fun)
			}
		}
	}
}
