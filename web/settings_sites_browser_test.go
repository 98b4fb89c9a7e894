package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tally-analytics/tally/server/servertest"
)

// TestSettingsSitesGoalsKeysInABrowser: an owner signs in and, on the
// settings pages, creates a site, sees the API's message for a bad time
// zone beside that field, sets a good one, adds two goals and a funnel of
// them, creates a key (its plaintext shown once, gone on reload), and
// deletes the site through the confirmation that asks to type its id; at
// 1280 and 390 px, no page scrolling sideways (docs/dashboard.md#settings).
func TestSettingsSitesGoalsKeysInABrowser(t *testing.T) {
	onBothBackends(t, func(t *testing.T, newServer func(...servertest.Option) *servertest.Server) {
		for _, width := range []int64{1280, 390} {
			t.Run(fmt.Sprint(width), func(t *testing.T) {
				ctx, cancel := browser(t)
				defer cancel()
				srv := newServer()
				addUser(t, srv, "olga@example.com", "owner", "owner's password")
				if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, 900)); err != nil {
					t.Fatal(err)
				}
				if err := accountSignIn(ctx, srv, "olga@example.com", "owner's password"); err != nil {
					t.Fatal(err)
				}
				s := settingsPage{t: t, ctx: ctx, srv: srv, width: width}

				// A site: created, then its own settings page.
				s.open("sites", "")
				s.fill("#site-create [name=id]", "shop")
				s.fill("#site-create [name=name]", "Shop")
				s.submit("#site-create")
				s.waitPage("site")
				if got := mustEval[string](t, ctx, `new URLSearchParams(location.search).get("site")`); got != "shop" {
					t.Fatalf("after creating the site the page is of %q, want shop", got)
				}
				s.narrow("site")

				// A bad time zone: the API's own message, beside the field.
				s.fill("#site-form [name=time_zone]", "Mars/Olympus")
				s.submit("#site-form")
				waitFor(t, ctx, `!!document.querySelector("#site-form .field-error")`, "the time zone's error")
				got := mustEval[string](t, ctx, `(function () {
				var e = document.querySelector("#site-form .field-error");
				return e.previousElementSibling.querySelector("[name]").name + ": " + e.textContent;
			})()`)
				if want := `time_zone: time_zone must be an IANA time zone name such as "Europe/Berlin" or "UTC", not "Mars/Olympus"`; got != want {
					t.Errorf("bad time zone: got %q, want %q", got, want)
				}
				s.narrow("site with an error")
				s.fill("#site-form [name=time_zone]", "Europe/Berlin")
				s.submit("#site-form")
				waitText(t, ctx, "#status", "Saved.")
				if tz := s.apiGet("/v1/sites/shop")["time_zone"]; tz != "Europe/Berlin" {
					t.Errorf("time zone saved: got %v, want Europe/Berlin", tz)
				}

				// Goals, then a funnel of them.
				s.open("goals", "shop")
				s.fill("#goal-create [name=name]", "Visit")
				s.setSelect("#goal-kind", "page")
				s.fill("#goal-create [name=page_path]", "/")
				s.submit("#goal-create")
				waitText(t, ctx, "#goal-list", "page /")
				s.fill("#goal-create [name=name]", "Signup")
				s.fill("#goal-create [name=event_name]", "signup")
				s.fill("#goal-create [name=currency]", "eur")
				s.submit("#goal-create")
				waitText(t, ctx, "#goal-list", "event signup")
				if got := mustEval[string](t, ctx, `document.querySelector("#goal-list form.inline [name=currency]").value`); got != "EUR" {
					t.Errorf("the revenue goal's currency: got %q, want EUR", got)
				}
				s.narrow("goals")

				s.open("funnels", "shop")
				s.fill("#funnel-form [name=name]", "Signup flow")
				s.submit("#funnel-form")
				waitFor(t, ctx, `!!document.querySelector("#funnel-form .field-error")`, "the funnel's steps error")
				if got := mustEval[string](t, ctx, `document.querySelector("#funnel-form fieldset + .field-error").textContent`); !strings.Contains(got, "steps must be an array of 2 to 8 goals") {
					t.Errorf("a funnel without steps: got %q beside the steps, want the API's message", got)
				}
				mustEval[bool](t, ctx, `(function () {
				var s = document.querySelectorAll("#funnel-form select[data-step]");
				function pick(sel, name) { sel.value = [].filter.call(sel.options, function (o) { return o.textContent === name; })[0].value; }
				pick(s[0], "Visit"); pick(s[1], "Signup"); return true;
			})()`)
				s.submit("#funnel-form")
				waitText(t, ctx, "#funnel-list", "Visit → Signup")
				s.narrow("funnels")

				// A key: its plaintext once.
				s.open("keys", "shop")
				s.fill("#key-create [name=label]", "ci")
				mustEval[bool](t, ctx, `document.querySelector("#key-create [name=scope][value='query:read']").click(), document.querySelector("#key-create [name=site][value=shop]").click(), true`)
				s.submit("#key-create")
				waitFor(t, ctx, `!!document.querySelector("#key-plaintext .secret-value")`, "the key's plaintext")
				plain := mustEval[string](t, ctx, `document.querySelector("#key-plaintext .secret-value").textContent`)
				if !strings.HasPrefix(plain, "sk_") {
					t.Errorf("the key's plaintext: got %q, want sk_...", plain)
				}
				waitText(t, ctx, "#key-list", "query:read")
				s.narrow("keys")
				if res := s.bearerGet("/v1/sites/shop", plain); res != 200 {
					t.Errorf("the new key reads its site: got %d, want 200", res)
				}
				if err := chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitReady(chromedp.CSS(`body[data-page="keys"]`))); err != nil {
					t.Fatal(err)
				}
				waitText(t, ctx, "#key-list", "ci")
				if got := mustEval[string](t, ctx, `document.getElementById("key-plaintext").textContent + (document.body.textContent.indexOf(`+jsString(plain)+`) >= 0 ? " shown" : "")`); got != "" {
					t.Errorf("after a reload: got %q, want the plaintext gone", got)
				}

				// Delete the site: the confirmation asks for its id.
				s.open("sites", "shop")
				click(t, ctx, `button[data-delete="shop"]`)
				waitFor(t, ctx, `document.getElementById("confirm").open`, "the confirmation")
				if mustEval[bool](t, ctx, `!document.getElementById("confirm-ok").disabled`) {
					t.Error("the confirmation's button is on before the id is typed")
				}
				s.fill("#confirm-type", "sho")
				if mustEval[bool](t, ctx, `!document.getElementById("confirm-ok").disabled`) {
					t.Error("the confirmation's button is on with a wrong id typed")
				}
				s.narrow("the confirmation")
				s.fill("#confirm-type", "shop")
				click(t, ctx, "#confirm-ok")
				waitFor(t, ctx, `!document.querySelector('button[data-delete="shop"]') && document.body.getAttribute("data-page") === "sites"`, "the site gone from the list")
				if res := s.bearerGet("/v1/sites/shop", srv.AdminToken); res != 404 {
					t.Errorf("after the delete GET /v1/sites/shop got %d, want 404", res)
				}
			})
		}
	})
}

