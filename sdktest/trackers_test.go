package sdktest_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tally-analytics/tally/server/servertest"
)

// umamiTracker is Umami's tracker as the umami package 2.10.0 ships it on
// npm (package/src/tracker/index.js of umami-2.10.0.tgz, whose sha512
// integrity is +lmrnV0751R6U2rkIgVAlE1nWI7yZawlMlJDguW9tlFacCKhnGeCyc7tCMIhNNYIiGIQy4DEX5IzJhm4b3+dPA==),
// copied into testdata because installing the package pulls in Next.js,
// Prisma and the rest of Umami's server (npm install had not finished after
// 25 minutes on the benchmark machine); umamiTrackerSHA256 pins the copy.
const (
	umamiTracker       = "testdata/umami-2.10.0-tracker.js"
	umamiTrackerSHA256 = "eb8ec1e5fd41f1937b3a6a0df92be46f97ca8bfc3baacaa5f70159d5e0df50d1"
)

// umamiWebsiteID is the Umami website id the test site keeps as an alias.
const umamiWebsiteID = "0b5d0e6a-6c7e-4b6e-9a0c-2b8f1c3d4e5f"

// trackerSite gives the servertest site the names Plausible's and Umami's
// trackers call it by (docs/intake.md#plausible--and-umami-compatible-intake).
func trackerSite(t *testing.T, srv *servertest.Server) api {
	q := api{t: t, base: srv.QueryURL, token: srv.AdminToken}
	var site struct {
		Aliases []string `json:"aliases"`
	}
	q.do(http.MethodPatch, "/v1/sites/"+srv.SiteID, map[string]any{"aliases": []string{"shop.example", umamiWebsiteID}}, &site)
	if len(site.Aliases) != 2 {
		t.Fatalf("got aliases %v, want 2", site.Aliases)
	}
	return q
}

