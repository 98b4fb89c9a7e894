package server

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/tally-analytics/tally/internal/dbtest"
)

// Writes of the admin API that name a site re-check it when they commit.
// These tests delete the site (and create it again elsewhere) at the moment
// a request, past its own check of the site, goes to storage.

// A webhook secret created while its site is deleted is not stored: it
// would outlive the delete and verify webhooks of a later site with the id.
func TestWebhookSecretCreateSiteDeletedMidRequest(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	deleted := false
	// The first clock reading of the create is storage's, for created_at,
	// just before the insert goes to the writer.
	h.clock.OnNextRead(func() {
		mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/sites/web", testAdminToken, nil), 204, "")
		deleted = true
	})
	mustStatus(t, h.q("POST", "/v1/sites/web/webhook-secrets", testAdminToken, map[string]any{"adapter": "payments"}), 404, "not_found")
	if !deleted {
		t.Fatal("the site was not deleted during the request")
	}
	if n := h.count(`SELECT COUNT(*) FROM webhook_secrets WHERE site_id = 'web'`); n != 0 {
		t.Fatalf("got %d webhook secrets of the deleted site, want 0", n)
	}
	if n := h.count(`SELECT COUNT(*) FROM audit_log WHERE action = 'webhook_secret.create'`); n != 0 {
		t.Fatalf("got %d webhook_secret.create audit rows, want 0", n)
	}
}

// A revoke whose site is deleted and created again in another workspace
// meanwhile leaves the new site's secret alone. On SQLite the new secret
// takes the same id (a rowid is reused once its table is empty); on
// PostgreSQL an identity never repeats, so the revoke's id names nothing.
func TestWebhookSecretRevokeSiteRecreatedMidRequest(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	h.setupTenant("bravo", "other")
	mustStatus(t, h.q("POST", "/v1/sites/web/webhook-secrets", testAdminToken, nil), 201, "")
	var secret string
	h.clock.OnNextRead(func() {
		mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/sites/web", testAdminToken, nil), 204, "")
		mustStatus(t, h.q("POST", "/v1/workspaces/bravo/sites", testAdminToken, map[string]any{"id": "web", "name": "bravo's"}), 201, "")
		r := h.q("POST", "/v1/sites/web/webhook-secrets", testAdminToken, nil)
		mustStatus(t, r, 201, "")
		if !dbtest.Postgres() && r.json(t)["id"] != float64(1) {
			// Errorf: this runs on the server's goroutine, where Fatal
			// would cut the request short.
			t.Errorf("got %s, want the new site's secret to take id 1", r.body)
		}
		secret = r.json(t)["secret"].(string)
	})
	mustStatus(t, h.q("DELETE", "/v1/sites/web/webhook-secrets/1", testAdminToken, nil), 404, "not_found")
	if secret == "" {
		t.Fatal("the site was not re-created during the request")
	}
	if n := h.count(`SELECT COUNT(*) FROM webhook_secrets WHERE site_id = 'web' AND revoked_at IS NULL`); n != 1 {
		t.Fatalf("got %d active secrets of the new site, want 1", n)
	}
	body := chargeEvent("evt_1", nil)
	mustStatus(t, h.hook("/v1/webhooks/payments/web", body, signed(body, secret, h.clock.Now())), 200, "")
	if n := h.count(`SELECT COUNT(*) FROM audit_log WHERE action = 'webhook_secret.revoke'`); n != 0 {
		t.Fatalf("got %d webhook_secret.revoke audit rows, want 0", n)
	}
}

// A replay whose site is deleted after the collector stored the event, but
// before the replay is recorded, audits nothing for the deleted site.
func TestDLQReplaySiteDeletedMidRequest(t *testing.T) {
	t.Parallel()
	var h *harness
	var armed atomic.Bool
	h, _, fix := quarantineHarness(t, func(c *Config) {
		now := c.Now
		c.Now = func() time.Time {
			// The replay reads the server's clock once the collector has
			// answered; the site goes away once the event is stored.
			if armed.Load() && h.count(`SELECT COUNT(*) FROM events WHERE site_id = 'web'`) == 1 && armed.CompareAndSwap(true, false) {
				mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/sites/web", testAdminToken, nil), 204, "")
			}
			return now()
		}
	})
	a := intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, map[string]any{"type": "purchase"}), "User-Agent", chromeUA))
	if a.Quarantined != 1 {
		t.Fatalf("got %+v, want the event quarantined", a)
	}
	fix()
	armed.Store(true)
	mustStatus(t, h.q("POST", "/v1/sites/web/dlq/"+eventID(1)+"/replay", testAdminToken, nil), 404, "not_found")
	if armed.Load() {
		t.Fatal("the site was not deleted during the request")
	}
	if n := h.count(`SELECT COUNT(*) FROM audit_log WHERE action = 'dlq.replay'`); n != 0 {
		t.Fatalf("got %d dlq.replay audit rows for the deleted site, want 0", n)
	}
}
