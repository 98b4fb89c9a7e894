package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/privacy"
	"github.com/tally-analytics/tally/schema"
)

// The steps run in the order docs/intake.md#gates-in-order lists the
// gates, named as it names them.
func TestIntakeStepsFollowTheDocs(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../docs/intake.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(page), "\n## Gates, in order\n")
	if !found {
		t.Fatal("got no section \"Gates, in order\" in docs/intake.md")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var want []string
	for _, m := range regexp.MustCompile(`\*\*([^*]+)\*\*`).FindAllStringSubmatch(section, -1) {
		want = append(want, strings.ToLower(m[1]))
	}
	var got []string
	for _, s := range intakeSteps {
		got = append(got, s.gate)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got steps %q, want the gates of docs/intake.md %q", got, want)
	}
}

// wrappedFormat is a test-only intake format: {"batch": [event, ...]},
// each element one of Tally's events parsed on its own, so a storeValid
// batch can keep the valid ones. It reuses every gate and copies none.
func wrappedFormat(policy batchPolicy) *intakeFormat {
	return &intakeFormat{endpoint: endpointS2S, credential: (*Server).collectorCredential,
		parse: parseWrapped, agentFrom: agentField, batch: policy}
}

func parseWrapped(body []byte, now time.Time) ([]schema.Event, []refusal, error) {
	var w struct {
		Batch []json.RawMessage `json:"batch"`
	}
	if err := json.Unmarshal(body, &w); err != nil || len(w.Batch) == 0 {
		return nil, nil, fault.Errorf(fault.InvalidEvent, `send {"batch": [events]}`)
	}
	var events []schema.Event
	var refused []refusal
	for i, raw := range w.Batch {
		pointer := "/batch/" + strconv.Itoa(i)
		parsed, err := schema.Parse(raw, now)
		if err != nil {
			details := fault.As(err).Details
			for j := range details {
				details[j].Path = pointer + details[j].Path
			}
			refused = append(refused, refusal{index: i, raw: raw, code: fault.InvalidEvent, details: details})
			continue
		}
		ev := parsed[0]
		ev.Index, ev.Pointer = i, pointer
		events = append(events, ev)
	}
	return events, refused, nil
}

// wrappedRoute serves format f at its own listener, with h's server behind it.
func wrappedRoute(h *harness, f *intakeFormat) string {
	rt := newRouter(discardLogger())
	rt.route(http.MethodPost, "/wrapped", h.srv.ingest(f))
	srv := httptest.NewServer(rt)
	h.t.Cleanup(srv.Close)
	return srv.URL + "/wrapped"
}

func wrap(events ...any) map[string]any { return map[string]any{"batch": events} }

