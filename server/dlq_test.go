package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tally-analytics/tally/privacy"
	"github.com/tally-analytics/tally/schema"
)

// quarantineHarness runs a quarantine-mode plan that requires
// properties.amount on purchases; reloading with fixPlan accepts them.
func quarantineHarness(t *testing.T, opts ...harnessOption) (*harness, tenant, func()) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plan.json")
	os.WriteFile(path, []byte(`{"mode":"quarantine","events":{"purchase":{"type":"object","required":["properties"]},"*":{"type":"object"}}}`), 0o644)
	plan, err := schema.LoadPlan(path)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, append([]harnessOption{func(c *Config) { c.Plan, c.PlanPath = plan, path }}, opts...)...)
	tn := h.setupTenant("acme", "web")
	fix := func() {
		os.WriteFile(path, []byte(`{"mode":"quarantine","events":{"*":{"type":"object"}}}`), 0o644)
		if _, err := h.srv.ReloadPlan(); err != nil {
			t.Fatal(err)
		}
	}
	return h, tn, fix
}

func TestDLQListPaging(t *testing.T) {
	t.Parallel()
	h, tn, _ := quarantineHarness(t)
	// 7 quarantined events in one millisecond (the test clock stands still), then 2 a second later.
	for i := range 7 {
		intake(t, h.c("POST", "/v1/events", "web", ev("web", i, map[string]any{"type": "purchase"}), "User-Agent", chromeUA))
	}
	h.clock.Advance(1e9)
	for i := 7; i < 9; i++ {
		intake(t, h.c("POST", "/v1/events", "web", ev("web", i, map[string]any{"type": "purchase"}), "User-Agent", chromeUA))
	}
	r := h.q("GET", "/v1/sites/web/dlq?limit=1", tn.adminKey, nil)
	mustStatus(t, r, 200, "")
	var body struct {
		Events     []map[string]any
		NextCursor *string `json:"next_cursor"`
	}
	json.Unmarshal(r.body, &body)
	row := body.Events[0]
	if _, ok := row["payload"].(map[string]any); !ok || row["site_id"] != "web" || row["received_at"] != "2026-01-31T09:05:01.120Z" {
		t.Fatalf("got row %v, want the newest with payload as an object", row)
	}
	if errs, ok := row["error"].([]any); !ok || fmt.Sprint(errs) != "[map[message:missing required property 'properties' path:/properties]]" {
		t.Fatalf("got error %v", row["error"])
	}
	for _, limit := range []int{1, 2, 3, 100} {
		seen := map[string]bool{}
		cursor := ""
		for page := 0; page < 20; page++ {
			path := fmt.Sprintf("/v1/sites/web/dlq?limit=%d", limit)
			if cursor != "" {
				path += "&cursor=" + url.QueryEscape(cursor)
			}
			var b struct {
				Events     []map[string]any
				NextCursor *string `json:"next_cursor"`
			}
			json.Unmarshal(h.q("GET", path, testAdminToken, nil).body, &b)
			for _, e := range b.Events {
				if seen[e["id"].(string)] {
					t.Fatalf("limit %d: %s repeated", limit, e["id"])
				}
				seen[e["id"].(string)] = true
			}
			if b.NextCursor == nil {
				break
			}
			cursor = *b.NextCursor
		}
		if len(seen) != 9 {
			t.Fatalf("limit %d: got %d rows over all pages, want 9", limit, len(seen))
		}
	}
	mustStatus(t, h.q("GET", "/v1/sites/web/dlq", tn.readKey, nil), 403, "forbidden")
	other := h.setupTenant("bravo", "other")
	mustStatus(t, h.q("GET", "/v1/sites/web/dlq", other.adminKey, nil), 404, "not_found")
	mustStatus(t, h.q("GET", "/v1/sites/web/dlq?limit=0", testAdminToken, nil), 400, "invalid_limit")
	mustStatus(t, h.q("GET", "/v1/sites/web/dlq?cursor=x", testAdminToken, nil), 400, "invalid_cursor")
}

