package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/tally-analytics/tally/privacy"
	"github.com/tally-analytics/tally/schema"
)

func chargeEvent(id string, meta map[string]any) []byte {
	obj := map[string]any{"id": "ch_1", "object": "charge", "amount": 2500, "currency": "eur", "customer": "cus_42"}
	if meta != nil {
		obj["metadata"] = meta
	}
	b, _ := json.Marshal(map[string]any{"id": id, "type": "charge.succeeded", "created": 1769850000, "data": map[string]any{"object": obj}})
	return b
}

// signed returns body and a Payments-Signature header made by stripe-go.
func signed(body []byte, secret string, at time.Time) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at}).Header
}

func (h *harness) hook(path string, body []byte, header string) response {
	h.t.Helper()
	return h.request("POST", h.query.URL+path, "", body, "Payments-Signature", header)
}

func TestPaymentsWebhook(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	op := h.sqlDB()
	now := h.clock.Now()
	const path = "/v1/webhooks/payments/web"
	body := chargeEvent("evt_1", map[string]any{"anon_id": "visitor-9", "user_id": "u9"})

	mustStatus(t, h.hook(path, body, signed(body, "whsec_old", now)), 401, "unauthorized") // no secret yet
	unknownSite := h.hook("/v1/webhooks/payments/nope", body, signed(body, "whsec_old", now))
	noSecret := h.hook(path, body, signed(body, "whsec_old", now))
	if unknownSite.status != 401 || string(unknownSite.body) != string(noSecret.body) {
		t.Fatalf("unknown site: got %d %s, want the same 401 as a site without a secret", unknownSite.status, unknownSite.body)
	}
	mustStatus(t, h.hook("/v1/webhooks/paypal/web", body, signed(body, "whsec_old", now)), 404, "not_found")

	// An operator inserts the secret with plain SQL; it takes effect on the next request.
	if _, err := op.Exec(`INSERT INTO webhook_secrets(site_id, adapter, secret) VALUES ('web', 'payments', 'whsec_old')`); err != nil {
		t.Fatal(err)
	}
	r := h.hook(path, body, signed(body, "whsec_old", now))
	mustStatus(t, r, 200, "")
	if got := r.json(t); got["ok"] != true || got["forwarded"] != float64(1) {
		t.Fatalf("got %v", got)
	}
	stored := h.events("")
	if len(stored) != 1 {
		t.Fatalf("got %d stored events, want 1", len(stored))
	}
	typ, anon, user, raw := stored[0].Type, stored[0].AnonID, stored[0].UserID.String, stored[0].Raw.String
	var ev map[string]any
	json.Unmarshal([]byte(raw), &ev)
	props := ev["properties"].(map[string]any)
	if typ != "purchase" || anon != "visitor-9" || user != "u9" || props["amount"] != float64(2500) || props["currency"] != "eur" || ev["ts"] != "2026-01-31T09:00:00Z" {
		t.Fatalf("got %s %s %s %s", typ, anon, user, raw)
	}
	// Redelivery (a new signature, the same processor event): stored once.
	h.clock.Advance(time.Minute)
	mustStatus(t, h.hook(path, body, signed(body, "whsec_old", h.clock.Now())), 200, "")
	if n := h.count(`SELECT COUNT(*) FROM events`); n != 1 {
		t.Fatalf("got %d events after redelivery, want 1", n)
	}
	// Without metadata the customer id is the anon id.
	sub, _ := json.Marshal(map[string]any{"id": "evt_2", "type": "customer.subscription.created", "data": map[string]any{"object": map[string]any{
		"id": "sub_1", "customer": "cus_42", "status": "active", "items": map[string]any{"data": []any{map[string]any{"price": map[string]any{"unit_amount": 900, "currency": "usd"}}}}}}})
	mustStatus(t, h.hook(path, sub, signed(sub, "whsec_old", h.clock.Now())), 200, "")
	anon, raw = "", ""
	for _, e := range h.events("") {
		if e.Type == "subscription_created" {
			anon, raw = e.AnonID, e.Raw.String
		}
	}
	if anon != "cus_42" {
		t.Fatalf("got anon_id %q raw %s, want cus_42", anon, raw)
	}
	// Unmapped types are acknowledged with zero forwards.
	other := []byte(`{"id":"evt_3","type":"invoice.created","data":{"object":{"id":"in_1"}}}`)
	if got := h.hook(path, other, signed(other, "whsec_old", h.clock.Now())).json(t); got["forwarded"] != float64(0) || got["ok"] != true {
		t.Fatalf("unmapped: got %v", got)
	}

	now = h.clock.Now()
	tests := []struct {
		name   string
		body   []byte
		header string
		status int
		code   string
	}{
		{"expired", body, signed(body, "whsec_old", now.Add(-6*time.Minute)), 400, "invalid_signature"},
		{"from the future", body, signed(body, "whsec_old", now.Add(6*time.Minute)), 400, "invalid_signature"},
		{"within tolerance", body, signed(body, "whsec_old", now.Add(-4*time.Minute)), 200, ""},
		{"wrong secret", body, signed(body, "whsec_wrong", now), 400, "invalid_signature"},
		{"tampered body", chargeEvent("evt_9", nil), signed(body, "whsec_old", now), 400, "invalid_signature"},
		{"no header", body, "", 400, "invalid_signature"},
		{"garbage header", body, "t=abc,v1=zz", 400, "invalid_signature"},
		{"several v1, one right", body, signed(body, "whsec_wrong", now) + ",v1=" + signed(body, "whsec_old", now)[len(fmt.Sprintf("t=%d,v1=", now.Unix())):], 200, ""},
		{"valid signature, body not an event", []byte(`{"hello":1}`), signed([]byte(`{"hello":1}`), "whsec_old", now), 400, "invalid_body"},
		{"valid signature, body not JSON", []byte(`nope`), signed([]byte(`nope`), "whsec_old", now), 400, "invalid_body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mustStatus(t, h.hook(path, tt.body, tt.header), tt.status, tt.code)
		})
	}

	// Rotation: a new secret via the admin API; both verify during the overlap.
	r = h.q("POST", "/v1/sites/web/webhook-secrets", tn.adminKey, map[string]any{"adapter": "payments"})
	mustStatus(t, r, 201, "")
	created := r.json(t)
	newSecret := created["secret"].(string)
	mustStatus(t, h.hook(path, body, signed(body, newSecret, now)), 200, "")
	mustStatus(t, h.hook(path, body, signed(body, "whsec_old", now)), 200, "")
	// The operator revokes the old secret with SQL: it stops verifying at once.
	if _, err := op.Exec(`UPDATE webhook_secrets SET revoked_at = '2026-01-01T00:00:00.000Z' WHERE secret = 'whsec_old'`); err != nil {
		t.Fatal(err)
	}
	mustStatus(t, h.hook(path, body, signed(body, "whsec_old", now)), 400, "invalid_signature")
	mustStatus(t, h.hook(path, body, signed(body, newSecret, now)), 200, "")

	list := h.q("GET", "/v1/sites/web/webhook-secrets", testAdminToken, nil)
	mustStatus(t, list, 200, "")
	if secrets := list.json(t)["secrets"].([]any); len(secrets) != 2 || string(list.body) == "" || strings.Contains(string(list.body), newSecret) {
		t.Fatalf("got %s, want two entries without secrets", list.body)
	}
	id := fmt.Sprint(created["id"])
	mustStatus(t, h.q("DELETE", "/v1/sites/web/webhook-secrets/"+id, tn.adminKey, nil), 204, "")
	mustStatus(t, h.q("DELETE", "/v1/sites/web/webhook-secrets/"+id, tn.adminKey, nil), 404, "not_found")
	mustStatus(t, h.hook(path, body, signed(body, newSecret, now)), 401, "unauthorized") // no active secret left
	mustStatus(t, h.q("POST", "/v1/sites/web/webhook-secrets", tn.readKey, nil), 403, "forbidden")
	mustStatus(t, h.q("POST", "/v1/sites/web/webhook-secrets", testAdminToken, map[string]any{"adapter": "paypal"}), 400, "invalid_adapter")
	mustStatus(t, h.q("POST", "/sites/web/webhook-secrets", testAdminToken, nil), 404, "not_found") // v1 only
	if n := h.count(`SELECT COUNT(*) FROM audit_log WHERE action IN ('webhook_secret.create', 'webhook_secret.revoke') AND metadata NOT LIKE '%whsec%'`); n != 2 {
		t.Fatalf("got %d webhook secret audit rows without the secret, want 2", n)
	}
}