// settingsPage drives the settings pages of one test.
type settingsPage struct {
	t     *testing.T
	ctx   context.Context
	srv   *servertest.Server
	width int64
}

// open shows page (of site, when given) and waits until it is drawn.
func (s settingsPage) open(page, site string) {
	s.t.Helper()
	url := fmt.Sprintf("%s/v1/ui/settings.html?ws=%s&site=%s&page=%s", s.srv.QueryURL, s.srv.Workspace, site, page)
	if err := chromedp.Do(s.ctx, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS(`body[data-page="`+page+`"]`))); err != nil {
		s.t.Fatalf("open %s: %v", page, err)
	}
	s.narrow(page)
}

// waitPage waits until page is drawn.
func (s settingsPage) waitPage(page string) {
	s.t.Helper()
	waitFor(s.t, s.ctx, `document.body.getAttribute("data-page") === `+jsString(page), "the page "+page)
}

// fill sets the value of the field css, as typing would.
func (s settingsPage) fill(css, value string) {
	s.t.Helper()
	mustEval[bool](s.t, s.ctx, `(function () { var e = document.querySelector(`+jsString(css)+`); e.value = `+jsString(value)+`; e.dispatchEvent(new Event("input")); return true; })()`)
}

// setSelect picks value in the select css.
func (s settingsPage) setSelect(css, value string) {
	s.t.Helper()
	mustEval[bool](s.t, s.ctx, `(function () { var e = document.querySelector(`+jsString(css)+`); e.value = `+jsString(value)+`; e.dispatchEvent(new Event("change")); return true; })()`)
}

// submit submits the form css as its button would.
func (s settingsPage) submit(css string) {
	s.t.Helper()
	mustEval[bool](s.t, s.ctx, `document.querySelector(`+jsString(css)+`).requestSubmit(), true`)
}

// narrow fails the test when the page scrolls sideways.
func (s settingsPage) narrow(what string) {
	s.t.Helper()
	if w := mustEval[float64](s.t, s.ctx, `document.scrollingElement.scrollWidth`); int64(w) > s.width {
		s.t.Errorf("%s at %d px: the page is %v px wide, want no sideways scroll", what, s.width, w)
	}
}

// apiGet reads path with the admin token.
func (s settingsPage) apiGet(path string) map[string]any {
	s.t.Helper()
	req, _ := http.NewRequest("GET", s.srv.QueryURL+path, nil)
	req.Header.Set("Authorization", "Bearer "+s.srv.AdminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		s.t.Fatal(err)
	}
	return out
}

// bearerGet answers the status of GET path with token.
func (s settingsPage) bearerGet(path, token string) int {
	s.t.Helper()
	req, _ := http.NewRequest("GET", s.srv.QueryURL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}
