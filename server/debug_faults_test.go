package server

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// devHarness is a harness in dev mode (the inspection feed and the
// /v1/debug/ endpoints on) with site "web" in workspace "acme".
func devHarness(t *testing.T, opts ...harnessOption) (*harness, tenant) {
	t.Helper()
	h := newHarness(t, append([]harnessOption{func(c *Config) { c.DebugFeedSize = 1000 }}, opts...)...)
	return h, h.setupTenant("acme", "web")
}

// injectFault posts a fault and requires 200.
func (h *harness) injectFault(f map[string]any) {
	h.t.Helper()
	mustStatus(h.t, h.q("POST", "/v1/debug/faults", "", f), 200, "")
}

// pendingFaults answers GET /v1/debug/faults.
func (h *harness) pendingFaults(query string) []pendingFault {
	h.t.Helper()
	r := h.q("GET", "/v1/debug/faults"+query, "", nil)
	mustStatus(h.t, r, 200, "")
	var a faultsAnswer
	if err := json.Unmarshal(r.body, &a); err != nil {
		h.t.Fatal(err)
	}
	return a.Faults
}

// An injected failure answers the next count intake requests with its
// status, our envelope (Retry-After for 429 and 503), stores nothing and
// is recorded in the feed as rejected, injected_fault; the request after
// them is served as usual. It applies to every intake format.
func TestInjectedFaultFailsThenRecovers(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name       string
		fault      map[string]any
		endpoint   string
		status     int
		code       string
		retryAfter string
	}{
		{"503 three times", map[string]any{"status": 503, "count": 3}, "/v1/events", 503, "unavailable", "1"},
		{"429 with Retry-After", map[string]any{"status": 429, "retry_after": 2}, "/v1/events", 429, "rate_limited", "2"},
		{"503 without Retry-After", map[string]any{"status": 503, "retry_after": 0}, "/v1/events", 503, "unavailable", ""},
		{"500", map[string]any{"status": 500, "count": 2}, "/v1/events", 500, "internal", ""},
		{"502 on s2s", map[string]any{"status": 502}, "/v1/s2s/events", 502, "bad_gateway", ""},
		{"504 with Retry-After", map[string]any{"status": 504, "retry_after": 5}, "/v1/events", 504, "gateway_timeout", "5"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := devHarness(t)
			h.injectFault(tt.fault)
			count := 1
			if c, ok := tt.fault["count"].(int); ok {
				count = c
			}
			for i := range count {
				if got := h.pendingFaults(""); len(got) != 1 || got[0].Remaining != count-i {
					t.Fatalf("before request %d: got pending %+v, want one with %d remaining", i+1, got, count-i)
				}
				r := h.c("POST", tt.endpoint, "web", ev("web", 1, nil), "User-Agent", chromeUA)
				mustStatus(t, r, tt.status, tt.code)
				if got := r.header.Get("Retry-After"); got != tt.retryAfter {
					t.Fatalf("request %d: got Retry-After %q, want %q", i+1, got, tt.retryAfter)
				}
			}
			if got := h.count(`SELECT COUNT(*) FROM events`); got != 0 {
				t.Fatalf("got %d events stored by failed requests, want 0", got)
			}
			if got := h.pendingFaults(""); len(got) != 0 {
				t.Fatalf("got pending %+v after the last failure, want none", got)
			}
			injected := h.srv.Decisions(DebugFilter{Outcome: outcomeRejected})
			if len(injected) != count {
				t.Fatalf("got %d rejected decisions, want %d", len(injected), count)
			}
			for _, d := range injected {
				if d.Reason != reasonInjected || d.Status != tt.status || d.SiteID != "web" {
					t.Fatalf("got decision %+v, want reason %s, status %d, site web", d, reasonInjected, tt.status)
				}
				if !strings.Contains(string(d.Payload), eventID(1)) {
					t.Fatalf("got payload %s, want the request's body", d.Payload)
				}
			}
			if a := intake(t, h.c("POST", tt.endpoint, "web", ev("web", 1, nil), "User-Agent", chromeUA)); a.Accepted != 1 {
				t.Fatalf("got %+v after the fault, want the event accepted", a)
			}
		})
	}
}

