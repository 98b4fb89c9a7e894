package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/tally-analytics/tally/storage"
)

// getAsync sends GET url from another goroutine and delivers the answer.
func getAsync(ctx context.Context, url string) <-chan response {
	out := make(chan response, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- response{status: -1, body: []byte(err.Error())}
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		out <- response{status: res.StatusCode, header: res.Header, body: b}
	}()
	return out
}

// A read with min and wait answers as soon as min decisions match: the
// test waits until the request is waiting, sends the events, and gets
// them, never sleeping.
func TestDebugWaitAnswersWhenDecisionsArrive(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.DebugFeedSize = 100 })
	h.setupTenant("acme", "web")
	h.setupTenant("other", "shop")
	list := getAsync(context.Background(), h.query.URL+"/v1/debug/decisions?site_id=web&type=purchase&min=2&wait=30s")
	summary := getAsync(context.Background(), h.query.URL+"/v1/debug/summary?site_id=web&min=3&wait=30")
	eventually(t, "two waiting reads", func() bool { return h.srv.feed.waiting() == 2 })

	// Decisions that do not match wake the reads, which go on waiting.
	intake(t, h.c("POST", "/v1/events", "shop", ev("shop", 1, map[string]any{"type": "purchase"})))
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 2, nil)))
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 3, map[string]any{"type": "purchase"})))
	if got := h.srv.feed.waiting(); got != 2 {
		t.Fatalf("got %d waiting reads after 1 matching decision of 2, want 2", got)
	}
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 4, map[string]any{"type": "purchase"})))

	r := <-list
	mustStatus(t, r, 200, "")
	var a decisionsAnswer
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatal(err)
	}
	if len(a.Decisions) != 2 || a.Decisions[0].EventID != eventID(4) || a.Decisions[1].EventID != eventID(3) {
		t.Errorf("got %d decisions (%+v), want events 4 and 3", len(a.Decisions), a.Decisions)
	}
	r = <-summary
	mustStatus(t, r, 200, "")
	var s debugSummary
	if err := json.Unmarshal(r.body, &s); err != nil {
		t.Fatal(err)
	}
	if s.Total != 3 || s.Accepted != 3 {
		t.Errorf("got summary %+v, want the 3 accepted events of web", s)
	}
}

// A wait that ends answers what exists, 200; so does one whose client
// goes away, which stops waiting at once.
func TestDebugWaitEnds(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.DebugFeedSize = 100 })
	h.setupTenant("acme", "web")
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, nil)))
	r := h.q("GET", "/v1/debug/decisions?site_id=web&min=2&wait=20ms", "", nil)
	mustStatus(t, r, 200, "")
	if got := len(r.json(t)["decisions"].([]any)); got != 1 {
		t.Errorf("got %d decisions when the wait ended, want the 1 that exists", got)
	}
	if got := summaryOf(t, h, "?min=5&wait=0.02"); got.Total != 1 {
		t.Errorf("got summary total %d when the wait ended, want 1", got.Total)
	}

	ctx, cancel := context.WithCancel(context.Background())
	gone := getAsync(ctx, h.query.URL+"/v1/debug/decisions?min=5&wait=30s")
	eventually(t, "a waiting read", func() bool { return h.srv.feed.waiting() == 1 })
	cancel()
	<-gone
	eventually(t, "the wait of a cancelled request to end", func() bool { return h.srv.feed.waiting() == 0 })
}

func TestDebugWaitParameters(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.DebugFeedSize = 100 })
	for _, tt := range []struct {
		query  string
		status int
	}{
		{"wait=30.5s", 400}, {"wait=31", 400}, {"wait=1m", 400}, {"wait=-1s", 400}, {"wait=soon", 400},
		{"wait=NaN", 400}, {"wait=1e400", 400}, {"min=1", 400}, {"min=0&wait=1ms", 400},
		{"min=101&wait=1ms", 400}, {"min=x&wait=1ms", 400},
		{"wait=0", 200}, {"wait=1ms", 200}, {"wait=0.001", 200}, {"min=100&wait=1ms", 200},
	} {
		r := h.q("GET", "/v1/debug/decisions?"+tt.query, "", nil)
		code := ""
		if tt.status == 400 {
			code = "invalid_wait"
		}
		mustStatus(t, r, tt.status, code)
	}
	// The cap itself is accepted: a read waiting 30 s is answered at once
	// when its decision arrives.
	h.setupTenant("acme", "web")
	capped := getAsync(context.Background(), h.query.URL+"/v1/debug/decisions?wait=30s")
	eventually(t, "a waiting read", func() bool { return h.srv.feed.waiting() == 1 })
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, nil)))
	mustStatus(t, <-capped, 200, "")
}

// Shutting down ends the waits: a stopping server answers its waiting
// reads at once rather than holding them for up to 30 s.
func TestDebugWaitEndsAtShutdown(t *testing.T) {
	t.Parallel()
	db, err := openTestDB(t, context.Background(), storage.Options{Path: ":memory:"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	inst, err := Listen(Config{DebugFeedSize: 10, Logger: discardLogger()}, db, "127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	waiting := getAsync(context.Background(), inst.QueryURL+"/v1/debug/decisions?wait=30s")
	eventually(t, "a waiting read", func() bool { return inst.Server.feed.waiting() == 1 })
	// Without the wake-up, Shutdown would wait out the read's 30 s.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := inst.Shutdown(ctx); err != nil {
		t.Fatalf("got %v, want the shutdown to end the wait", err)
	}
	mustStatus(t, <-waiting, 200, "")
}
