package sdktest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tally-analytics/tally/internal/chromiumtest"
	"github.com/tally-analytics/tally/server/servertest"
)

// browser is chromium headless for one test (chromiumtest.Browser).
func browser(t *testing.T) context.Context { return chromiumtest.Browser(t) }

// The browser tests share one chromium, each in a browser context of its
// own (chromiumtest.Main).
func TestMain(m *testing.M) { chromiumtest.Main(m) }

// sdkPages serves, on an origin other than the collector's, test pages
// that load analytics-next's browser build from node_modules (no CDN):
// /standard.html sends each event on its own request, /batched.html uses
// the SDK's batching delivery strategy, both with the settings inline;
// /settings.html names only the collector, as cdnURL.
func sdkPages(t *testing.T, collector, writeKey string) *httptest.Server {
	t.Helper()
	bundles := filepath.Join(nodeModules(t, "@segment/analytics-next"), "dist", "umd")
	tmpl, err := os.ReadFile(filepath.Join("testdata", "analytics-next.html"))
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(collector)
	if err != nil {
		t.Fatal(err)
	}
	page := func(loadArgs string) string {
		return strings.NewReplacer("{{LOAD_ARGS}}", loadArgs).Replace(string(tmpl))
	}
	inline := func(delivery string) string {
		return `{ writeKey: "` + writeKey + `", cdnSettings: { integrations: { "Segment.io": { apiKey: "` + writeKey + `" } }, metrics: { sampleRate: 0 } } },
			{ integrations: { "Segment.io": { apiHost: "` + u.Host + `/v1", protocol: "http", deliveryStrategy: ` + delivery + ` } } }`
	}
	pages := map[string]string{
		"/standard.html": page(inline(`{ strategy: "standard", config: {} }`)),
		"/batched.html":  page(inline(`{ strategy: "batching", config: { size: 3, timeout: 300 } }`)),
		"/settings.html": page(`{ writeKey: "` + writeKey + `", cdnURL: "` + collector + `" }`),
	}
	mux := http.NewServeMux()
	mux.Handle("/analytics-next/bundles/", http.StripPrefix("/analytics-next/bundles/", http.FileServer(http.Dir(bundles))))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(body))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// browserRequest is one request the page's SDK made, as the page's fetch
// wrapper recorded it.
type browserRequest struct {
	URL     string            `json:"url"`
	Method  string            `json:"method"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	Status  int               `json:"status"`
	// RetryAfter is the answer's Retry-After as the page's script sees it
	// (null unless the collector exposes it to other origins).
	RetryAfter *string `json:"retryAfter"`
	Error      string  `json:"error"`
}

// openPage opens pageURL and starts script (a JavaScript function of the
// SDK's analytics object) in it.
func openPage(t *testing.T, ctx context.Context, pageURL, script string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(pageURL)); err != nil {
		t.Fatalf("%s: %v", pageURL, err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.run(`+script+`), true`)); err != nil {
		t.Fatalf("%s: %v", pageURL, err)
	}
}

