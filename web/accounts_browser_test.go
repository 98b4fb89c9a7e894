package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tally-analytics/tally/server/servertest"
)

// TestAccountSigninInABrowser: a user made by the operator signs in to the
// dashboard with email and password (the first sign-in), sees its
// workspace's site, and signs out; the session cookie is out of the
// page's reach and ends with the sign-out.
func TestAccountSigninInABrowser(t *testing.T) {
	onBothBackends(t, func(t *testing.T, newServer func(...servertest.Option) *servertest.Server) {
		ctx, cancel := browser(t)
		defer cancel()
		srv := newServer()
		body, _ := json.Marshal(map[string]any{"email": "ana@example.com", "role": "viewer", "workspace": srv.Workspace, "password": "correct horse battery"})
		req, _ := http.NewRequest("POST", srv.QueryURL+"/v1/users", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+srv.AdminToken)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != 201 {
			t.Fatalf("create the user: got %v %v, want 201", res, err)
		}
		res.Body.Close()

		// A wrong password says so, and shows no dashboard.
		err = chromedp.Do(ctx,
			chromedp.EmulateViewport(1280, 1000),
			chromedp.Navigate(srv.QueryURL+"/?period=day"),
			chromedp.WaitVisible(chromedp.ID("email")),
			chromedp.SendKeys(chromedp.ID("email"), "ana@example.com"),
			chromedp.SendKeys(chromedp.ID("password"), "wrong password"),
			chromedp.Click(chromedp.CSS("#account-signin button")),
			chromedp.WaitVisible(chromedp.ID("status")),
		)
		if err != nil {
			t.Fatal(err)
		}
		waitText(t, ctx, "#status", "wrong email or password")

		err = chromedp.Do(ctx,
			chromedp.Evaluate[chromedp.Void](`document.getElementById("password").value = ""; undefined`),
			chromedp.SendKeys(chromedp.ID("password"), "correct horse battery"),
			chromedp.Click(chromedp.CSS("#account-signin button")),
			chromedp.WaitReady(chromedp.CSS("body[data-ready]")),
			chromedp.WaitVisible(chromedp.ID("signout")),
		)
		if err != nil {
			t.Fatal(err)
		}
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("site-select").value + " " + document.cookie + "|" + sessionStorage.getItem("tally_token")`))
		if err != nil || got != srv.SiteID+" |null" {
			t.Errorf("signed in: got site, cookies, token %q (%v), want %q: the site shown, no cookie a script can read, no token kept", got, err, srv.SiteID+" |null")
		}
		// A reload keeps the session.
		err = chromedp.Do(ctx,
			chromedp.Reload(),
			chromedp.WaitReady(chromedp.CSS("body[data-ready]")),
			chromedp.WaitVisible(chromedp.ID("signout")),
		)
		if err != nil {
			t.Fatal(err)
		}
		// Sign out: the forms again, and the session is over on the server.
		err = chromedp.Do(ctx,
			chromedp.Click(chromedp.ID("signout")),
			chromedp.WaitVisible(chromedp.ID("account-signin")),
		)
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			status, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`fetch("/v1/auth/session").then(function (r) { return r.status; })`, chromedp.EvalAwaitPromise))
			if err == nil && status == 401 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after sign-out GET /v1/auth/session got %v %v, want 401", status, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		err = chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("account-signin")))
		if err != nil {
			t.Fatal(err)
		}
		if appShown, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`!document.getElementById("app").hidden`)); appShown {
			t.Error("after sign-out and a reload the dashboard shows")
		}
	})
}

// waitText waits until the element sel's text contains want.
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err == nil && strings.Contains(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: got %q (%v), want %q", sel, got, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
