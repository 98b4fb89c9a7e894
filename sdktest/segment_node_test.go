package sdktest_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/tally-analytics/tally/server/servertest"
)

// nodeExchange is one line of analytics-node.mjs's output: a request the
// SDK made or the answer it got.
type nodeExchange struct {
	Request *struct {
		URL     string            `json:"url"`
		Method  string            `json:"method"`
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	} `json:"request"`
	Response *struct {
		URL    string `json:"url"`
		Status int    `json:"status"`
	} `json:"response"`
}

// TestSegmentNodeSDK runs Segment's own Node SDK (@segment/analytics-node,
// analytics-node.mjs) against the collector with the site id as write
// key, then reads what it sent back through the database, the query API's
// reads, breakdown and timeline, the GDPR export and the inspection feed.
func TestSegmentNodeSDK(t *testing.T) {
	node := lookPath("node", "nodejs")
	if node == "" {
		need(t, "node is not installed", "apt-get install nodejs npm")
	}
	nodeModules(t, "@segment/analytics-node")
	srv := servertest.New(t)

	cmd := exec.Command(node, "analytics-node.mjs")
	cmd.Env = append(os.Environ(), "TALLY_HOST="+srv.CollectorURL, "TALLY_WRITE_KEY="+srv.SiteID)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("analytics-node.mjs: %v\n%s\n%s\ndecisions: %+v", err, stderr.Bytes(), stdout.Bytes(), srv.Decisions(servertest.Filter{}))
	}

	// What the SDK sent: POST /v1/batch with the write key as the Basic
	// user name and JSON bodies of {batch, writeKey, sentAt}; every answer 200.
	var messages []sent
	requests := 0
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var x nodeExchange
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			t.Fatalf("analytics-node.mjs printed %q: %v", sc.Text(), err)
		}
		switch {
		case x.Request != nil:
			requests++
			u, _ := url.Parse(x.Request.URL)
			if x.Request.Method != "POST" || u.Path != "/v1/batch" || !strings.HasPrefix(x.Request.Headers["Authorization"], "Basic ") {
				t.Errorf("request: got %s %s with Authorization %q, want POST /v1/batch with Basic auth",
					x.Request.Method, x.Request.URL, x.Request.Headers["Authorization"])
			}
			var body struct {
				Batch    []json.RawMessage `json:"batch"`
				WriteKey string            `json:"writeKey"`
			}
			if err := json.Unmarshal([]byte(x.Request.Body), &body); err != nil {
				t.Fatalf("request body %s: %v", x.Request.Body, err)
			}
			for _, raw := range body.Batch {
				messages = append(messages, parseSent(t, raw))
			}
		case x.Response != nil:
			if x.Response.Status != 200 {
				t.Errorf("response to %s: got %d, want 200", x.Response.URL, x.Response.Status)
			}
		}
	}
	if requests != 4 || len(messages) != 8 {
		t.Fatalf("got %d requests with %d messages, want 4 with 8", requests, len(messages))
	}

	// The database: one event per messageId, the resend a duplicate.
	events, err := srv.Events()
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 7 {
		t.Fatalf("got %d events stored, want 7 (8 sent, one a resend); decisions: %+v", len(events), srv.Decisions(servertest.Filter{}))
	}
	byMessage := checkMapping(t, srv.SiteID, messages, events)
	if d := srv.Decisions(servertest.Filter{Outcome: "duplicate"}); len(d) != 1 || d[0].EventID != byMessage["node-fixed-message-1"].ID {
		t.Errorf("duplicates in the feed: got %+v, want the resend of node-fixed-message-1", d)
	}
	for _, d := range srv.Decisions(servertest.Filter{}) {
		if d.Endpoint == "events" || d.Endpoint == "s2s" || d.Endpoint == "" {
			t.Errorf("decision %d: got endpoint %q, want the Segment intake's own label", d.Seq, d.Endpoint)
		}
	}
	var page servertest.Event
	for _, e := range events {
		if e.Type == "pageview" {
			page = e
		}
	}
	if deref(page.Browser) != "Chrome" || deref(page.OS) != "Linux" || deref(page.DeviceType) != "desktop" {
		t.Errorf("pageview enrichment from context.userAgent: got %s/%s/%s, want Chrome/Linux/desktop",
			deref(page.Browser), deref(page.OS), deref(page.DeviceType))
	}

	// The query API.
	q := api{t: t, base: srv.QueryURL, token: srv.AdminToken}
	site := "/v1/sites/" + srv.SiteID
	var counts eventCounts
	q.get(site+"/events?"+dateRange(), &counts)
	for name, want := range map[string]int64{"Order Completed": 1, "Product Viewed": 2, "pageview": 1, "identify": 1, "alias": 1, "screen": 1} {
		if got := counts.of(name); got != want {
			t.Errorf("events read, %q: got %d, want %d (all: %+v)", name, got, want, counts.ByName)
		}
	}
	for dim, want := range map[string]string{"url": "https://shop.example/pricing", "referrer": "search.example", "browser": "Chrome"} {
		var b breakdown
		q.get(site+"/breakdown?dimension="+dim+"&"+dateRange(), &b)
		if b.of(want) != 1 {
			t.Errorf("breakdown by %s: got %+v, want %q counted once", dim, b.Rows, want)
		}
	}
	var sessions struct {
		Count int64 `json:"count"`
	}
	q.get(site+"/sessions?"+dateRange(), &sessions)
	if sessions.Count != 2 {
		t.Errorf("sessions: got %d, want 2 (anon-node-1's, and the alias's old-anon-node)", sessions.Count)
	}
	var tl timeline
	q.get(site+"/users/u-node-1/timeline", &tl)
	seen := map[string]int{}
	for _, e := range tl.Events {
		seen[e.Type]++
	}
	if len(tl.Events) != 7 || seen["Order Completed"] != 1 || seen["Product Viewed"] != 2 || seen["alias"] != 1 {
		t.Errorf("timeline of u-node-1: got %+v, want the 7 events", tl.Events)
	}

	var x subjectExport
	q.post(site+"/gdpr/export", map[string]any{"subject": map[string]string{"user_id": "u-node-1"}}, &x)
	if x.Counts.Events != 7 || len(x.Events) != 7 {
		t.Errorf("GDPR export: got %d events (%d rows), want 7", x.Counts.Events, len(x.Events))
	}
	if len(x.UserProfiles) != 1 || x.UserProfiles[0].Traits["name"] != "Ada" || x.UserProfiles[0].Traits["plan"] != "pro" {
		t.Errorf("GDPR export, profile: got %+v, want the identify traits name=Ada plan=pro", x.UserProfiles)
	}
	if !x.linked("anon-node-1", "u-node-1") || !x.linked("old-anon-node", "u-node-1") {
		t.Errorf("GDPR export, identity links: got %+v, want anon-node-1 (identify, track) and old-anon-node (alias) linked to u-node-1", x.IdentityLinks)
	}
	order := byMessage[messages[2].msg.MessageID]
	for _, e := range x.Events {
		if e.ID == order.ID && !bytes.Contains(e.Raw, []byte(`"revenue":49`)) {
			t.Errorf("GDPR export, Order Completed raw: got %s, want its properties", e.Raw)
		}
	}
}

