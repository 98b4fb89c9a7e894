package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tally-analytics/tally/server/servertest"
)

// TestSettingsEmailInABrowser: an owner opens the site's Email page, sees
// that the server has no SMTP, subscribes an address to the weekly report
// (listed), saves alerts without a threshold (the API's message beside
// the field), then with one, and finds them again after a reload.
func TestSettingsEmailInABrowser(t *testing.T) {
	onBothBackends(t, func(t *testing.T, newServer func(...servertest.Option) *servertest.Server) {
		ctx, cancel := browser(t)
		defer cancel()
		srv := newServer()
		addUser(t, srv, "olga@example.com", "owner", "owner's password")
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 900)); err != nil {
			t.Fatal(err)
		}
		if err := accountSignIn(ctx, srv, "olga@example.com", "owner's password"); err != nil {
			t.Fatal(err)
		}
		page := srv.QueryURL + "/v1/ui/settings.html?ws=" + srv.Workspace + "&site=" + srv.SiteID + "&page=email"
		err := chromedp.Do(ctx,
			chromedp.Navigate(page),
			chromedp.WaitReady(chromedp.CSS(`body[data-page="email"]`)),
			chromedp.WaitVisible(chromedp.ID("mail-off")),
			chromedp.SendKeys(chromedp.CSS("#email-report-form [name=email]"), "ana@example.com"),
			chromedp.Click(chromedp.CSS("#email-report-form button[type=submit]")),
		)
		if err != nil {
			t.Fatal(err)
		}
		waitText(t, ctx, "#email-reports", "ana@example.com")
		err = chromedp.Do(ctx,
			chromedp.SendKeys(chromedp.CSS("#traffic-alert-form [name=recipients]"), "ops@example.com"),
			chromedp.Click(chromedp.CSS("#traffic-alert-form button[type=submit]")),
		)
		if err != nil {
			t.Fatal(err)
		}
		waitText(t, ctx, "#traffic-alert-form label:has([name=spike_visitors]) + .field-error", "set spike_visitors and/or drop_percent")
		err = chromedp.Do(ctx,
			chromedp.SendKeys(chromedp.CSS("#traffic-alert-form [name=spike_visitors]"), "250"),
			chromedp.Click(chromedp.CSS("#traffic-alert-form button[type=submit]")),
		)
		if err != nil {
			t.Fatal(err)
		}
		waitText(t, ctx, "#status", "Alerts saved")
		err = chromedp.Do(ctx,
			chromedp.Navigate(page),
			chromedp.WaitReady(chromedp.CSS(`body[data-page="email"]`)),
		)
		if err != nil {
			t.Fatal(err)
		}
		got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[document.querySelector("#traffic-alert-form [name=recipients]").value, document.querySelector("#traffic-alert-form [name=spike_visitors]").value, document.querySelector("#email-reports").innerText.indexOf("ana@example.com") >= 0 ? "listed" : "missing"]`))
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != "ops@example.com" || got[1] != "250" || got[2] != "listed" {
			t.Errorf("after a reload: got %q, want ops@example.com, 250 and the subscription listed", got)
		}
	})
}

// TestForgotPasswordInABrowser: the sign-in form's "Forgot password?"
// asks for the email first, then sends it; without SMTP the server's
// answer says so and names the operator's command.
func TestForgotPasswordInABrowser(t *testing.T) {
	onBothBackends(t, func(t *testing.T, newServer func(...servertest.Option) *servertest.Server) {
		ctx, cancel := browser(t)
		defer cancel()
		srv := newServer()
		err := chromedp.Do(ctx,
			chromedp.Navigate(srv.QueryURL+"/?period=day"),
			chromedp.WaitVisible(chromedp.ID("forgot")),
			chromedp.Click(chromedp.ID("forgot")),
		)
		if err != nil {
			t.Fatal(err)
		}
		waitText(t, ctx, "#status", "Type your email first")
		err = chromedp.Do(ctx,
			chromedp.SendKeys(chromedp.ID("email"), "ana@example.com"),
			chromedp.Click(chromedp.ID("forgot")),
		)
		if err != nil {
			t.Fatal(err)
		}
		waitText(t, ctx, "#status", "tally user reset-password")
	})
}