// Injected failures are counted as received, like any refused request,
// never as dropped: nothing real was lost. Their log line is no error.
func TestInjectedFaultMetricsAndLog(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	h, _ := devHarness(t, func(c *Config) { c.Logger = slog.New(slog.NewJSONHandler(&buf, nil)) })
	h.injectFault(map[string]any{"status": 503, "count": 2})
	for range 2 {
		mustStatus(t, h.c("POST", "/v1/events", "web", ev("web", 1, nil)), 503, "unavailable")
	}
	if got := metricValue(t, h, `service_events_received_total{endpoint="events"}`); got != "2" {
		t.Fatalf("got received %s, want 2", got)
	}
	body := string(h.c("GET", "/metrics", "", nil).body)
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "service_events_dropped_total{") && !strings.HasSuffix(line, " 0") {
			t.Fatalf("got %q, want no drops counted for injected failures", line)
		}
	}
	lines := logLines(t, &buf, "intake")
	if len(lines) != 2 {
		t.Fatalf("got %d intake log lines, want 2", len(lines))
	}
	for _, l := range lines {
		if l["level"] != "INFO" || l["reason"] != reasonInjected {
			t.Fatalf("got log line %v, want level INFO, reason %s", l, reasonInjected)
		}
	}
}

// A stall holds the request for delay_ms, then serves it as usual: stored,
// its decision saying how long it was held.
func TestInjectedDelayThenProceeds(t *testing.T) {
	t.Parallel()
	h, _ := devHarness(t)
	h.injectFault(map[string]any{"delay_ms": 20})
	if a := intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, nil), "User-Agent", chromeUA)); a.Accepted != 1 {
		t.Fatalf("got %+v, want the stalled event accepted", a)
	}
	if got := h.count(`SELECT COUNT(*) FROM events`); got != 1 {
		t.Fatalf("got %d events, want 1", got)
	}
	d := h.srv.Decisions(DebugFilter{})
	if len(d) != 1 || d[0].Outcome != outcomeAccepted || d[0].InjectedDelayMS != 20 {
		t.Fatalf("got decisions %+v, want one accepted with injected_delay_ms 20", d)
	}

	// A stall and a failure: held, then failed.
	h.injectFault(map[string]any{"delay_ms": 10, "status": 503})
	mustStatus(t, h.c("POST", "/v1/events", "web", ev("web", 2, nil)), 503, "unavailable")
	if d := h.srv.Decisions(DebugFilter{Limit: 1}); d[0].Reason != reasonInjected || d[0].InjectedDelayMS != 10 {
		t.Fatalf("got decision %+v, want injected_fault held 10 ms", d[0])
	}
}

// A request stalled for long does not answer while its fault holds it,
// and a client that gives up releases it: the server goes on instead of
// holding the handler for the whole delay.
func TestInjectedDelayHoldsUntilTheClientLeaves(t *testing.T) {
	t.Parallel()
	h, _ := devHarness(t)
	h.injectFault(map[string]any{"delay_ms": 30000})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		body, _ := json.Marshal(ev("web", 1, nil))
		req, _ := http.NewRequestWithContext(ctx, "POST", h.collector.URL+"/v1/events", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer web")
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	eventually(t, "the request to take the fault", func() bool { return len(h.pendingFaults("")) == 0 })
	select {
	case err := <-done:
		t.Fatalf("got an answer (err %v) while the fault holds the request, want none", err)
	default:
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatalf("got an answer, want the client's cancellation")
	}
	eventually(t, "the stalled request's decision", func() bool {
		d := h.srv.Decisions(DebugFilter{})
		return len(d) == 1 && d[0].InjectedDelayMS == 30000
	})
}

// A fault with site_id fails only that site's requests; a site's own
// fault goes before the one for any site.
func TestInjectedFaultSiteFilter(t *testing.T) {
	t.Parallel()
	h, _ := devHarness(t)
	h.setupTenant("bravo", "other")
	h.injectFault(map[string]any{"status": 503, "site_id": "web"})
	intake(t, h.c("POST", "/v1/events", "other", ev("other", 1, nil)))
	mustStatus(t, h.c("POST", "/v1/events", "web", ev("web", 1, nil)), 503, "unavailable")
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, nil)))

	h.injectFault(map[string]any{"status": 500})
	h.injectFault(map[string]any{"status": 429, "site_id": "web"})
	got := h.pendingFaults("")
	if len(got) != 2 || got[0].SiteID != "" || got[1].SiteID != "web" || got[1].RetryAfter != 1 {
		t.Fatalf("got pending %+v, want the one for any site, then web's with retry_after 1", got)
	}
	if only := h.pendingFaults("?site_id=web"); len(only) != 1 || only[0].Status != 429 {
		t.Fatalf("got web's pending %+v, want its 429 only", only)
	}
	mustStatus(t, h.c("POST", "/v1/events", "web", ev("web", 2, nil)), 429, "rate_limited")
	mustStatus(t, h.c("POST", "/v1/events", "web", ev("web", 2, nil)), 500, "internal")
	intake(t, h.c("POST", "/v1/events", "other", ev("other", 2, nil)))
}

