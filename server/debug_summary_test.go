package server

import (
	"encoding/json"
	"testing"

	"github.com/tally-analytics/tally/privacy"
	"github.com/tally-analytics/tally/schema"
)

// summaryOf reads GET /v1/debug/summary with query.
func summaryOf(t *testing.T, h *harness, query string) debugSummary {
	t.Helper()
	r := h.q("GET", "/v1/debug/summary"+query, "", nil)
	mustStatus(t, r, 200, "")
	var s debugSummary
	if err := json.Unmarshal(r.body, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// The summary counts each decision as the feed records it, one per event
// or one per request refused before its events were read, by site and in
// all, beyond what the feed's ring still holds.
func TestDebugSummaryCountsDecisions(t *testing.T) {
	t.Parallel()
	plan, err := schema.ParsePlan([]byte(`{"mode":"quarantine","events":{"purchase":{"type":"object","required":["properties"]},"*":{"type":"object"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *Config) { c.DebugFeedSize, c.Plan, c.BotFilter = 3, plan, privacy.BotFilterOn })
	h.setupTenant("acme", "web")
	h.setupTenant("other", "shop")
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, nil)))
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, nil)))                           // duplicate
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 2, nil), "User-Agent", headlessUA)) // dropped (bot)
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 3, map[string]any{"type": "purchase"})))
	mustStatus(t, h.c("POST", "/v1/events", "web", []any{ev("web", 4, nil), map[string]any{"id": "nope"}}), 400, "invalid_event")
	mustStatus(t, h.c("POST", "/v1/events", "nosuchsite", ev("nosuchsite", 5, nil)), 401, "unauthorized")
	intake(t, h.c("POST", "/v1/events", "shop", []any{ev("shop", 6, nil), ev("shop", 7, nil)}))

	tests := []struct {
		query string
		want  debugSummary
	}{
		// The refused batch is one decision; the unknown site's request
		// counts in the total only.
		{"", debugSummary{Total: 8, Accepted: 3, Duplicates: 1, Quarantined: 1, Dropped: 1, Rejected: 2}},
		{"?site_id=web", debugSummary{Total: 5, Accepted: 1, Duplicates: 1, Quarantined: 1, Dropped: 1, Rejected: 1}},
		{"?site_id=shop", debugSummary{Total: 2, Accepted: 2}},
		{"?site_id=unknown", debugSummary{}},
	}
	for _, tt := range tests {
		if got := summaryOf(t, h, tt.query); got != tt.want {
			t.Errorf("summary%s: got %+v, want %+v", tt.query, got, tt.want)
		}
	}
	if got := len(h.srv.Decisions(DebugFilter{})); got != 3 {
		t.Errorf("got %d decisions in the feed, want its size, 3", got)
	}

	mustStatus(t, h.q("GET", "/v1/debug/summary?site=web", "", nil), 400, "invalid_filter")
	mustStatus(t, h.q("GET", "/v1/debug/summary?min=2", "", nil), 400, "invalid_wait")

	mustStatus(t, h.q("POST", "/v1/debug/reset", "", "{}"), 200, "")
	if got := summaryOf(t, h, ""); got != (debugSummary{}) {
		t.Errorf("after a reset: got %+v, want zeros", got)
	}
}