// trackerPages serves, on an origin other than the collector's, a page
// loading Plausible's tracker (the npm package's ES module, from
// node_modules) and one loading Umami's (its shipped script), each
// pointed at the collector.
func trackerPages(t *testing.T, collector string) *httptest.Server {
	t.Helper()
	plausible := nodeModules(t, "@plausible-analytics/tracker")
	umami, err := os.ReadFile(umamiTracker)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(umami); hex.EncodeToString(sum[:]) != umamiTrackerSHA256 {
		t.Fatalf("%s: got sha256 %x, want %s (the file as umami 2.10.0 ships it)", umamiTracker, sum, umamiTrackerSHA256)
	}
	tmpl, err := os.ReadFile(filepath.Join("testdata", "trackers.html"))
	if err != nil {
		t.Fatal(err)
	}
	page := func(tracker string) string { return strings.Replace(string(tmpl), "{{TRACKER}}", tracker, 1) }
	pages := map[string]string{
		// The npm package's own usage: init with the site's domain and
		// the collector's /api/event as endpoint.
		"/plausible.html": page(`<script type="module">
  import { init, track } from "/plausible/plausible.js";
  init({ domain: "shop.example", endpoint: "` + collector + `/api/event", captureOnLocalhost: true });
  window.plausibleTrack = track;
</script>`),
		// The snippet Umami documents, with data-host-url naming the
		// collector instead of the host the script came from.
		"/umami.html": page(`<script defer src="/umami/script.js" data-website-id="` + umamiWebsiteID + `" data-host-url="` + collector + `"></script>`),
	}
	mux := http.NewServeMux()
	mux.Handle("/plausible/", http.StripPrefix("/plausible/", http.FileServer(http.Dir(plausible))))
	mux.HandleFunc("/umami/script.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		w.Write(umami)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// An SPA: every path is the page.
		name := "/plausible.html"
		if strings.HasPrefix(r.URL.Path, "/umami") {
			name = "/umami.html"
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(pages[name]))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// trackerRequest is a request a tracker made, with the text of its
// answer.
type trackerRequest struct {
	browserRequest
	Answer string `json:"answer"`
}

// trackerRequests waits until the page has made n requests whose body
// passes keep and had every answer, and returns those.
func trackerRequests(t *testing.T, ctx context.Context, n int, keep string) []trackerRequest {
	t.Helper()
	cond := `window.sent.filter(` + keep + `).length >= ` + strconv.Itoa(n) + ` && window.sent.every(function (s) { return s.status !== 0; })`
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("%v; the tracker's requests so far: %+v", err, sentRequests(t, ctx))
	}
	sentJSON, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(window.sent.filter(`+keep+`))`))
	if err != nil {
		t.Fatal(err)
	}
	var out []trackerRequest
	if err := json.Unmarshal([]byte(sentJSON), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// queryRows runs a query API query and returns its rows as dimension
// values joined by "|" mapped to their metrics.
func queryRows(q api, site string, body map[string]any) map[string][]float64 {
	q.t.Helper()
	body["date_range"] = "all"
	var res struct {
		Results []struct {
			Dimensions []any    `json:"dimensions"`
			Metrics    []metric `json:"metrics"`
		} `json:"results"`
	}
	q.post("/v1/sites/"+site+"/query", body, &res)
	out := map[string][]float64{}
	for _, r := range res.Results {
		var dims []string
		for _, d := range r.Dimensions {
			dims = append(dims, toString(d))
		}
		var ms []float64
		for _, m := range r.Metrics {
			ms = append(ms, float64(m))
		}
		out[strings.Join(dims, "|")] = ms
	}
	return out
}

// metric is a query result's metric: a number, or a revenue metric's
// value ({currency, long, short, value}, as Plausible's API answers it).
type metric float64

func (m *metric) UnmarshalJSON(b []byte) error {
	var money struct {
		Value float64 `json:"value"`
	}
	if len(b) > 0 && b[0] == '{' {
		err := json.Unmarshal(b, &money)
		*m = metric(money.Value)
		return err
	}
	return json.Unmarshal(b, (*float64)(m))
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// checkRows compares a query's rows with want.
func checkRows(t *testing.T, what string, got map[string][]float64, want map[string][]float64) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("%s: got %s, want %s", what, g, w)
	}
}

// checkDashboard reads back, with the queries the dashboard's panels make
// (web/dashboard/app.js: the headline, Top pages, custom properties and
// goals), what a tracker sent: one visitor with two pageviews of / and
// /pricing and a signup event with plan pro.
func checkDashboard(t *testing.T, q api, site, signup string) {
	t.Helper()
	checkRows(t, "headline", queryRows(q, site, map[string]any{"metrics": []string{"visitors", "visits", "pageviews", "events"}}),
		map[string][]float64{"": {1, 1, 2, 3}})
	checkRows(t, "top pages", queryRows(q, site, map[string]any{"metrics": []string{"visitors", "pageviews"}, "dimensions": []string{"event:page"}}),
		map[string][]float64{"/": {1, 1}, "/pricing": {1, 1}})
	checkRows(t, "event names", queryRows(q, site, map[string]any{"metrics": []string{"visitors", "events"}, "dimensions": []string{"event:name"}}),
		map[string][]float64{"pageview": {1, 2}, signup: {1, 1}})
	checkRows(t, "custom property plan", queryRows(q, site, map[string]any{"metrics": []string{"visitors", "events"}, "dimensions": []string{"event:props:plan"},
		"filters": []any{[]any{"is_not", "event:props:plan", []string{"(none)"}}}}), map[string][]float64{"pro": {1, 1}})
	// A revenue goal (its currency the one Plausible's tracker test sends),
	// so that its revenue is counted as Plausible counts it.
	createGoal(t, q, site, map[string]any{"name": "Signed up", "event_name": signup, "currency": "EUR"})
	checkRows(t, "goals", queryRows(q, site, map[string]any{"metrics": []string{"visitors", "events", "conversion_rate"}, "dimensions": []string{"event:goal"}}),
		map[string][]float64{"Signed up": {1, 1, 100}})
}

// createGoal creates a goal of site (201).
func createGoal(t *testing.T, q api, site string, goal map[string]any) {
	t.Helper()
	b, _ := json.Marshal(goal)
	req, _ := http.NewRequest(http.MethodPost, q.base+"/v1/sites/"+site+"/goals", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+q.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("create goal: got %d, want 201", res.StatusCode)
	}
}

// TestPlausibleTracker loads Plausible's official tracker
// (@plausible-analytics/tracker 0.4.6) in Debian's chromium on a page of
// another origin: a pageview on load, a custom event with props and
// revenue, an SPA navigation by history.pushState; every request is
// answered 202, and the events read back through the query API.
func TestPlausibleTracker(t *testing.T) {
	ctx := browser(t)
	srv := servertest.New(t)
	q := trackerSite(t, srv)
	pages := trackerPages(t, srv.CollectorURL)
	if err := chromedp.Do(ctx, chromedp.Navigate(pages.URL+"/?utm_source=news")); err != nil {
		t.Fatal(err)
	}
	notEngagement := `function (s) { return s.body && JSON.parse(s.body).n !== "engagement"; }`
	trackerRequests(t, ctx, 1, notEngagement)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.plausibleTrack("Signup", {props: {plan: "pro"}, revenue: {amount: 49, currency: "EUR"}}),
		history.pushState({}, "", "/pricing"), true`)); err != nil {
		t.Fatal(err)
	}
	sent := trackerRequests(t, ctx, 3, notEngagement)
	var names []string
	for _, r := range sent {
		u, _ := url.Parse(r.URL)
		var body struct {
			N string `json:"n"`
			D string `json:"d"`
		}
		json.Unmarshal([]byte(r.Body), &body)
		if r.Status != 202 || u.Path != "/api/event" || r.Headers["Content-Type"] != "text/plain" || body.D != "shop.example" {
			t.Errorf("request %s: got %s %s (%v) answered %d, want POST /api/event text/plain for shop.example answered 202", r.Body, r.Method, r.URL, r.Headers, r.Status)
		}
		if body.N != "engagement" {
			names = append(names, body.N)
		}
	}
	if strings.Join(names, ",") != "pageview,Signup,pageview" {
		t.Fatalf("got events %v, want pageview, Signup, pageview", names)
	}
	events := srv.MustWaitEvents(t, 3, 30*time.Second)
	var urls []string
	for _, e := range events {
		urls = append(urls, e.Type+" "+deref(e.URL))
		if deref(e.Browser) != "Chrome" || !strings.HasPrefix(e.AnonID, "c_") {
			t.Errorf("event %s: got browser %q anon %q, want Chrome and a cookieless id", e.Type, deref(e.Browser), e.AnonID)
		}
	}
	want := []string{"pageview " + pages.URL + "/", "Signup " + pages.URL + "/", "pageview " + pages.URL + "/pricing"}
	if strings.Join(urls, ",") != strings.Join(want, ",") {
		t.Errorf("got events %v, want %v", urls, want)
	}
	checkDashboard(t, q, srv.SiteID, "Signup")
	checkRows(t, "revenue", queryRows(q, srv.SiteID, map[string]any{"metrics": []string{"total_revenue"},
		"filters": []any{[]any{"is", "event:goal", []string{"Signed up"}}}}), map[string][]float64{"": {49}})
	checkRows(t, "campaign", queryRows(q, srv.SiteID, map[string]any{"metrics": []string{"visits"}, "dimensions": []string{"visit:utm_source"}}),
		map[string][]float64{"news": {1}})
}

