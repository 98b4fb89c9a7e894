package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tally-analytics/tally/internal/chromiumtest"
	"github.com/tally-analytics/tally/server/servertest"
)

// The browser tests share one chromium, each in a browser context of its
// own (chromiumtest.Main).
func TestMain(m *testing.M) { chromiumtest.Main(m, dropTemplate) }

// browser is chromium headless for one test (chromiumtest.Browser); the
// cancel func is for the tests' defer, the test's cleanup ends it anyway.
func browser(t *testing.T) (context.Context, context.CancelFunc) {
	return chromiumtest.Browser(t), func() {}
}

// pages serves test pages that include the tracking script, from an
// origin other than the collector's: /granted*.html with
// data-consent="granted", /dnt*.html in a browser with Do-Not-Track on.
func pages(collector, site string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		attrs := ""
		if strings.Contains(r.URL.Path, "granted") {
			attrs = ` data-consent="granted"`
		}
		head := fmt.Sprintf(`<script defer src="%s/v1/script.js" data-site="%s"%s></script>`, collector, site, attrs)
		if strings.HasPrefix(r.URL.Path, "/dnt") {
			// What a browser with Do-Not-Track on reports to scripts.
			head = `<script>Object.defineProperty(navigator, "doNotTrack", {get: function () { return "1"; }});</script>` + head
		}
		fmt.Fprintf(w, `<!doctype html><html><head><title>Test page</title>%s</head><body><h1>Shop</h1></body></html>`, head)
	}))
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func TestTrackingScriptInABrowser(t *testing.T) {
	ctx, cancel := browser(t)
	defer cancel()
	srv := servertest.New(t)
	site := pages(srv.CollectorURL, srv.SiteID)
	defer site.Close()
	run := func(js string) string {
		t.Helper()
		out, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return out
	}
	const stored = `String(localStorage.getItem("tally_aid")) + " " + String(localStorage.getItem("tally_uid"))`

	// Before any consent: cookieless, nothing stored.
	if err := chromedp.Do(ctx, chromedp.Navigate(site.URL+"/page.html?ref=x")); err != nil {
		t.Fatal(err)
	}
	events := srv.MustWaitEvents(t, 1, 15*time.Second)
	pv := events[0]
	if pv.Type != "pageview" || deref(pv.Browser) != "Chrome" || deref(pv.OS) != "Linux" || deref(pv.DeviceType) != "desktop" ||
		deref(pv.URL) != site.URL+"/page.html" || !strings.HasPrefix(pv.AnonID, "c_") || !strings.Contains(string(pv.Raw), `"consent":"denied"`) {
		t.Fatalf("first pageview: got %+v %s, want a cookieless one", pv, pv.Raw)
	}
	// identify is ignored without consent; track is sent cookieless.
	run(`tally.identify("u-0", {tier: "x"}); tally.track("early"); ""`)
	events = srv.MustWaitEvents(t, 2, 15*time.Second)
	if e := events[1]; e.Type != "early" || e.UserID != nil || e.AnonID != pv.AnonID {
		t.Fatalf("track before consent: got %+v", e)
	}
	if got := run(stored); got != "null null" {
		t.Fatalf("before consent, localStorage holds %q, want nothing", got)
	}

	// Consent granted: an id is kept, events carry it and consent "granted".
	run(`tally.consent(true), ""`)
	id := strings.Fields(run(stored))[0]
	if id == "null" {
		t.Fatal("consent(true) kept no id")
	}
	// An SPA navigation through the History API is a pageview; a hash change another.
	run(`history.pushState({}, "", "/spa/next"), ""`)
	events = srv.MustWaitEvents(t, 3, 15*time.Second)
	if e := events[2]; e.Type != "pageview" || deref(e.URL) != site.URL+"/spa/next" || e.AnonID != id || !strings.Contains(string(e.Raw), `"consent":"granted"`) {
		t.Fatalf("SPA pageview after consent: got %+v %s, want anon id %s", e, e.Raw, id)
	}
	run(`location.hash = "#pricing", ""`)
	events = srv.MustWaitEvents(t, 4, 15*time.Second)
	if deref(events[3].URL) != site.URL+"/spa/next#pricing" {
		t.Fatalf("hash change: got %+v", events[3])
	}
	// track and identify (the API never throws into the page).
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`tally.track("signup", {plan: "pro"}); tally.identify("u-7", {tier: "gold"}); tally.track(); false`)); err != nil {
		t.Fatalf("the API threw into the page: %v", err)
	}
	events = srv.MustWaitEvents(t, 7, 15*time.Second)
	byType := map[string]servertest.Event{}
	for _, e := range events {
		byType[e.Type] = e
	}
	var raw map[string]any
	json.Unmarshal(byType["signup"].Raw, &raw)
	if props, _ := raw["properties"].(map[string]any); props["plan"] != "pro" || byType["signup"].AnonID != id {
		t.Fatalf("track: got %s", byType["signup"].Raw)
	}
	if e := byType["identify"]; deref(e.UserID) != "u-7" || !strings.Contains(string(e.Raw), `"tier":"gold"`) || e.AnonID != id {
		t.Fatalf("identify: got %+v %s", e, e.Raw)
	}

	// The next page load reads nothing until the page grants again; then
	// the kept id goes on.
	if err := chromedp.Do(ctx, chromedp.Navigate(site.URL+"/second.html")); err != nil {
		t.Fatal(err)
	}
	events = srv.MustWaitEvents(t, 8, 15*time.Second)
	if e := events[7]; !strings.HasPrefix(e.AnonID, "c_") || e.UserID != nil {
		t.Fatalf("next page load before consent: got %+v, want a cookieless pageview", e)
	}
	run(`tally.consent(true); tally.track("again"); ""`)
	events = srv.MustWaitEvents(t, 9, 15*time.Second)
	if e := events[8]; e.Type != "again" || e.AnonID != id || deref(e.UserID) != "u-7" {
		t.Fatalf("after consent again: got %+v, want anon id %s and user u-7", e, id)
	}
	// Consent withdrawn: the ids are deleted, events cookieless again.
	run(`tally.consent(false); tally.track("withdrawn"); ""`)
	events = srv.MustWaitEvents(t, 10, 15*time.Second)
	if e := events[9]; e.Type != "withdrawn" || !strings.HasPrefix(e.AnonID, "c_") || e.UserID != nil {
		t.Fatalf("after consent(false): got %+v", e)
	}
	if got := run(stored); got != "null null" {
		t.Fatalf("after consent(false), localStorage holds %q, want nothing", got)
	}

	// data-consent="granted" (another origin, so fresh storage): consent from
	// the first pageview on.
	granted := pages(srv.CollectorURL, srv.SiteID)
	defer granted.Close()
	if err := chromedp.Do(ctx, chromedp.Navigate(granted.URL+"/granted.html")); err != nil {
		t.Fatal(err)
	}
	events = srv.MustWaitEvents(t, 11, 15*time.Second)
	if e, kept := events[10], strings.Fields(run(stored))[0]; kept == "null" || e.AnonID != kept || !strings.Contains(string(e.Raw), `"consent":"granted"`) {
		t.Fatalf("data-consent: got %+v %s, localStorage %q", e, e.Raw, kept)
	}

	// Do-Not-Track wins over data-consent and consent(true): consent
	// "denied", nothing stored.
	dnt := pages(srv.CollectorURL, srv.SiteID)
	defer dnt.Close()
	if err := chromedp.Do(ctx, chromedp.Navigate(dnt.URL+"/dnt-granted.html")); err != nil {
		t.Fatal(err)
	}
	run(`tally.consent(true); tally.identify("u-8"); ""`)
	events = srv.MustWaitEvents(t, 12, 15*time.Second)
	last := events[11]
	if got := run(stored); !strings.Contains(string(last.Raw), `"consent":"denied"`) || !strings.HasPrefix(last.AnonID, "c_") || got != "null null" {
		t.Fatalf("DNT: got %+v raw %s, localStorage %q", last, last.Raw, got)
	}
	for _, d := range srv.Decisions(servertest.Filter{}) {
		if d.Outcome != "accepted" {
			t.Errorf("decision %+v, want every event accepted", d)
		}
	}
	if events, _ := srv.Events(); len(events) != 12 {
		t.Errorf("got %d events, want 12 (no identify without consent)", len(events))
	}
}