// The fault step comes after the credential: a request refused there
// takes no share of the fault.
func TestInjectedFaultComesAfterTheCredential(t *testing.T) {
	t.Parallel()
	h, _ := devHarness(t)
	h.injectFault(map[string]any{"status": 503})
	mustStatus(t, h.c("POST", "/v1/events", "nope", ev("nope", 1, nil)), 401, "unauthorized")
	if got := h.pendingFaults(""); len(got) != 1 || got[0].Remaining != 1 {
		t.Fatalf("got pending %+v after a refused credential, want the fault untouched", got)
	}
}

// DELETE clears every fault, or only site_id's; POST replaces a site's
// fault; the dev reset clears them too.
func TestInjectedFaultClear(t *testing.T) {
	t.Parallel()
	h, _ := devHarness(t)
	h.injectFault(map[string]any{"status": 503, "count": 5})
	h.injectFault(map[string]any{"status": 502, "count": 5, "site_id": "web"})
	h.injectFault(map[string]any{"status": 500, "count": 7, "site_id": "web"})
	if got := h.pendingFaults("?site_id=web"); len(got) != 1 || got[0].Status != 500 || got[0].Remaining != 7 {
		t.Fatalf("got %+v, want the second POST to replace web's fault", got)
	}
	r := h.q("DELETE", "/v1/debug/faults?site_id=web", "", nil)
	mustStatus(t, r, 200, "")
	if got := h.pendingFaults(""); len(got) != 1 || got[0].SiteID != "" {
		t.Fatalf("got %+v after deleting web's fault, want the one for any site left", got)
	}
	mustStatus(t, h.q("DELETE", "/v1/debug/faults", "", nil), 200, "")
	if got := h.pendingFaults(""); len(got) != 0 {
		t.Fatalf("got %+v after DELETE, want none", got)
	}
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, nil)))

	h.injectFault(map[string]any{"status": 503, "count": 5})
	mustStatus(t, h.q("POST", "/v1/debug/reset", "", "{}"), 200, "")
	if got := h.pendingFaults(""); len(got) != 0 {
		t.Fatalf("got %+v after the reset, want none", got)
	}
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, nil)))
}