// TestUmamiTracker loads Umami's tracker as the umami package 2.10.0 ships
// it in Debian's chromium on a page of another origin: a pageview on
// load, umami.track with data, an SPA navigation by history.pushState;
// every request is answered 200 with a token, which the tracker sends back
// in x-umami-cache (so the preflight must allow it), and the events read
// back through the query API.
func TestUmamiTracker(t *testing.T) {
	ctx := browser(t)
	srv := servertest.New(t)
	q := trackerSite(t, srv)
	pages := trackerPages(t, srv.CollectorURL)
	if err := chromedp.Do(ctx, chromedp.Navigate(pages.URL+"/umami")); err != nil {
		t.Fatal(err)
	}
	all := `function (s) { return true; }`
	trackerRequests(t, ctx, 1, all)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.umami.track("signup", {plan: "pro"}), true`)); err != nil {
		t.Fatal(err)
	}
	trackerRequests(t, ctx, 2, all)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`history.pushState({}, "", "/pricing"), true`)); err != nil {
		t.Fatal(err)
	}
	sent := trackerRequests(t, ctx, 3, all)
	if len(sent) != 3 {
		t.Fatalf("got %d requests, want 3: %+v", len(sent), sent)
	}
	for i, r := range sent {
		u, _ := url.Parse(r.URL)
		if r.Status != 200 || u.Path != "/api/send" {
			t.Errorf("request %d: got %s answered %d, want /api/send answered 200", i, r.URL, r.Status)
		}
		if cache := r.Headers["x-umami-cache"]; i == 2 && (cache == "" || cache != sent[1].Answer) {
			t.Errorf("request %d: got x-umami-cache %q, want the token of the answer before, %q", i, cache, sent[1].Answer)
		}
	}
	events := srv.MustWaitEvents(t, 3, 30*time.Second)
	var got []string
	for _, e := range events {
		got = append(got, e.Type+" "+deref(e.URL))
	}
	host := strings.TrimPrefix(pages.URL, "http://")
	host = host[:strings.LastIndexByte(host, ':')]
	want := []string{"pageview https://" + host + "/umami", "signup https://" + host + "/umami", "pageview https://" + host + "/pricing"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("got events %v, want %v", got, want)
	}
	// Umami's url is the path: the test page's is /umami, not /.
	checkRows(t, "top pages", queryRows(q, srv.SiteID, map[string]any{"metrics": []string{"visitors", "pageviews"}, "dimensions": []string{"event:page"}}),
		map[string][]float64{"/pricing": {1, 1}, "/umami": {1, 1}})
	checkRows(t, "event names", queryRows(q, srv.SiteID, map[string]any{"metrics": []string{"visitors", "events"}, "dimensions": []string{"event:name"}}),
		map[string][]float64{"pageview": {1, 2}, "signup": {1, 1}})
	checkRows(t, "custom property plan", queryRows(q, srv.SiteID, map[string]any{"metrics": []string{"visitors", "events"}, "dimensions": []string{"event:props:plan"},
		"filters": []any{[]any{"is_not", "event:props:plan", []string{"(none)"}}}}), map[string][]float64{"pro": {1, 1}})
	checkRows(t, "headline", queryRows(q, srv.SiteID, map[string]any{"metrics": []string{"visitors", "visits", "pageviews", "events"}}),
		map[string][]float64{"": {1, 1, 2, 3}})
}

// TestUmamiNodeClient runs Umami's own Node client (@umami/node 0.4.0,
// umami-node.mjs): a pageview, an event with data and an identify, each
// answered 200 with a token, read back through the query API.
func TestUmamiNodeClient(t *testing.T) {
	node := lookPath("node", "nodejs")
	if node == "" {
		need(t, "node is not installed", "apt-get install nodejs npm")
	}
	nodeModules(t, "@umami/node")
	srv := servertest.New(t)
	q := trackerSite(t, srv)
	cmd := exec.Command(node, "umami-node.mjs")
	cmd.Env = append(os.Environ(), "TALLY_HOST="+srv.CollectorURL, "TALLY_WEBSITE="+umamiWebsiteID)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("umami-node.mjs: %v\n%s\n%s", err, stderr.Bytes(), stdout.Bytes())
	}
	sc := bufio.NewScanner(&stdout)
	answers := 0
	for sc.Scan() {
		var a struct {
			Status int    `json:"status"`
			Body   string `json:"body"`
		}
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil || a.Status != 200 || a.Body == "" {
			t.Errorf("answer %s: want 200 with a token", sc.Bytes())
		}
		answers++
	}
	if answers != 3 {
		t.Fatalf("got %d answers, want 3:\n%s", answers, stdout.Bytes())
	}
	events := srv.MustWaitEvents(t, 3, 30*time.Second)
	var got []string
	for _, e := range events {
		got = append(got, e.Type+" "+deref(e.URL)+" "+deref(e.Referrer))
	}
	sort.Strings(got)
	want := []string{"identify  ", "node-order  ", "pageview https://shop.example/node-page https://news.test/node"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("got events %q, want %q", got, want)
	}
	checkRows(t, "event names", queryRows(q, srv.SiteID, map[string]any{"metrics": []string{"events"}, "dimensions": []string{"event:name"}}),
		map[string][]float64{"identify": {1}, "node-order": {1}, "pageview": {1}})
	checkRows(t, "property plan", queryRows(q, srv.SiteID, map[string]any{"metrics": []string{"events"}, "dimensions": []string{"event:props:plan"},
		"filters": []any{[]any{"is_not", "event:props:plan", []string{"(none)"}}}}), map[string][]float64{"pro": {1}})
	checkRows(t, "pages", queryRows(q, srv.SiteID, map[string]any{"metrics": []string{"pageviews"}, "dimensions": []string{"event:page"}}),
		// The event and the identify name no page.
		map[string][]float64{"(not set)": {0}, "/node-page": {1}})
}
