package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tally-analytics/tally/server/servertest"
)

// TestSharedLinkInABrowser: a shared link with a password opened in a
// browser that never signed in asks for the password, refuses a wrong
// one beside the field, then shows the site's numbers (the same as the
// signed-in dashboard's) with no sign-in, site picker, tools, settings or
// segment saving; the password's cookie is out of the page's reach.
// Revoked, the link reads nothing more.
func TestSharedLinkInABrowser(t *testing.T) {
	onBothBackends(t, func(t *testing.T, newServer func(...servertest.Option) *servertest.Server) {
		ctx, cancel := browser(t)
		defer cancel()
		srv := dashServerOn(t, newServer)
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
	})
}

// TestSharedLinkSettingsInABrowser: an owner makes a shared link on the
// site's settings page (the API's errors beside the password and origins
// fields first), copies its URL shown once, removes its password, and
// revokes it after the confirmation; the URL then answers 404.
func TestSharedLinkSettingsInABrowser(t *testing.T) {
	onBothBackends(t, func(t *testing.T, newServer func(...servertest.Option) *servertest.Server) {
		ctx, cancel := browser(t)
		defer cancel()
		srv := newServer()
		addUser(t, srv, "olga@example.com", "owner", "owner's password")
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 1000)); err != nil {
			t.Fatal(err)
		}
		if err := accountSignIn(ctx, srv, "olga@example.com", "owner's password"); err != nil {
			t.Fatal(err)
		}
		form := "#shared-link-create "
		err := chromedp.Do(ctx,
			chromedp.Navigate(srv.QueryURL+"/v1/ui/settings.html?ws="+srv.Workspace+"&site="+srv.SiteID+"&page=shared-links"),
			chromedp.WaitReady(chromedp.CSS(`body[data-page="shared-links"]`)),
			chromedp.SendKeys(chromedp.CSS(form+"[name=label]"), "Board"),
			chromedp.SendKeys(chromedp.CSS(form+"[name=password]"), "short"),
			chromedp.SendKeys(chromedp.CSS(form+"[name=allowed_origins]"), "https://intranet.example.com/page"),
			chromedp.Click(chromedp.CSS(form+"button[type=submit]")),
		)
		if err != nil {
			t.Fatal(err)
		}
		waitText(t, ctx, form+"label:has([name=password]) + .field-error", "password must be 10 to 256 characters")
		err = chromedp.Do(ctx,
			chromedp.SendKeys(chromedp.CSS(form+"[name=password]"), " and longer"),
			chromedp.Click(chromedp.CSS(form+"button[type=submit]")),
		)
		if err != nil {
			t.Fatal(err)
		}
		waitText(t, ctx, form+"label:has([name=allowed_origins]) + .field-error", "no path")
		err = chromedp.Do(ctx,
			chromedp.Evaluate[chromedp.Void](`document.querySelector("#shared-link-create [name=allowed_origins]").value = "https://intranet.example.com"; undefined`),
			chromedp.Click(chromedp.CSS(form+"button[type=submit]")),
		)
		if err != nil {
			t.Fatal(err)
		}
		waitText(t, ctx, "#shared-link-made .secret-value", srv.QueryURL+"/share/")
		url := text(t, ctx, "#shared-link-made .secret-value")
		waitText(t, ctx, "#shared-links", "Board")
		if got := text(t, ctx, "#shared-links tbody"); !strings.Contains(got, "Yes") || !strings.Contains(got, "https://intranet.example.com") {
			t.Errorf("the list: got %q, want the link with a password and its origin", got)
		}
		if got := mustEval[float64](t, ctx, `document.querySelectorAll("#shared-link-made button").length`); got != 1 {
			t.Errorf("got %v copy buttons beside the URL, want 1", got)
		}
		token := url[strings.LastIndex(url, "/")+1:]
		if got := text(t, ctx, "#shared-links"); strings.Contains(got, token) {
			t.Errorf("the list shows the token: %q", got)
		}

		// Remove the password.
		err = chromedp.Do(ctx,
			chromedp.Click(chromedp.CSS("#shared-links tbody button")),
			chromedp.WaitVisible(chromedp.ID("shared-link-form")),
			chromedp.Click(chromedp.CSS("#shared-link-form [name=remove_password]")),
			chromedp.Click(chromedp.CSS("#shared-link-form button[type=submit]")),
		)
		if err != nil {
			t.Fatal(err)
		}
		waitText(t, ctx, "#status", "Saved")
		waitText(t, ctx, "#shared-links tbody", "No")
		if got := shareStatus(t, srv, token); got != 200 {
			t.Errorf("a query of the link without its password: got %d, want 200", got)
		}

		// Revoke, confirmed.
		err = chromedp.Do(ctx,
			chromedp.Click(chromedp.CSS("#shared-links tbody button + button")),
			chromedp.WaitVisible(chromedp.ID("confirm-ok")),
			chromedp.Click(chromedp.ID("confirm-ok")),
		)
		if err != nil {
			t.Fatal(err)
		}
		waitText(t, ctx, "#shared-links", "No shared links yet.")
		if got := shareStatus(t, srv, token); got != 404 {
			t.Errorf("a query of the revoked link: got %d, want 404", got)
		}
	})
}

// shareStatus is the status of a query made with a shared link's token.
func shareStatus(t *testing.T, srv *servertest.Server, token string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", srv.QueryURL+"/v1/sites/"+srv.SiteID+"/query", strings.NewReader(`{"metrics":["visitors"],"date_range":"7d"}`))
	req.Header.Set("X-Tally-Share", token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}