func TestDashboardInABrowser(t *testing.T) {
	ctx, cancel := browser(t)
	defer cancel()
	// Purchases need properties: one without lands in the DLQ for the Replay button.
	srv := servertest.New(t, servertest.WithPlan(`{"mode":"quarantine","events":{"purchase":{"type":"object","required":["properties"]},"*":{"type":"object"}}}`))
	if _, err := srv.Send(
		map[string]any{"id": "3f2504e0-4f89-41d3-9a0c-0305e82c3301", "site_id": srv.SiteID, "anon_id": "dev-1", "user_id": "u-1", "type": "signup", "url": "https://shop.test/join"},
		map[string]any{"id": "3f2504e0-4f89-41d3-9a0c-0305e82c3302", "site_id": srv.SiteID, "anon_id": "dev-1", "type": "purchase"},
	); err != nil {
		t.Fatal(err)
	}
	site := pages(srv.CollectorURL, srv.SiteID)
	defer site.Close()
	for _, p := range []string{"/a.html", "/b.html", "/a.html?x=1"} {
		if err := chromedp.Do(ctx, chromedp.Navigate(site.URL+p)); err != nil {
			t.Fatal(err)
		}
	}
	srv.MustWaitEvents(t, 4, 15*time.Second)

	// Today's view: the events above were received and dated now.
	err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1280, 1000),
		chromedp.Navigate(srv.QueryURL+"/?period=day"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), srv.AdminToken),
		chromedp.Click(chromedp.CSS("#signin button")),
		chromedp.WaitReady(chromedp.CSS("body[data-ready]")),
	)
	if err != nil {
		t.Fatal(err)
	}
	siteInput, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("site-input-label").offsetParent !== null`))
	if err != nil || siteInput {
		t.Errorf("the site id box shows for the admin token (err %v)", err)
	}
	shown, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#card-pageviews .card-value")))
	if err != nil {
		t.Fatal(err)
	}
	topPage, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#t-pages tr:nth-child(2) td")))
	if err != nil {
		t.Fatal(err)
	}
	desktop, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844), chromedp.Sleep(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	phone, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	// The user timeline and the DLQ's Replay button.
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS("#tools summary")),
		chromedp.SendKeys(chromedp.ID("user-id"), "u-1"),
		chromedp.Click(chromedp.CSS("#timeline-form button")),
		chromedp.WaitVisible(chromedp.CSS("#timeline tr:nth-child(2) td")),
		chromedp.WaitVisible(chromedp.CSS("#dlq button")),
		chromedp.Click(chromedp.CSS("#dlq button")),
	)
	if err != nil {
		t.Fatal(err)
	}
	timelineURL, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#timeline tr:nth-child(2) td:nth-child(3)")))
	if err != nil || timelineURL != "https://shop.test/join" {
		t.Errorf("timeline: got %q %v", timelineURL, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(auditActions(t, srv), "dlq.replay") {
		if time.Now().After(deadline) {
			t.Fatalf("the Replay button did not replay; audit: %s", auditActions(t, srv))
		}
		time.Sleep(50 * time.Millisecond)
	}
	bars, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#chart svg").getAttribute("aria-label") + " " + document.querySelectorAll("#chart rect").length`))
	if err != nil || bars != "Unique visitors by hour 24" {
		t.Errorf("today's chart: got %q %v, want Unique visitors by hour 24", bars, err)
	}
	if shown != "3" {
		t.Fatalf("the dashboard shows %q pageviews, want 3", shown)
	}
	if topPage != "/a.html" {
		t.Errorf("got top page %q, want /a.html", topPage)
	}
	out := filepath.Join("..", "testout")
	os.MkdirAll(out, 0o755)
	for name, img := range map[string][]byte{"dashboard-desktop.png": desktop, "dashboard-phone.png": phone} {
		if err := os.WriteFile(filepath.Join(out, name), img, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshots in %s", out)
}

// auditActions lists the workspace's audit actions, newest first.
func auditActions(t *testing.T, srv *servertest.Server) string {
	t.Helper()
	req, _ := http.NewRequest("GET", srv.QueryURL+"/v1/workspaces/"+srv.Workspace+"/audit", nil)
	req.Header.Set("Authorization", "Bearer "+srv.AdminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct{ Entries []struct{ Action string } }
	json.NewDecoder(res.Body).Decode(&body)
	var actions []string
	for _, e := range body.Entries {
		actions = append(actions, e.Action)
	}
	return strings.Join(actions, " ")
}