func TestDLQReplay(t *testing.T) {
	t.Parallel()
	iphone := "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1"
	for _, mode := range []string{KeyModeNone, KeyModeRequire} {
		t.Run(mode, func(t *testing.T) {
			h, tn, fix := quarantineHarness(t, func(c *Config) { c.RequireAPIKey = mode })
			headers := []string{"User-Agent", iphone}
			token := "web"
			if mode == KeyModeRequire {
				token, headers = tn.ingestKey, append(headers, "X-Site-Id", "web")
			}
			bad := ev("web", 1, map[string]any{"type": "purchase", "extra": "kept"})
			a := intake(t, h.c("POST", "/v1/events", token, bad, headers...))
			if a.Quarantined != 1 {
				t.Fatalf("got %+v", a)
			}
			id := eventID(1)
			// Still invalid: the collector answers 202 but quarantines it again; the row stays.
			r := h.q("POST", "/v1/sites/web/dlq/"+id+"/replay", tn.adminKey, nil)
			mustStatus(t, r, 200, "")
			if r.json(t)["requarantined"] != true || h.count(`SELECT COUNT(*) FROM dlq`) != 1 {
				t.Fatalf("got %s; want the fresh DLQ row kept", r.body)
			}
			fix()
			h.clock.Advance(1e9)
			r = h.q("POST", "/v1/sites/web/dlq/"+id+"/replay", tn.adminKey, nil)
			mustStatus(t, r, 200, "")
			got := r.json(t)
			if got["id"] != id || got["replayed_at"] != "2026-01-31T09:05:01.120Z" || got["requarantined"] != false {
				t.Fatalf("got %v", got)
			}
			if n := h.count(`SELECT COUNT(*) FROM dlq`); n != 0 {
				t.Fatalf("got %d DLQ rows after a successful replay, want 0", n)
			}
			e, ok := h.eventByID(id)
			if !ok {
				t.Fatalf("replayed event not stored")
			}
			raw, browser := e.Raw.String, e.Browser.String
			var payload map[string]any
			json.Unmarshal([]byte(raw), &payload)
			if payload["extra"] != "kept" || browser != "Mobile Safari" {
				t.Errorf("got raw %s browser %s, want the verbatim payload and the original User-Agent's browser", raw, browser)
			}
			entry := h.q("GET", "/v1/workspaces/acme/audit?limit=1", testAdminToken, nil).json(t)["entries"].([]any)[0].(map[string]any)
			if entry["action"] != "dlq.replay" || entry["target"] != id || entry["actor_id"] != tn.adminKID {
				t.Errorf("got audit %v", entry)
			}
			mustStatus(t, h.q("POST", "/v1/sites/web/dlq/"+id+"/replay", tn.adminKey, nil), 404, "not_found")
			mustStatus(t, h.q("POST", "/v1/sites/web/dlq/"+id+"/replay", tn.readKey, nil), 403, "forbidden")
		})
	}
}