func TestPaymentsWebhookForwardFailure(t *testing.T) {
	t.Parallel()
	rejecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer rejecting.Close()
	dropping := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(dropReasonsHeader, "consent_required")
		w.WriteHeader(http.StatusAccepted)
		w.Write([]byte(`{"accepted":0,"duplicates":0,"quarantined":0,"dropped":1}`))
	}))
	defer dropping.Close()
	for _, tt := range []struct {
		name, url, message string
	}{
		{"collector refuses", rejecting.URL, "503"},
		{"collector unreachable", "http://127.0.0.1:1", "could not be reached"},
		{"collector drops the event", dropping.URL, "dropped it (consent_required)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.CollectorURL = tt.url })
			h.setupTenant("acme", "web")
			h.sqlDB().Exec(`INSERT INTO webhook_secrets(site_id, adapter, secret) VALUES ('web', 'payments', 's')`)
			body := chargeEvent("evt_1", nil)
			r := h.hook("/webhooks/payments/web", body, signed(body, "s", h.clock.Now()))
			mustStatus(t, r, 500, "forward_failed")
			if !strings.Contains(string(r.body), tt.message) {
				t.Errorf("got %s, want the message to say %q", r.body, tt.message)
			}
		})
	}
}

// Payments are records of a contract, not tracking: with CONSENT_MODE=require
// the webhook's event, which carries no consent of the visitor, is stored.
func TestPaymentsWebhookConsentRequire(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.ConsentMode = privacy.ConsentRequire })
	h.setupTenant("acme", "web")
	h.sqlDB().Exec(`INSERT INTO webhook_secrets(site_id, adapter, secret) VALUES ('web', 'payments', 's')`)
	body := chargeEvent("evt_1", map[string]any{"anon_id": "visitor-9", "user_id": "u9"})
	r := h.hook("/v1/webhooks/payments/web", body, signed(body, "s", h.clock.Now()))
	mustStatus(t, r, 200, "")
	var anon, user string
	if err := h.sqlDB().QueryRow(`SELECT anon_id, user_id FROM events`).Scan(&anon, &user); err != nil {
		t.Fatalf("got no stored event after a 200: %v", err)
	}
	if anon != "visitor-9" || user != "u9" {
		t.Errorf("got anon_id %s user_id %s, want visitor-9 u9", anon, user)
	}
}