// sentRequests returns the requests the page's SDK has made so far.
func sentRequests(t *testing.T, ctx context.Context) []browserRequest {
	t.Helper()
	sentJSON, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(window.sent)`))
	if err != nil {
		t.Fatal(err)
	}
	var sent []browserRequest
	if err := json.Unmarshal([]byte(sentJSON), &sent); err != nil {
		t.Fatal(err)
	}
	return sent
}

// runPage opens pageURL, runs script in it, waits until the SDK has made
// n requests and had every answer, and returns them.
func runPage(t *testing.T, ctx context.Context, pageURL, script string, n int) []browserRequest {
	t.Helper()
	openPage(t, ctx, pageURL, script)
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](
		`window.sent.length >= `+strconv.Itoa(n)+` && window.sent.every(function (s) { return s.status !== 0; })`,
		chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil {
		t.Fatalf("%s: %v; the SDK's requests so far: %+v", pageURL, err, sentRequests(t, ctx))
	}
	sent := sentRequests(t, ctx)
	if len(sent) != n {
		t.Fatalf("%s: got %d requests, want %d: %+v", pageURL, len(sent), n, sent)
	}
	return sent
}

// TestSegmentBrowserSDK loads Segment's browser SDK (@segment/analytics-next,
// its UMD build) in Debian's chromium, pointed at the collector with the
// site id as write key, once sending each call on its own request and once
// in batches, then reads the events back through the database, the reads,
// breakdown and timeline, and the GDPR export.
func TestSegmentBrowserSDK(t *testing.T) {
	ctx := browser(t)
	srv := servertest.New(t)
	pages := sdkPages(t, srv.CollectorURL, srv.SiteID)

	// Each call on its own request: /v1/p, /v1/t, /v1/i, /v1/g, /v1/s, /v1/a.
	standard := runPage(t, ctx, pages.URL+"/standard.html", `async function (a) {
		a.setAnonymousId("anon-browser-1");
		await a.page();
		await a.track("Order Completed", {revenue: 49, currency: "EUR"});
		await a.identify("u-browser-1", {plan: "pro"});
		await a.group("g-1", {name: "Acme"});
		await a.screen("Basket");
		await a.alias("u-browser-1", "old-anon-browser");
	}`, 6)
	// Batched: five calls in two /v1/b requests of three and two.
	batched := runPage(t, ctx, pages.URL+"/batched.html?utm_source=news", `async function (a) {
		a.setAnonymousId("anon-browser-2");
		a.page();
		a.track("Product Viewed", {sku: "A-1"});
		a.track("Product Viewed", {sku: "B-2"});
		a.identify("u-browser-2", {plan: "free"});
		a.alias("u-browser-2", "old-anon-browser-2");
	}`, 2)

	var messages []sent
	wantPaths := []string{"/v1/p", "/v1/t", "/v1/i", "/v1/g", "/v1/s", "/v1/a"}
	for i, r := range standard {
		u, _ := url.Parse(r.URL)
		if r.Status != 200 || u.Path != wantPaths[i] || !strings.HasPrefix(r.Headers["Authorization"], "Basic ") {
			t.Errorf("request %d: got %s %s (Authorization %q) answered %d, want POST %s with Basic auth answered 200",
				i, r.Method, r.URL, r.Headers["Authorization"], r.Status, wantPaths[i])
		}
		messages = append(messages, parseSent(t, json.RawMessage(r.Body)))
	}
	sizes := []int{3, 2}
	for i, r := range batched {
		u, _ := url.Parse(r.URL)
		var body struct {
			Batch []json.RawMessage `json:"batch"`
		}
		if err := json.Unmarshal([]byte(r.Body), &body); err != nil {
			t.Fatalf("batch body %s: %v", r.Body, err)
		}
		if r.Status != 200 || u.Path != "/v1/b" || len(body.Batch) != sizes[i] {
			t.Errorf("batch %d: got %s with %d messages answered %d, want /v1/b with %d answered 200", i, r.URL, len(body.Batch), r.Status, sizes[i])
		}
		for _, raw := range body.Batch {
			messages = append(messages, parseSent(t, raw))
		}
	}

	events := srv.MustWaitEvents(t, 11, 30*time.Second)
	if len(events) != 11 {
		t.Fatalf("got %d events, want 11", len(events))
	}
	checkMapping(t, srv.SiteID, messages, events)
	for _, e := range events {
		if deref(e.Browser) != "Chrome" || deref(e.OS) != "Linux" || deref(e.DeviceType) != "desktop" {
			t.Errorf("event %s (%s): got %s/%s/%s, want Chrome/Linux/desktop from context.userAgent",
				e.ID, e.Type, deref(e.Browser), deref(e.OS), deref(e.DeviceType))
		}
	}

	q := api{t: t, base: srv.QueryURL, token: srv.AdminToken}
	site := "/v1/sites/" + srv.SiteID
	var counts eventCounts
	q.get(site+"/events?"+dateRange(), &counts)
	for name, want := range map[string]int64{"pageview": 2, "Order Completed": 1, "Product Viewed": 2, "identify": 2, "alias": 2, "group": 1, "screen": 1} {
		if got := counts.of(name); got != want {
			t.Errorf("events read, %q: got %d, want %d (all: %+v)", name, got, want, counts.ByName)
		}
	}
	var b breakdown
	q.get(site+"/breakdown?dimension=url&"+dateRange(), &b)
	if b.of(pages.URL+"/standard.html") != 1 || b.of(pages.URL+"/batched.html") != 1 {
		t.Errorf("breakdown by url: got %+v, want each page once, without its query string", b.Rows)
	}

	for _, user := range []struct{ id, anon, old string }{
		{"u-browser-1", "anon-browser-1", "old-anon-browser"},
		{"u-browser-2", "anon-browser-2", "old-anon-browser-2"},
	} {
		var tl timeline
		q.get(site+"/users/"+user.id+"/timeline", &tl)
		for _, e := range tl.Events {
			if e.AnonID != user.anon && !(e.Type == "alias" && e.AnonID == user.old) {
				t.Errorf("timeline of %s: got a %s of %q, want only %q's events and the alias of %q", user.id, e.Type, e.AnonID, user.anon, user.old)
			}
		}
		var x subjectExport
		q.post(site+"/gdpr/export", map[string]any{"subject": map[string]string{"user_id": user.id}}, &x)
		if int(x.Counts.Events) != len(tl.Events) || len(tl.Events) == 0 {
			t.Errorf("%s: got %d events exported and %d in the timeline, want the same, more than 0", user.id, x.Counts.Events, len(tl.Events))
		}
		if !x.linked(user.anon, user.id) || !x.linked(user.old, user.id) {
			t.Errorf("%s: got identity links %+v, want %s (identify) and %s (alias)", user.id, x.IdentityLinks, user.anon, user.old)
		}
		if len(x.UserProfiles) != 1 || x.UserProfiles[0].Traits["plan"] == nil {
			t.Errorf("%s: got profiles %+v, want the identify traits", user.id, x.UserProfiles)
		}
	}
}

// TestSegmentBrowserSDKRetriesRateLimited makes the collector answer 429
// to part of a page's calls: the page can read Retry-After (the collector
// exposes it to other origins), Segment's browser SDK retries, its retries
// carrying X-Retry-Count, a header the collector's CORS preflight must
// allow, and every event arrives once.
func TestSegmentBrowserSDKRetriesRateLimited(t *testing.T) {
	ctx := browser(t)
	srv := servertest.New(t, servertest.WithRateLimit(1)) // a bucket of 2 events
	pages := sdkPages(t, srv.CollectorURL, srv.SiteID)

	openPage(t, ctx, pages.URL+"/standard.html", `async function (a) {
		a.setAnonymousId("anon-retry");
		for (let i = 0; i < 6; i++) a.track("Step " + i);
	}`)
	events := srv.MustWaitEvents(t, 6, 30*time.Second)
	// The collector commits before the page sees the answer: wait for it.
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`window.sent.every(function (s) { return s.status !== 0; })`,
		chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("the SDK's requests never all got an answer: %v %+v", err, sentRequests(t, ctx))
	}
	sent := sentRequests(t, ctx)
	limited, retried := 0, 0
	for _, r := range sent {
		if r.Status == http.StatusTooManyRequests {
			limited++
			if r.RetryAfter == nil {
				t.Errorf("a 429 to %s: the page cannot read its Retry-After, so the SDK cannot wait as told", r.URL)
			}
		}
		if r.Headers["X-Retry-Count"] != "" && r.Status == 200 {
			retried++
		}
	}
	if limited == 0 || retried == 0 {
		t.Fatalf("got %d answers 429 and %d retries delivered, want both (the test needs the limit to bite): %+v", limited, retried, sent)
	}
	seen := map[string]int{}
	for _, e := range events {
		seen[e.Type]++
	}
	for i := 0; i < 6; i++ {
		if name := "Step " + strconv.Itoa(i); seen[name] != 1 {
			t.Errorf("%q: got %d stored, want 1 (all: %v)", name, seen[name], seen)
		}
	}
}

// TestSegmentBrowserSDKSettingsFromCollector loads Segment's browser SDK
// with only cdnURL = the collector: it fetches its settings document from
// the collector, which names the collector as where to send, and its
// events arrive.
func TestSegmentBrowserSDKSettingsFromCollector(t *testing.T) {
	ctx := browser(t)
	srv := servertest.New(t)
	pages := sdkPages(t, srv.CollectorURL, srv.SiteID)

	sent := runPage(t, ctx, pages.URL+"/settings.html", `async function (a) {
		a.setAnonymousId("anon-settings");
		await a.track("Order Completed", {revenue: 49});
	}`, 2)
	wantURLs := []string{srv.CollectorURL + "/v1/projects/" + srv.SiteID + "/settings", srv.CollectorURL + "/v1/t"}
	for i, r := range sent {
		if r.URL != wantURLs[i] || r.Status != 200 {
			t.Errorf("request %d: got %s answered %d, want %s answered 200", i, r.URL, r.Status, wantURLs[i])
		}
	}
	events := srv.MustWaitEvents(t, 1, 30*time.Second)
	if events[0].Type != "Order Completed" || events[0].AnonID != "anon-settings" {
		t.Fatalf("got %+v, want the Order Completed of anon-settings", events[0])
	}
}
