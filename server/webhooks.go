package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/schema"
	"github.com/tally-analytics/tally/storage"
)

// adapterPayments is the only webhook adapter of v1.0: a payment processor
// using Stripe's event names and signature scheme.
const adapterPayments = "payments"

// signatureTolerance is how far a signature's timestamp may be from now.
const signatureTolerance = 5 * time.Minute

// webhookBodyLimit caps webhook bodies (processor events are small).
const webhookBodyLimit = 1 << 20

// paymentsNamespace derives canonical event ids from processor event ids,
// so a redelivered processor event gets the same id and is deduplicated.
var paymentsNamespace = uuid.MustParse("5b0e5d0a-7c4c-4f3e-9a52-2f6c1d8e9b71")

// canonicalTypes maps processor event types to canonical event types.
var canonicalTypes = map[string]string{
	"charge.succeeded":              "purchase",
	"customer.subscription.created": "subscription_created",
	"customer.subscription.updated": "subscription_updated",
	"customer.subscription.deleted": "subscription_canceled",
}

// webhook verifies, maps and forwards a processor event: 404 for an unknown
// adapter, 401 when the site has no active secret (an unknown site looks
// the same), 400 for a bad signature or body, 500 when forwarding fails or
// the collector does not store the event (so the processor retries), else
// 200 {ok, forwarded}.
//
// POST /webhooks/:adapter/:siteId
func (s *Server) webhook(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	if ps.ByName("adapter") != adapterPayments {
		return fault.Errorf(fault.NotFound, "no webhook adapter of that name")
	}
	siteID := ps.ByName("siteId")
	body, err := readBody(w, r, webhookBodyLimit)
	if err != nil {
		return err
	}
	secrets, err := s.db.ActiveWebhookSecrets(r.Context(), siteID, adapterPayments)
	if err != nil {
		return err
	}
	if _, ok := s.db.Site(siteID); !ok || len(secrets) == 0 {
		return fault.Errorf(fault.Unauthorized, "no webhook secret is configured for this site")
	}
	if err := verifySignature(r.Header.Get("Payments-Signature"), body, secrets, s.now()); err != nil {
		return err
	}
	event, err := mapPaymentsEvent(siteID, body)
	if err != nil {
		return err
	}
	if event == nil {
		writeJSON(w, http.StatusOK, webhookAnswer{OK: true, Forwarded: 0})
		return nil
	}
	payload, _ := json.Marshal(event)
	res, err := s.forward(r.Context(), siteID, pathEvents, payload, "tally-webhook/payments")
	if err != nil {
		return fault.Errorf(fault.ForwardFailed, "the collector could not be reached; retry later")
	}
	if res.status != http.StatusAccepted {
		return fault.Errorf(fault.ForwardFailed, "the collector answered %s", res.describe())
	}
	// Delivered means stored: a 200 for an event the collector dropped or
	// quarantined would stop the processor's retries and lose it.
	if !res.stored() {
		return fault.Errorf(fault.ForwardFailed, "the collector answered 202 but %s; retry later", res.fate())
	}
	writeJSON(w, http.StatusOK, webhookAnswer{OK: true, Forwarded: 1})
	return nil
}

// verifySignature checks a "t=<unix>,v1=<hex>[,v1=<hex>...]" header: the
// timestamp within signatureTolerance of now, and some v1 equal to the hex
// HMAC-SHA256 of "<t>.<body>" under some active secret (so a rotation's
// old and new secrets both verify). Comparisons are constant-time.
func verifySignature(header string, body []byte, secrets []string, now time.Time) error {
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	if ts == "" || len(sigs) == 0 {
		return fault.Errorf(fault.InvalidSignature, "Payments-Signature must be t=<timestamp>,v1=<signature>")
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fault.Errorf(fault.InvalidSignature, "the signature timestamp is not a number")
	}
	if d := now.Sub(time.Unix(unix, 0)); d > signatureTolerance || d < -signatureTolerance {
		return fault.Errorf(fault.InvalidSignature, "the signature timestamp is outside the 5-minute tolerance")
	}
	for _, secret := range secrets {
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(ts))
		mac.Write([]byte("."))
		mac.Write(body)
		want := mac.Sum(nil)
		for _, sig := range sigs {
			if hmac.Equal(sig, want) {
				return nil
			}
		}
	}
	return fault.Errorf(fault.InvalidSignature, "no signature matches")
}

// paymentsEvent is the part of a processor event the adapter reads.
type paymentsEvent struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Created int64  `json:"created"`
	Data    struct {
		Object map[string]any `json:"object"`
	} `json:"data"`
}