// TestSegmentNodeSDKRetriesRateLimited makes the collector answer 429 with
// Retry-After to part of the Node SDK's batches: the SDK waits and sends
// them again, and every message is stored once.
func TestSegmentNodeSDKRetriesRateLimited(t *testing.T) {
	node := lookPath("node", "nodejs")
	if node == "" {
		need(t, "node is not installed", "apt-get install nodejs npm")
	}
	nodeModules(t, "@segment/analytics-node")
	srv := servertest.New(t, servertest.WithRateLimit(2)) // a bucket of 4 events: two of the four batches

	cmd := exec.Command(node, "analytics-node.mjs")
	cmd.Env = append(os.Environ(), "TALLY_HOST="+srv.CollectorURL, "TALLY_WRITE_KEY="+srv.SiteID)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("analytics-node.mjs: %v\n%s\n%s", err, stderr.Bytes(), stdout.Bytes())
	}
	if !bytes.Contains(stdout.Bytes(), []byte(`"status":429`)) {
		t.Fatalf("no answer was 429, so the test proved nothing:\n%s", stdout.Bytes())
	}
	events, err := srv.Events()
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 7 {
		t.Fatalf("got %d events stored, want 7; decisions: %+v", len(events), srv.Decisions(servertest.Filter{}))
	}
}