// A webhook answers 200 only once its event is stored: an event the
// collector quarantines (or drops) answers 500 so the processor retries,
// and the retry after the fix is stored once.
func TestPaymentsWebhookNotStored(t *testing.T) {
	t.Parallel()
	plan := filepath.Join(t.TempDir(), "plan.json")
	os.WriteFile(plan, []byte(`{"mode":"quarantine","events":{"purchase":{"type":"object","required":["properties"],
		"properties":{"properties":{"required":["order_id"]}}},"*":{"type":"object"}}}`), 0o644)
	p, err := schema.LoadPlan(plan)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *Config) { c.Plan, c.PlanPath = p, plan })
	h.setupTenant("acme", "web")
	h.sqlDB().Exec(`INSERT INTO webhook_secrets(site_id, adapter, secret) VALUES ('web', 'payments', 's')`)
	body := chargeEvent("evt_1", nil)
	r := h.hook("/v1/webhooks/payments/web", body, signed(body, "s", h.clock.Now()))
	mustStatus(t, r, 500, "forward_failed")
	if !strings.Contains(string(r.body), "quarantined") {
		t.Errorf("got %s, want the message to say the event was quarantined", r.body)
	}
	if n := h.count(`SELECT COUNT(*) FROM dlq`); n != 1 {
		t.Fatalf("got %d DLQ rows, want the quarantined event kept", n)
	}
	os.WriteFile(plan, []byte(`{"mode":"quarantine","events":{"*":{"type":"object"}}}`), 0o644)
	if _, err := h.srv.ReloadPlan(); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the processor's retry, and a redelivery of it
		h.clock.Advance(time.Minute)
		r = h.hook("/v1/webhooks/payments/web", body, signed(body, "s", h.clock.Now()))
		mustStatus(t, r, 200, "")
		if got := r.json(t)["forwarded"]; got != float64(1) {
			t.Fatalf("got forwarded %v, want 1", got)
		}
	}
	if n := h.count(`SELECT COUNT(*) FROM events WHERE type = 'purchase'`); n != 1 {
		t.Errorf("got %d stored purchases, want 1", n)
	}
}
