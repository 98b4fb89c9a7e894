package server

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	analytics "github.com/segmentio/analytics-go/v3"
)

// sdkCallback records what the analytics-go client delivered.
type sdkCallback struct {
	mu        sync.Mutex
	delivered int
	failures  []error
}

func (c *sdkCallback) Success(analytics.Message) {
	c.mu.Lock()
	c.delivered++
	c.mu.Unlock()
}

func (c *sdkCallback) Failure(_ analytics.Message, err error) {
	c.mu.Lock()
	c.failures = append(c.failures, err)
	c.mu.Unlock()
}

// sdkLogger sends the client's own log lines to the test log.
type sdkLogger struct{ t *testing.T }

func (l sdkLogger) Logf(format string, args ...any) { l.t.Logf("analytics-go: "+format, args...) }
func (l sdkLogger) Errorf(format string, args ...any) {
	l.t.Logf("analytics-go error: "+format, args...)
}

// TestSegmentAnalyticsGo sends through Segment's own Go client, pointed at
// the collector with the site id as write key, then reads the events back
// through the query API and the database.
func TestSegmentAnalyticsGo(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "shop")
	cb := &sdkCallback{}
	client, err := analytics.NewWithConfig("shop", analytics.Config{
		Endpoint:  h.collector.URL,
		BatchSize: 5, // the messages below make three batches
		Verbose:   false,
		Callback:  cb,
		Logger:    sdkLogger{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := &analytics.Context{UserAgent: chromeUA, Page: analytics.PageInfo{Referrer: "https://news.test/item"}}
	msgs := []analytics.Message{
		analytics.Alias{PreviousId: "anon-1", UserId: "user-1"},
		analytics.Identify{UserId: "user-1", Traits: analytics.NewTraits().SetEmail("ada@example.test").Set("plan", "pro")},
		analytics.Page{AnonymousId: "anon-1", Name: "Pricing", Context: ctx,
			Properties: analytics.NewProperties().SetURL("https://shop.test/pricing")},
		analytics.Track{UserId: "user-1", Event: "Order Completed", Context: ctx,
			Properties: analytics.NewProperties().SetRevenue(49).SetCurrency("EUR")},
	}
	for i := range 8 {
		msgs = append(msgs, analytics.Track{AnonymousId: "anon-1", UserId: "user-1", Event: "Product Viewed", Context: ctx,
			Properties: analytics.NewProperties().Set("n", i)})
	}
	for _, m := range msgs {
		if err := client.Enqueue(m); err != nil {
			t.Fatalf("enqueue: %v", err)
		}
	}
	// Close flushes every batch and returns once each was delivered or given up.
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	if cb.delivered != len(msgs) || len(cb.failures) > 0 {
		t.Fatalf("got %d delivered, failures %v, want %d delivered", cb.delivered, cb.failures, len(msgs))
	}

	// The database: every message, once, with the mapping's fields.
	if n := h.count(`SELECT COUNT(*) FROM events WHERE site_id = 'shop'`); n != len(msgs) {
		t.Fatalf("got %d events, want %d", n, len(msgs))
	}
	if n := h.count(`SELECT COUNT(*) FROM identity_links WHERE site_id = 'shop' AND anon_id = 'anon-1' AND user_id = 'user-1'`); n != 1 {
		t.Errorf("got %d identity links, want 1", n)
	}
	var traits string
	h.sqlDB().QueryRow(`SELECT traits FROM user_profiles WHERE site_id = 'shop' AND user_id = 'user-1'`).Scan(&traits)
	if !strings.Contains(traits, `"plan":"pro"`) {
		t.Errorf("got traits %s, want the identify's", traits)
	}
	var raw string
	for _, e := range h.events("shop") {
		if e.Type == "Order Completed" {
			raw = e.Raw.String
		}
	}
	// raw is the message's own bytes: the batch's context (the client's
	// library) is merged for the mapping, not into raw.
	if !strings.Contains(raw, `"revenue":49`) || strings.Contains(raw, `"library"`) {
		t.Errorf("got raw %s, want the message as the client sent it", raw)
	}

	// The query API: reads, breakdown, timeline, GDPR export.
	get := func(path string) string {
		t.Helper()
		r := h.q("GET", path, tn.readKey, nil)
		mustStatus(t, r, 200, "")
		return string(r.body)
	}
	day := "from=2026-01-31&to=2026-01-31"
	if got := fmt.Sprint(h.q("GET", "/v1/sites/shop/events?"+day, tn.readKey, nil).json(t)["by_name"]); got !=
		"[map[count:8 name:Product Viewed] map[count:1 name:Order Completed] map[count:1 name:alias] map[count:1 name:identify] map[count:1 name:pageview]]" {
		t.Errorf("events by name: got %s", got)
	}
	if got := get("/v1/sites/shop/pageviews?" + day); !strings.Contains(got, `"count":1`) {
		t.Errorf("pageviews: got %s, want 1", got)
	}
	// One session per anon id: anon-1 (the page, the alias and the tracks with an
	// anonymousId) and user-1 (the identify and the track with only a userId).
	if got := h.count(`SELECT COUNT(*) FROM sessions WHERE site_id = 'shop'`); got == 0 {
		t.Errorf("got no sessions, want the messages' sessions")
	}
	if got := get("/v1/sites/shop/sessions?" + day); !strings.Contains(got, `"count":2`) {
		t.Errorf("sessions: got %s, want 2 (anon-1 and user-1)", got)
	}
	for dim, want := range map[string]string{"url": `"value":"https://shop.test/pricing"`, "referrer": `"value":"news.test"`, "browser": `"value":"Chrome"`} {
		if got := get("/v1/sites/shop/breakdown?dimension=" + dim + "&" + day); !strings.Contains(got, want) {
			t.Errorf("breakdown by %s: got %s, want %s", dim, got, want)
		}
	}
	if got := get("/v1/sites/shop/users/user-1/timeline"); !strings.Contains(got, `"type":"Order Completed"`) || !strings.Contains(got, `"type":"pageview"`) {
		t.Errorf("timeline: got %s, want the user's track and the page of the anon id it was aliased from", got)
	}
	r := h.q("POST", "/v1/sites/shop/gdpr/export", tn.adminKey, map[string]any{"subject": map[string]any{"user_id": "user-1"}})
	mustStatus(t, r, 200, "")
	if got := string(r.body); !strings.Contains(got, "Order Completed") || !strings.Contains(got, "ada@example.test") {
		t.Errorf("GDPR export: got %s, want the user's events and traits", got)
	}
}

// TestSegmentAnalyticsGoRetries has the collector answer the client 429
// (rate limit) and checks that the client's retry delivers every message
// once: the client's backoff advances the test clock instead of sleeping.
func TestSegmentAnalyticsGoRetries(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.RateLimit = 2 }) // burst 4
	h.setupTenant("acme", "shop")
	cb := &sdkCallback{}
	var mu sync.Mutex
	retries := 0
	client, err := analytics.NewWithConfig("shop", analytics.Config{
		Endpoint:  h.collector.URL,
		BatchSize: 4,
		Callback:  cb,
		Logger:    sdkLogger{t},
		RetryAfter: func(int) time.Duration {
			mu.Lock()
			retries++
			mu.Unlock()
			h.clock.Advance(2 * time.Second)
			return time.Millisecond
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		if err := client.Enqueue(analytics.Track{AnonymousId: "a", Event: "Tick", Properties: analytics.NewProperties().Set("n", i)}); err != nil {
			t.Fatal(err)
		}
	}
	// Close would drop a batch waiting for its retry: wait for delivery first
	// (three full batches go out without waiting for the flush interval).
	eventually(t, "every message delivered", func() bool {
		cb.mu.Lock()
		defer cb.mu.Unlock()
		return cb.delivered == 12 || len(cb.failures) > 0
	})
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	if cb.delivered != 12 || len(cb.failures) > 0 || retries == 0 {
		t.Fatalf("got %d delivered, %d retries, failures %v, want 12 delivered after a retry", cb.delivered, retries, cb.failures)
	}
	if n := h.count(`SELECT COUNT(*) FROM events WHERE site_id = 'shop'`); n != 12 {
		t.Errorf("got %d events, want 12", n)
	}
}