// mapPaymentsEvent turns a processor event into a canonical event, or nil
// for a type that is not mapped. anon_id and user_id come from
// data.object.metadata when present (else anon_id is the customer id);
// the id is derived from the processor event id; amount and currency go
// in properties, amount in the currency's minor unit as the processor
// sends it; consent is "granted" (docs/intake.md#webhooks, Consent).
func mapPaymentsEvent(siteID string, body []byte) (*canonicalEvent, error) {
	var pe paymentsEvent
	if err := json.Unmarshal(body, &pe); err != nil || pe.ID == "" || pe.Type == "" {
		return nil, fault.Errorf(fault.InvalidBody, "the body must be a processor event with id, type and data.object")
	}
	typ, ok := canonicalTypes[pe.Type]
	if !ok {
		return nil, nil
	}
	obj := pe.Data.Object
	if obj == nil {
		return nil, fault.Errorf(fault.InvalidBody, "the event has no data.object")
	}
	str := func(m map[string]any, k string) string {
		v, _ := m[k].(string)
		return v
	}
	meta, _ := obj["metadata"].(map[string]any)
	anon := str(meta, "anon_id")
	if n := utf8.RuneCountInString(anon); n == 0 || n > 128 {
		anon = str(obj, "customer")
	}
	if anon == "" {
		anon = str(obj, "id")
	}
	if anon == "" {
		return nil, fault.Errorf(fault.InvalidBody, "the event's object has no customer or id to attribute it to")
	}
	props := map[string]any{"processor_event_id": pe.ID, "processor_event_type": pe.Type}
	if v, ok := obj["amount"]; ok {
		props["amount"] = v
	}
	if v := str(obj, "currency"); v != "" {
		props["currency"] = v
	}
	if strings.HasPrefix(pe.Type, "customer.subscription.") {
		props["subscription_id"] = str(obj, "id")
		if v := str(obj, "status"); v != "" {
			props["status"] = v
		}
		if items, _ := obj["items"].(map[string]any); items != nil {
			if data, _ := items["data"].([]any); len(data) > 0 {
				if item, _ := data[0].(map[string]any); item != nil {
					if price, _ := item["price"].(map[string]any); price != nil {
						if v, ok := price["unit_amount"]; ok {
							props["amount"] = v
						}
						if v := str(price, "currency"); v != "" {
							props["currency"] = v
						}
					}
				}
			}
		}
	} else {
		props["charge_id"] = str(obj, "id")
	}
	event := &canonicalEvent{
		ID:         uuid.NewSHA1(paymentsNamespace, []byte(siteID+":"+pe.ID)).String(),
		SiteID:     siteID,
		AnonID:     anon,
		Type:       typ,
		Properties: props,
		// A payment is a record of the contract with the customer, kept
		// under that contract, not tracking: it passes the consent gate of
		// CONSENT_MODE=require and is never made cookieless.
		Consent: schema.ConsentGranted,
	}
	if u := str(meta, "user_id"); u != "" && utf8.RuneCountInString(u) <= 256 {
		event.UserID = u
	}
	if pe.Created > 0 {
		event.TS = time.Unix(pe.Created, 0).UTC().Format(time.RFC3339)
	}
	return event, nil
}

// canonicalEvent is the event a webhook sends the collector. The collector
// stores these bytes as the event's raw, which exports show, so the fields
// stay in alphabetical order, the order of a JSON map's keys.
type canonicalEvent struct {
	AnonID     string         `json:"anon_id"`
	Consent    string         `json:"consent"`
	ID         string         `json:"id"`
	Properties map[string]any `json:"properties"`
	SiteID     string         `json:"site_id"`
	TS         string         `json:"ts,omitempty"`
	Type       string         `json:"type"`
	UserID     string         `json:"user_id,omitempty"`
}

// createWebhookSecret makes a secret for {adapter} (default "payments") and
// answers 201 with it, shown this once.
//
// POST /v1/sites/:siteId/webhook-secrets
func (s *Server) createWebhookSecret(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	adapter := adapterPayments
	if r.ContentLength != 0 {
		body, err := decodeObject(w, r, adminBodyLimit)
		if err != nil {
			return err
		}
		if body.has("adapter") {
			if adapter, err = body.str("adapter", fault.InvalidAdapter); err != nil {
				return err
			}
		}
	}
	if adapter != adapterPayments {
		return fault.Errorf(fault.InvalidAdapter, "unknown adapter %q; the only adapter is %q", adapter, adapterPayments)
	}
	ws, secret, err := s.db.CreateWebhookSecret(r.Context(), p.actor(), site, adapter)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, createdWebhookSecret{ID: ws.ID, SiteID: ws.SiteID, Adapter: ws.Adapter,
		CreatedAt: ws.CreatedAt, Secret: secret, Warning: "Save this secret now: it is shown only once by this API."})
	return nil
}

// listWebhookSecrets answers {secrets: [...]} without the secrets.
//
// GET /v1/sites/:siteId/webhook-secrets
func (s *Server) listWebhookSecrets(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	_, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	list, err := s.db.WebhookSecrets(r.Context(), site.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, webhookSecretList{Secrets: rowsOf(list, webhookSecretOf)})
	return nil
}

// revokeWebhookSecret revokes a secret now; 204, and 404 when it is unknown
// or already revoked.
//
// DELETE /v1/sites/:siteId/webhook-secrets/:secretId
func (s *Server) revokeWebhookSecret(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(ps.ByName("secretId"), 10, 64)
	if err != nil {
		return fault.Errorf(fault.NotFound, "no active webhook secret with that id on this site")
	}
	if err := s.db.RevokeWebhookSecret(r.Context(), p.actor(), site, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
