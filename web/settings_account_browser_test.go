package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tally-analytics/tally/server/servertest"
)

// addUser makes a user of the test server's workspace through the API.
func addUser(t *testing.T, srv *servertest.Server, email, role, password string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"email": email, "role": role, "workspace": srv.Workspace, "password": password})
	req, _ := http.NewRequest("POST", srv.QueryURL+"/v1/users", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+srv.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 201 {
		t.Fatalf("create the user %s: got %v %v, want 201", email, res, err)
	}
	res.Body.Close()
}

// accountSignIn signs in on the dashboard's form and waits for the dashboard.
func accountSignIn(ctx context.Context, srv *servertest.Server, email, password string) error {
	return chromedp.Do(ctx,
		chromedp.Navigate(srv.QueryURL+"/?period=day"),
		chromedp.WaitVisible(chromedp.ID("email")),
		chromedp.SendKeys(chromedp.ID("email"), email),
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.CSS("#account-signin button")),
		chromedp.WaitVisible(chromedp.ID("signout")),
	)
}

// TestSettingsAccountInABrowser: an owner signs in, opens Settings from
// the dashboard's header, changes its password (a wrong current password
// is the API's message beside that field), signs out from the settings,
// and signs in with the new password only. Then a page of another origin
// posts a form to the API with the session's cookie: refused, and the
// password is unchanged.
func TestSettingsAccountInABrowser(t *testing.T) {
	onBothBackends(t, func(t *testing.T, newServer func(...servertest.Option) *servertest.Server) {
		ctx, cancel := browser(t)
		defer cancel()
		srv := newServer()
		addUser(t, srv, "olga@example.com", "owner", "first password 1")

		if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 1000)); err != nil {
			t.Fatal(err)
		}
		if err := accountSignIn(ctx, srv, "olga@example.com", "first password 1"); err != nil {
			t.Fatal(err)
		}
		err := chromedp.Do(ctx,
			chromedp.WaitVisible(chromedp.ID("settings-link")),
			chromedp.Click(chromedp.ID("settings-link")),
			chromedp.WaitVisible(chromedp.ID("password-form")),
			chromedp.SendKeys(chromedp.CSS("#password-form [name=current_password]"), "not my password"),
			chromedp.SendKeys(chromedp.CSS("#password-form [name=new_password]"), "second password 2"),
			chromedp.Click(chromedp.CSS("#password-form button[type=submit]")),
		)
		if err != nil {
			t.Fatal(err)
		}
		// The API's message, beside the current password's field.
		waitText(t, ctx, "#password-form label:has([name=current_password]) + .field-error", "the current password is wrong")

		err = chromedp.Do(ctx,
			chromedp.Evaluate[chromedp.Void](`document.querySelector("#password-form [name=current_password]").value = ""; undefined`),
			chromedp.SendKeys(chromedp.CSS("#password-form [name=current_password]"), "first password 1"),
			chromedp.Click(chromedp.CSS("#password-form button[type=submit]")),
		)
		if err != nil {
			t.Fatal(err)
		}
		waitText(t, ctx, "#status", "Password changed")
		if n, _ := chromedp.Run(ctx, chromedp.Evaluate[float64](`document.querySelectorAll("#password-form .field-error").length`)); n != 0 {
			t.Errorf("after the change: got %v field errors, want 0", n)
		}

		// Sign out from the settings: back on the dashboard's sign-in, the
		// session over.
		err = chromedp.Do(ctx,
			chromedp.Click(chromedp.ID("signout")),
			chromedp.WaitVisible(chromedp.ID("account-signin")),
		)
		if err != nil {
			t.Fatal(err)
		}
		if status, _ := chromedp.Run(ctx, chromedp.Evaluate[float64](`fetch("/v1/auth/session").then(function (r) { return r.status; })`, chromedp.EvalAwaitPromise)); status != 401 {
			t.Errorf("after sign-out GET /v1/auth/session: got %v, want 401", status)
		}
		for _, c := range []struct {
			password string
			want     int
		}{{"first password 1", 401}, {"second password 2", 200}} {
			got, err := chromedp.Run(ctx, chromedp.Evaluate[float64](fmt.Sprintf(`fetch("/v1/auth/signin", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({email: "olga@example.com", password: %q})}).then(function (r) { return r.status; })`, c.password), chromedp.EvalAwaitPromise))
			if err != nil || int(got) != c.want {
				t.Errorf("sign-in with %q: got %v %v, want %d", c.password, got, err, c.want)
			}
		}

		// Signed in again (the fetch above set the cookie), a page of another
		// origin posts a form to the password change with that cookie.
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s/v1/auth/password" enctype="text/plain"><input name='{"current_password":"second password 2","new_password":"stolen password 3","x":"' value='"}'></form><script>document.getElementById("f").submit()</script>`, srv.QueryURL)
		}))
		defer evil.Close()
		if err := chromedp.Do(ctx, chromedp.Navigate(evil.URL)); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`location.href.indexOf("/v1/auth/password") >= 0 && document.body && document.body.innerText.length > 0`)); err != nil {
			t.Fatal(err)
		}
		body, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
		if err != nil {
			t.Fatal(err)
		}
		var env struct {
			Error struct{ Code, Message string }
		}
		if json.Unmarshal([]byte(body), &env) != nil || env.Error.Code != "forbidden" {
			t.Errorf("a cross-origin form post: got %q, want the 403 forbidden envelope", body)
		}
		got, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`fetch("/v1/auth/signin", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({email: "olga@example.com", password: "second password 2"})}).then(function (r) { return r.status; })`, chromedp.EvalAwaitPromise))
		if err != nil || got != 200 {
			t.Errorf("after the cross-origin post, sign-in with the password it tried to change: got %v %v, want 200", got, err)
		}
		if a := auditActions(t, srv); countOf(a, "password.change") != 1 {
			t.Errorf("audit: got %q, want one password.change (the browser's own)", a)
		}
	})
}

func countOf(s, sub string) int { return bytes.Count([]byte(s), []byte(sub)) }