// Every field of a fault is checked, each problem named by its pointer;
// the endpoints are guarded as the reset is.
func TestInjectedFaultValidation(t *testing.T) {
	t.Parallel()
	h, _ := devHarness(t)
	for _, tt := range []struct {
		name    string
		body    any
		headers []string
		status  int
		code    string
		paths   string
	}{
		{"empty object", "{}", nil, 400, "invalid_fault", ""},
		{"status 404", `{"status":404}`, nil, 400, "invalid_fault", "/status"},
		{"status 200", `{"status":200}`, nil, 400, "invalid_fault", "/status"},
		{"status as a string", `{"status":"503"}`, nil, 400, "invalid_fault", "/status"},
		{"count 0", `{"status":503,"count":0}`, nil, 400, "invalid_fault", "/count"},
		{"count 1001", `{"status":503,"count":1001}`, nil, 400, "invalid_fault", "/count"},
		{"count 1.5", `{"status":503,"count":1.5}`, nil, 400, "invalid_fault", "/count"},
		{"delay over 30 s", `{"delay_ms":30001}`, nil, 400, "invalid_fault", "/delay_ms"},
		{"negative delay", `{"delay_ms":-1}`, nil, 400, "invalid_fault", "/delay_ms"},
		{"retry_after without status", `{"delay_ms":10,"retry_after":1}`, nil, 400, "invalid_fault", "/retry_after"},
		{"retry_after too long", `{"status":429,"retry_after":3601}`, nil, 400, "invalid_fault", "/retry_after"},
		{"unknown field", `{"status":503,"times":3}`, nil, 400, "invalid_fault", "/times"},
		{"unknown site", `{"status":503,"site_id":"nope"}`, nil, 400, "invalid_fault", "/site_id"},
		{"site_id a number", `{"status":503,"site_id":7}`, nil, 400, "invalid_fault", "/site_id"},
		{"every problem at once", `{"status":1,"count":0,"x":1}`, nil, 400, "invalid_fault", "/count /status /x"},
		{"not an object", `[{"status":503}]`, nil, 400, "invalid_json", ""},
		{"no content type", nil, []string{"Content-Type", ""}, 415, "unsupported_media_type", ""},
		{"form", "status=503", []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "unsupported_media_type", ""},
		{"foreign Origin", `{"status":503}`, []string{"Origin", "https://evil.example"}, 403, "forbidden", ""},
		{"foreign host", `{"status":503}`, []string{"Host", "evil.example"}, 403, "forbidden", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := h.q("POST", "/v1/debug/faults", "", tt.body, tt.headers...)
			mustStatus(t, r, tt.status, tt.code)
			if tt.code == "invalid_fault" {
				var env struct {
					Error errorFields `json:"error"`
				}
				_ = json.Unmarshal(r.body, &env)
				var paths []string
				for _, d := range env.Error.Details {
					paths = append(paths, d.Path)
				}
				if got := strings.Join(paths, " "); got != tt.paths || len(paths) == 0 {
					t.Fatalf("got details %+v, want paths %q", env.Error.Details, tt.paths)
				}
			}
			if got := h.pendingFaults(""); len(got) != 0 {
				t.Fatalf("got pending %+v after a refused fault, want none", got)
			}
		})
	}
	for _, tt := range []struct {
		name    string
		headers []string
	}{
		{"foreign Origin", []string{"Origin", "https://evil.example"}},
		{"foreign host", []string{"Host", "evil.example"}},
	} {
		t.Run("DELETE from a "+tt.name, func(t *testing.T) {
			h.injectFault(map[string]any{"status": 503})
			mustStatus(t, h.q("DELETE", "/v1/debug/faults", "", nil, tt.headers...), 403, "forbidden")
			if got := h.pendingFaults(""); len(got) != 1 {
				t.Fatalf("got pending %+v after a refused DELETE, want the fault kept", got)
			}
			mustStatus(t, h.q("DELETE", "/v1/debug/faults", "", nil), 200, "")
		})
	}
	mustStatus(t, h.q("GET", "/v1/debug/faults", "", nil, "Host", "evil.example"), 403, "forbidden")
	// Bounds are inclusive.
	h.injectFault(map[string]any{"status": 429, "count": 1000, "retry_after": 3600, "delay_ms": 30000, "site_id": nil})
	if got := h.pendingFaults(""); len(got) != 1 || got[0] != (pendingFault{Status: 429, RetryAfter: 3600, DelayMS: 30000, Remaining: 1000}) {
		t.Fatalf("got pending %+v, want the fault at its bounds", got)
	}
}

// Outside dev mode there are no fault endpoints, and nothing can set one.
func TestDebugFaultsAndSitesOnlyInDevMode(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	for _, r := range []response{
		h.q("POST", "/v1/debug/faults", "", map[string]any{"status": 503}),
		h.q("GET", "/v1/debug/faults", "", nil),
		h.q("DELETE", "/v1/debug/faults", "", nil),
		h.q("POST", "/v1/debug/sites", "", map[string]any{}),
		h.q("DELETE", "/v1/debug/sites/web", "", nil),
	} {
		if r.status != 404 {
			t.Fatalf("got %d %s, want 404 outside dev mode", r.status, r.body)
		}
	}
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, nil)))
	if got := h.count(`SELECT COUNT(*) FROM sites`); got != 1 {
		t.Fatalf("got %d sites, want 1", got)
	}
}

// The fault step with nothing pending: one atomic load.
func BenchmarkInjectedFaultIdle(b *testing.B) {
	var fi faultInjector
	for b.Loop() {
		if _, ok := fi.take("web"); ok {
			b.Fatal("got a fault, want none")
		}
	}
}

// A reset of one site forgets that site's pending faults, and only its.
func TestSiteResetClearsItsFaults(t *testing.T) {
	t.Parallel()
	h, _ := devHarness(t)
	a, b := h.newThrowAwaySite(nil), h.newThrowAwaySite(nil)
	h.injectFault(map[string]any{"status": 503, "count": 5, "site_id": a.SiteID})
	h.injectFault(map[string]any{"status": 503, "count": 5, "site_id": b.SiteID})
	mustStatus(t, h.q("POST", "/v1/debug/reset", "", map[string]any{"site_id": a.SiteID}, "Content-Type", "application/json"), 200, "")
	got := h.pendingFaults("")
	if len(got) != 1 || got[0].SiteID != b.SiteID {
		t.Fatalf("got pending %+v after resetting %s, want only %s's fault", got, a.SiteID, b.SiteID)
	}
}