func testPlan(t *testing.T, mode string) *schema.Plan {
	t.Helper()
	p, err := schema.ParsePlan([]byte(`{"mode":"` + mode + `","events":{"purchase":{"type":"object","required":["properties"],
		"properties":{"properties":{"type":"object","required":["amount"]}}},"pageview":{"type":"object"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A new format gets every gate by declaring itself: the gates run for it
// as they do for /events, under either batch policy.
func TestIntakeFormatRunsEveryGate(t *testing.T) {
	t.Parallel()
	bot := "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
	for _, policy := range []batchPolicy{allOrNothing, storeValid} {
		t.Run(fmt.Sprint("policy ", policy), func(t *testing.T) {
			t.Run("credential, body size, envelope", func(t *testing.T) {
				h := newHarness(t)
				h.setupTenant("acme", "web")
				url := wrappedRoute(h, wrappedFormat(policy))
				mustStatus(t, h.request("POST", url, "", wrap(ev("web", 1, nil))), 401, "unauthorized")
				mustStatus(t, h.request("POST", url, "nope", wrap(ev("web", 1, nil))), 401, "unauthorized")
				mustStatus(t, h.request("POST", url, "web", bytes.Repeat([]byte(" "), ingestBodyLimit+1)), 413, "payload_too_large")
				mustStatus(t, h.request("POST", url, "web", "[1]"), 400, "invalid_event")
			})
			t.Run("bot, consent, enrichment, dedup, storage", func(t *testing.T) {
				h := newHarness(t)
				h.setupTenant("acme", "web")
				url := wrappedRoute(h, wrappedFormat(policy))
				body := wrap(ev("web", 1, map[string]any{"user_agent": chromeUA}), ev("web", 2, map[string]any{"user_agent": bot}),
					ev("web", 3, map[string]any{"consent": "denied"}))
				r := h.request("POST", url, "web", body, "User-Agent", bot) // the format reads the field, not the header
				if a := intake(t, r); a != (intakeAnswer{Accepted: 2, Dropped: 1}) {
					t.Fatalf("got %+v, want 2 accepted 1 dropped", a)
				}
				if got := r.header.Get(dropReasonsHeader); got != "bot" {
					t.Errorf("got %s %q, want bot", dropReasonsHeader, got)
				}
				if a := intake(t, h.request("POST", url, "web", body)); a != (intakeAnswer{Duplicates: 2, Dropped: 1}) {
					t.Fatalf("got %+v on a retry, want 2 duplicates 1 dropped", a)
				}
				var browser, credential string
				if err := h.sqlDB().QueryRow(`SELECT browser, c.credential FROM events e JOIN event_credentials c USING (seq) WHERE e.id = ?`, eventID(1)).Scan(&browser, &credential); err != nil {
					t.Fatal(err)
				}
				if browser != "Chrome" || credential != credentialSite {
					t.Errorf("got browser %q credential %q, want Chrome %q", browser, credential, credentialSite)
				}
				if n := h.count(`SELECT COUNT(*) FROM events WHERE id = ? AND anon_id LIKE ?`, eventID(3), privacy.CookielessPrefix+"%"); n != 1 {
					t.Errorf("got %d cookieless rows for the consent-denied event, want 1", n)
				}
				if got := metricValue(t, h, `service_events_dropped_total{endpoint="s2s",reason="bot"}`); got != "2" {
					t.Errorf("got bot drops %s, want 2", got)
				}
			})
			t.Run("consent, require mode", func(t *testing.T) {
				h := newHarness(t, func(c *Config) { c.ConsentMode = privacy.ConsentRequire })
				h.setupTenant("acme", "web")
				url := wrappedRoute(h, wrappedFormat(policy))
				r := h.request("POST", url, "web", wrap(ev("web", 1, map[string]any{"consent": "granted"}), ev("web", 2, nil)))
				if a := intake(t, r); a != (intakeAnswer{Accepted: 1, Dropped: 1}) {
					t.Fatalf("got %+v, want 1 accepted 1 dropped", a)
				}
			})
			t.Run("rate limit", func(t *testing.T) {
				h := newHarness(t, func(c *Config) { c.RateLimit = 1 }) // burst 2
				h.setupTenant("acme", "web")
				url := wrappedRoute(h, wrappedFormat(policy))
				intake(t, h.request("POST", url, "web", wrap(ev("web", 1, nil), ev("web", 2, nil))))
				mustStatus(t, h.request("POST", url, "web", wrap(ev("web", 3, nil))), 429, "rate_limited")
			})
			t.Run("tracking plan, quarantine mode", func(t *testing.T) {
				h := newHarness(t, func(c *Config) { c.Plan = testPlan(t, schema.ModeQuarantine) })
				h.setupTenant("acme", "web")
				url := wrappedRoute(h, wrappedFormat(policy))
				bad := ev("web", 2, map[string]any{"type": "purchase", "properties": map[string]any{}})
				if a := intake(t, h.request("POST", url, "web", wrap(ev("web", 1, nil), bad))); a != (intakeAnswer{Accepted: 1, Quarantined: 1}) {
					t.Fatalf("got %+v, want 1 accepted 1 quarantined", a)
				}
				var endpoint, errs string
				if err := h.sqlDB().QueryRow(`SELECT endpoint, error FROM dlq WHERE id = ?`, eventID(2)).Scan(&endpoint, &errs); err != nil {
					t.Fatal(err)
				}
				if endpoint != endpointS2S || errs != `[{"path":"/properties/amount","message":"missing required property 'amount'"}]` {
					t.Errorf("got DLQ endpoint %q errors %s, want %q and the event's own pointer", endpoint, errs, endpointS2S)
				}
			})
			t.Run("quota", func(t *testing.T) {
				h := newHarness(t, func(c *Config) { c.Quota = 2 })
				h.setupTenant("acme", "web")
				url := wrappedRoute(h, wrappedFormat(policy))
				intake(t, h.request("POST", url, "web", wrap(ev("web", 1, nil), ev("web", 2, nil))))
				mustStatus(t, h.request("POST", url, "web", wrap(ev("web", 3, nil))), 429, "quota_exceeded")
			})
		})
	}
}

// runIntake takes body through the pipeline of format f on h's server and
// database, with the site bearer "web", and returns what it came to.
func runIntake(h *harness, f *intakeFormat, body any) (*decision, error) {
	b, err := json.Marshal(body)
	if err != nil {
		h.t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/wrapped", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer web")
	p := &intakePipeline{s: h.srv, f: f, m: h.srv.metrics.Load(), w: httptest.NewRecorder(), r: req}
	p.d.endpoint = f.endpoint
	err = p.run()
	return &p.d, err
}

// One event failing a per-event gate refuses the whole request under
// allOrNothing; under storeValid it is refused and reported alone while the
// others are stored.
func TestIntakeBatchPolicy(t *testing.T) {
	t.Parallel()
	bad := ev("web", 2, map[string]any{"type": "purchase", "properties": map[string]any{}})
	tests := []struct {
		name    string
		plan    bool
		second  any
		code    string
		details string
	}{
		{"broken envelope", false, map[string]any{"id": "nope"}, "invalid_event",
			"[{/batch/1/id id must be a UUID such as 3f2504e0-4f89-41d3-9a0c-0305e82c3301} {/batch/1/site_id site_id is required} {/batch/1/anon_id anon_id is required} {/batch/1/type type is required}]"},
		{"site mismatch", false, ev("other", 2, nil), "invalid_event", "[{/batch/1/site_id site_id does not match the credential's site}]"},
		{"tracking plan, reject mode", true, bad, "schema_validation_failed", "[{/batch/1/properties/amount missing required property 'amount'}]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) {
				if tt.plan {
					c.Plan = testPlan(t, schema.ModeReject)
				}
			})
			h.setupTenant("acme", "web")
			h.setupTenant("bravo", "other")
			body := wrap(ev("web", 1, nil), tt.second, ev("web", 3, nil))

			_, err := runIntake(h, wrappedFormat(allOrNothing), body)
			if got := fault.Code(err); got != tt.code {
				t.Fatalf("allOrNothing: got %v, want %s", err, tt.code)
			}
			if got := fmt.Sprint(fault.As(err).Details); got != tt.details {
				t.Errorf("allOrNothing: got details %s, want %s", got, tt.details)
			}
			if n := h.count(`SELECT COUNT(*) FROM events`); n != 0 {
				t.Fatalf("allOrNothing: got %d stored, want 0", n)
			}

			d, err := runIntake(h, wrappedFormat(storeValid), body)
			if err != nil {
				t.Fatalf("storeValid: got %v, want the valid events stored", err)
			}
			if d.answer != (intakeAnswer{Accepted: 2}) || d.events != 3 {
				t.Errorf("storeValid: got %+v of %d events, want 2 accepted of 3", d.answer, d.events)
			}
			if len(d.refused) != 1 {
				t.Fatalf("storeValid: got %d refusals, want 1", len(d.refused))
			}
			rf := d.refused[0]
			if rf.index != 1 || rf.code != tt.code || fmt.Sprint(rf.details) != tt.details {
				t.Errorf("storeValid: got refusal %d %s %v, want 1 %s %s", rf.index, rf.code, rf.details, tt.code, tt.details)
			}
			if n := h.count(`SELECT COUNT(*) FROM events WHERE id IN (?, ?)`, eventID(1), eventID(3)); n != 2 {
				t.Errorf("storeValid: got %d of the valid events stored, want 2", n)
			}
			if n := h.count(`SELECT COUNT(*) FROM events`); n != 2 {
				t.Errorf("storeValid: got %d stored, want 2", n)
			}
		})
	}
	t.Run("nothing valid left", func(t *testing.T) {
		h := newHarness(t)
		h.setupTenant("acme", "web")
		h.setupTenant("bravo", "other")
		d, err := runIntake(h, wrappedFormat(storeValid), wrap(ev("other", 1, nil), map[string]any{"id": "nope"}))
		if err != nil || len(d.refused) != 2 || d.answer != (intakeAnswer{}) || d.reason != fault.InvalidEvent {
			t.Fatalf("got %v, %d refusals, %+v, reason %q; want no error, 2 refusals, nothing stored, reason invalid_event", err, len(d.refused), d.answer, d.reason)
		}
		if n := h.count(`SELECT COUNT(*) FROM events`); n != 0 {
			t.Fatalf("got %d stored, want 0", n)
		}
	})
}