func TestDLQReplayFailures(t *testing.T) {
	t.Parallel()
	rejecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"error":{"code":"schema_validation_failed","message":"nope"}}`))
	}))
	defer rejecting.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	for _, tt := range []struct {
		name, url, code string
	}{
		{"collector rejects", rejecting.URL, "collector_rejected"},
		{"collector unreachable", closedURL, "collector_unreachable"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, tn, _ := quarantineHarness(t)
			intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, map[string]any{"type": "purchase"}), "User-Agent", chromeUA))
			h.srv.cfg.CollectorURL = tt.url
			r := h.q("POST", "/v1/sites/web/dlq/"+eventID(1)+"/replay", tn.adminKey, nil)
			mustStatus(t, r, 502, tt.code)
			if n := h.count(`SELECT COUNT(*) FROM dlq`); n != 1 {
				t.Fatalf("got %d DLQ rows, want the row kept", n)
			}
			if n := h.count(`SELECT COUNT(*) FROM audit_log WHERE action = 'dlq.replay'`); n != 0 {
				t.Fatalf("a failed replay was audited")
			}
		})
	}
}

// A consent-denied event that fails the plan is quarantined as the events
// table would hold it: cookieless, without the User-Agent; its replay after
// the plan is fixed, even on a later day, stores exactly that form.
func TestDLQConsentDeniedIsCookieless(t *testing.T) {
	t.Parallel()
	for _, endpoint := range []string{"/v1/events", "/v1/s2s/events"} {
		t.Run(endpoint, func(t *testing.T) {
			h, tn, fix := quarantineHarness(t)
			op := h.sqlDB()
			denied := func(n int, typ string) map[string]any {
				e := ev("web", n, map[string]any{"type": typ, "consent": "denied", "user_id": "alice",
					"traits": map[string]any{"email": "a@x"}, "url": "https://example.test/p?email=a@x",
					"referrer": "https://r.test/?q=alice", "extra": "kept"})
				if endpoint == "/v1/s2s/events" {
					e["user_agent"] = chromeUA
				}
				return e
			}
			if a := intake(t, h.c("POST", endpoint, "web", denied(1, "purchase"), "User-Agent", chromeUA)); a.Quarantined != 1 {
				t.Fatalf("got %+v, want 1 quarantined", a)
			}
			// Its twin of the same day, accepted: what the events table holds.
			intake(t, h.c("POST", endpoint, "web", denied(2, "pageview"), "User-Agent", chromeUA))
			var twinAnon string
			if err := op.QueryRow(`SELECT anon_id FROM events WHERE id = ?`, eventID(2)).Scan(&twinAnon); err != nil {
				t.Fatal(err)
			}

			var payload, anon string
			var user, ua *string
			if err := op.QueryRow(`SELECT payload, anon_id, user_id, user_agent FROM dlq`).Scan(&payload, &anon, &user, &ua); err != nil {
				t.Fatal(err)
			}
			if anon != twinAnon || user != nil || ua != nil {
				t.Fatalf("got DLQ anon_id %s user_id %v user_agent %v, want anon_id %s and neither of the others", anon, user, ua, twinAnon)
			}
			for _, secret := range []string{"alice", "a@x", "anon-1", "email="} {
				if strings.Contains(payload, secret) {
					t.Errorf("got DLQ payload %s, want it without %q", payload, secret)
				}
			}
			if !strings.Contains(payload, `"extra":"kept"`) || !strings.Contains(payload, `"anon_id":"`+twinAnon+`"`) {
				t.Errorf("got DLQ payload %s, want the cookieless form with its other fields", payload)
			}

			// Replayed before the fix, it is quarantined again as it was.
			h.clock.Advance(48 * time.Hour) // the day's salt is gone: the id cannot be made again
			r := h.q("POST", "/v1/sites/web/dlq/"+eventID(1)+"/replay", tn.adminKey, nil)
			mustStatus(t, r, 200, "")
			var again, requarantined string
			var browser *string
			if err := op.QueryRow(`SELECT payload, anon_id, browser FROM dlq`).Scan(&again, &requarantined, &browser); err != nil {
				t.Fatal(err)
			}
			if again != payload || requarantined != twinAnon || browser == nil || *browser != "Chrome" {
				t.Fatalf("requarantined: got anon_id %s browser %v payload %s, want them unchanged", requarantined, browser, again)
			}

			fix()
			r = h.q("POST", "/v1/sites/web/dlq/"+eventID(1)+"/replay", tn.adminKey, nil)
			mustStatus(t, r, 200, "")
			e, ok := h.eventByID(eventID(1))
			if !ok {
				t.Fatalf("replayed event not stored")
			}
			anon, raw, stored := e.AnonID, e.Raw.String, e.Browser.String
			if anon != twinAnon || e.UserID.Valid || raw != payload || stored != "Chrome" {
				t.Errorf("got anon_id %s user_id %s browser %s raw %s, want anon_id %s, no user_id, Chrome and raw %s", anon, nullStr(e.UserID), stored, raw, twinAnon, payload)
			}
		})
	}
}

// A replay the collector answers 202 but drops (here: no consent once
// CONSENT_MODE is require) is not a success: the row stays.
func TestDLQReplayDroppedKeepsRow(t *testing.T) {
	t.Parallel()
	h, tn, fix := quarantineHarness(t)
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, map[string]any{"type": "purchase"}), "User-Agent", chromeUA))
	fix()
	h.srv.cfg.ConsentMode = privacy.ConsentRequire
	r := h.q("POST", "/v1/sites/web/dlq/"+eventID(1)+"/replay", tn.adminKey, nil)
	mustStatus(t, r, 502, "collector_rejected")
	if !strings.Contains(string(r.body), "consent_required") {
		t.Errorf("got %s, want the message to name consent_required", r.body)
	}
	if n := h.count(`SELECT COUNT(*) FROM dlq`); n != 1 {
		t.Fatalf("got %d DLQ rows, want the row kept", n)
	}
	if n := h.count(`SELECT COUNT(*) FROM audit_log WHERE action = 'dlq.replay'`); n != 0 {
		t.Errorf("got %d dlq.replay audit rows for a failed replay, want 0", n)
	}
	// With consent required again no longer, the same row replays.
	h.srv.cfg.ConsentMode = privacy.ConsentCookieless
	mustStatus(t, h.q("POST", "/v1/sites/web/dlq/"+eventID(1)+"/replay", tn.adminKey, nil), 200, "")
	if n := h.count(`SELECT COUNT(*) FROM events WHERE id = ?`, eventID(1)); n != 1 {
		t.Errorf("got %d stored events, want 1", n)
	}
}

// An s2s event's user_agent field may hold anything JSON can, control
// characters included, that no HTTP header can carry: its replay still
// sends the exact payload, and the event is stored with it.
func TestDLQReplayS2SControlCharacters(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{KeyModeNone, KeyModeRequire} {
		t.Run(mode, func(t *testing.T) {
			h, tn, fix := quarantineHarness(t, func(c *Config) { c.RequireAPIKey = mode })
			token, headers := "web", []string{"User-Agent", "acme-backend/2"}
			if mode == KeyModeRequire {
				token, headers = tn.ingestKey, append(headers, "X-Site-Id", "web")
			}
			ua := "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1\r\nX-Injected: 1\u0000\u0007\u007f"
			uaJSON, _ := json.Marshal(ua)
			body := `{"id":"` + eventID(1) + `","site_id":"web","anon_id":"a","type":"purchase","user_agent":` + string(uaJSON) + `,  "extra": [1, 2]}`
			if a := intake(t, h.c("POST", "/v1/s2s/events", token, body, headers...)); a.Quarantined != 1 {
				t.Fatalf("got %+v, want 1 quarantined", a)
			}
			fix()
			r := h.q("POST", "/v1/sites/web/dlq/"+eventID(1)+"/replay", tn.adminKey, nil)
			mustStatus(t, r, 200, "")
			e, ok := h.eventByID(eventID(1))
			if !ok {
				t.Fatalf("replayed event not stored")
			}
			raw, browser := e.Raw.String, e.Browser.String
			if raw != body {
				t.Errorf("got raw %q, want the payload byte for byte %q", raw, body)
			}
			if want := privacy.ParseAgent(ua).Browser; browser != want {
				t.Errorf("got browser %q, want %q, from the payload's user_agent", browser, want)
			}
			if n := h.count(`SELECT COUNT(*) FROM dlq`); n != 0 {
				t.Errorf("got %d DLQ rows after the replay, want 0", n)
			}
		})
	}
}
