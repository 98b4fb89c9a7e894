package server

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/tally-analytics/tally/storage"
)

// The property names are those of the site's own recent events, sorted,
// each once; another site's names and events without properties add none;
// the default is the first.
func TestPropertyNames(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	other := h.setupTenant("bravo", "shop")
	names := func() []any {
		t.Helper()
		r := h.q("GET", "/v1/sites/web/properties", tn.readKey, nil)
		mustStatus(t, r, 200, "")
		got, _ := r.json(t)["properties"].([]any)
		return got
	}
	if got := names(); len(got) != 0 {
		t.Errorf("no events: got %v, want []", got)
	}
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, map[string]any{"type": "signup", "properties": map[string]any{"plan": "pro", "amount": 3}})))
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 2, map[string]any{"type": "signup", "properties": map[string]any{"plan": "free"}})))
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 3, nil)))
	intake(t, h.c("POST", "/v1/events", "shop", ev("shop", 4, map[string]any{"type": "buy", "properties": map[string]any{"secret_shop_prop": 1}})))
	if got, want := names(), []any{"amount", "plan"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	// The dashboard's default, the name the warm-up keeps: the first.
	r := h.q("GET", "/v1/sites/web/properties", tn.readKey, nil)
	if got := r.json(t)["default"]; got != "amount" {
		t.Errorf("default: got %v, want amount", got)
	}

	mustStatus(t, h.q("GET", "/v1/sites/web/properties", other.readKey, nil), 404, "not_found")
	mustStatus(t, h.q("GET", "/v1/sites/web/properties", tn.ingestKey, nil), 403, "forbidden")
	mustStatus(t, h.q("GET", "/v1/sites/web/properties", "", nil), 401, "unauthorized")
}

// Only the service's newest rows are read, and at most PropertyNamesMax
// names are answered.
func TestPropertyNamesBounds(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, map[string]any{"type": "old", "properties": map[string]any{"old_name": 1}})))
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 2, map[string]any{"type": "new", "properties": map[string]any{"new_name": 1}})))
	got, err := h.db.PropertyNames(t.Context(), "web", 1)
	if err != nil || !reflect.DeepEqual(got, []string{"new_name"}) {
		t.Errorf("newest row only: got %v %v, want [new_name]", got, err)
	}
	props := map[string]any{}
	for i := range storage.PropertyNamesMax + 20 {
		props[fmt.Sprintf("p%03d", i)] = i
	}
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 3, map[string]any{"type": "wide", "properties": props})))
	got, err = h.db.PropertyNames(t.Context(), "web", 10)
	if err != nil || len(got) != storage.PropertyNamesMax {
		t.Errorf("got %d names (%v), want %d", len(got), err, storage.PropertyNamesMax)
	}
}

// GET /v1/sites/:siteId answers the site's settings, its time zone among
// them, to a query:read key; a foreign tenant gets the ordinary 404.
func TestGetSite(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	other := h.setupTenant("bravo", "shop")
	mustStatus(t, h.q("PATCH", "/v1/sites/web", testAdminToken, map[string]any{"time_zone": "Europe/Berlin"}), 200, "")
	r := h.q("GET", "/v1/sites/web", tn.readKey, nil)
	mustStatus(t, r, 200, "")
	if got := r.json(t)["time_zone"]; got != "Europe/Berlin" {
		t.Errorf("got time_zone %v, want Europe/Berlin", got)
	}
	mustStatus(t, h.q("GET", "/v1/sites/web", other.readKey, nil), 404, "not_found")
	mustStatus(t, h.q("GET", "/v1/sites/web", tn.ingestKey, nil), 403, "forbidden")
	mustStatus(t, h.q("GET", "/v1/sites/nowhere", testAdminToken, nil), 404, "not_found")
}
