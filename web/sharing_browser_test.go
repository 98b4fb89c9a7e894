package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestSharedLinkInABrowser: a shared link with a password opened in a
// browser that never signed in asks for the password, refuses a wrong
// one beside the field, then shows the site's numbers (the same as the
// signed-in dashboard's) with no sign-in, site picker, tools or segment
// saving; the password's cookie is out of the page's reach. Revoked, the
// link shows nothing.
func TestSharedLinkInABrowser(t *testing.T) {
	ctx, cancel := browser(t)
	defer cancel()
	srv := dashServer(t)
	req, _ := http.NewRequest("POST", srv.QueryURL+"/v1/sites/"+srv.SiteID+"/shared-links",
		strings.NewReader(`{"label":"Board","password":"correct horse battery"}`))
	req.Header.Set("Authorization", "Bearer "+srv.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 201 {
		t.Fatalf("create the link: got %v %v, want 201", res, err)
	}
	var link struct{ ID, URL string }
	if err := json.NewDecoder(res.Body).Decode(&link); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()

	err = chromedp.Do(ctx,
		chromedp.EmulateViewport(1280, 1000),
		chromedp.Navigate(link.URL+"?period=7d"),
		chromedp.WaitVisible(chromedp.ID("share-pw")),
		chromedp.SendKeys(chromedp.ID("share-pw"), "wrong password"),
		chromedp.Click(chromedp.CSS("#share-password button")),
	)
	if err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#share-error", "wrong password")
	if appShown := mustEval[bool](t, ctx, `!document.getElementById("app").hidden`); appShown {
		t.Error("the dashboard shows before the password")
	}
	err = chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`document.getElementById("share-pw").value = ""; undefined`),
		chromedp.SendKeys(chromedp.ID("share-pw"), "correct horse battery"),
		chromedp.Click(chromedp.CSS("#share-password button")),
	)
	if err != nil {
		t.Fatal(err)
	}
	ready(t, ctx, "")
	if got, want := text(t, ctx, "#card-visitors .card-value"), "4"; got != want {
		t.Errorf("visitors: got %q, want %q", got, want)
	}
	if got, want := table(t, ctx, "t-pages"), "/home|2|2\n/pricing|2|2\n/blog|1|1"; got != want {
		t.Errorf("pages:\ngot  %s\nwant %s", got, want)
	}
	if got := text(t, ctx, "#tz-label"); !strings.Contains(got, "Europe/Berlin") {
		t.Errorf("time zone label: got %q, want it to name Europe/Berlin", got)
	}
	if got := text(t, ctx, "h1"); got != "Development site" {
		t.Errorf("title: got %q, want the site's name, Development site", got)
	}
	// Nothing but the reports: no sign-in, site picker, tools, settings.
	if got := mustEval[string](t, ctx, `["#signin", "#account-signin", "#signout", "#tools", "#admin", "#segment-save", "#site-select", "#site-input", "#workspace", "a[href*='settings']"]
		.filter(function (s) { return document.querySelector(s); }).join(" ")`); got != "" {
		t.Errorf("the shared view has %s, want none of them", got)
	}
	if got := mustEval[string](t, ctx, `document.cookie`); got != "" {
		t.Errorf("document.cookie: got %q, want no cookie a script can read", got)
	}
	// A reload keeps the password given.
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	ready(t, ctx, "")

	// Revoked: the page is gone, and a page still open shows no more.
	req, _ = http.NewRequest("DELETE", srv.QueryURL+"/v1/sites/"+srv.SiteID+"/shared-links/"+link.ID, nil)
	req.Header.Set("Authorization", "Bearer "+srv.AdminToken)
	res, err = http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 204 {
		t.Fatalf("revoke: got %v %v, want 204", res, err)
	}
	res.Body.Close()
	status, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`fetch("/v1/sites/`+srv.SiteID+`/query", {method: "POST", headers: {"X-Tally-Share": location.pathname.split("/")[2], "Content-Type": "application/json"},
		body: JSON.stringify({metrics: ["visitors"], date_range: "7d"})}).then(function (r) { return r.status; })`, chromedp.EvalAwaitPromise))
	if err != nil || status != 404 {
		t.Errorf("a query of the revoked link: got %v %v, want 404", status, err)
	}
}
