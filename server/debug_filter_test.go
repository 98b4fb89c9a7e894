package server

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"testing"
)

// decisionIDs lists the event ids of the decisions GET
// /v1/debug/decisions?query answers, oldest first.
func decisionIDs(t *testing.T, h *harness, query string) []string {
	t.Helper()
	r := h.q("GET", "/v1/debug/decisions?"+query, "", nil)
	mustStatus(t, r, 200, "")
	var a decisionsAnswer
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, d := range a.Decisions {
		ids = append(ids, d.EventID)
	}
	slices.Reverse(ids)
	return ids
}

func TestDecisionPropertyFilters(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.DebugFeedSize = 100 })
	h.setupTenant("acme", "web")
	props := []map[string]any{
		{"revenue": 49, "currency": "EUR", "ok": true, "cart": map[string]any{"total": 49.5, "coupon": nil}},
		{"revenue": "49", "currency": "USD", "ok": false},
		{"revenue": json.RawMessage("49.0"), "plan": map[string]any{"name": "pro"}, "tags": []any{"a"}},
	}
	for i, p := range props {
		intake(t, h.c("POST", "/v1/events", "web", ev("web", i+1, map[string]any{"type": "purchase", "properties": p})))
	}
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 4, nil))) // no properties
	id := eventID
	tests := []struct {
		query string
		want  []string
	}{
		{"property.revenue=49", []string{id(1), id(2)}}, // a number by its JSON text, a string as is
		{"property.revenue=49.0", []string{id(3)}},
		{"property.ok=true", []string{id(1)}},
		{"property.ok=false", []string{id(2)}},
		{"property.currency=EUR", []string{id(1)}},
		{"property.currency=eur", []string{}},
		{"property.cart.total=49.5", []string{id(1)}},
		{"property.cart.coupon=null", []string{id(1)}},
		{"property.plan.name=pro", []string{id(3)}},
		{"property.plan=pro", []string{}},                              // an object matches nothing
		{"property.tags=a", []string{}},                                // nor does an array
		{"property.missing=", []string{}},                              // an absent field is not an empty one
		{"property.revenue=49&property.currency=USD", []string{id(2)}}, // filters AND together
		{"property.revenue=49&type=purchase&outcome=accepted&site_id=web", []string{id(1), id(2)}},
		{"property.revenue=49&site_id=other", []string{}},
	}
	for _, tt := range tests {
		if got := decisionIDs(t, h, tt.query); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: got %v, want %v", tt.query, got, tt.want)
		}
	}
	// The Go filter (servertest.Filter) matches as the query does.
	if got := h.srv.Decisions(DebugFilter{Properties: map[string]string{"cart.total": "49.5"}}); len(got) != 1 || got[0].EventID != id(1) {
		t.Errorf("DebugFilter.Properties: got %d decisions, want event 1", len(got))
	}
}

func TestDecisionFilterErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.DebugFeedSize = 10 })
	for _, query := range []string{
		"property.=1", "property=1", "property.a..b=1", "property.a.=1",
		"property.a=1&property.a=2", "properties.a=1", "outcome=good", "type=a&type=b", "sort=seq",
	} {
		r := h.q("GET", "/v1/debug/decisions?"+query, "", nil)
		mustStatus(t, r, 400, "invalid_filter")
		if msg, _ := r.json(t)["error"].(map[string]any)["message"].(string); msg == "" {
			t.Errorf("%s: got no message", query)
		}
	}
	// A property name may hold any character but a dot, once escaped.
	mustStatus(t, h.q("GET", "/v1/debug/decisions?"+url.Values{"property.a b/é": {"x y"}}.Encode(), "", nil), 200, "")
}
