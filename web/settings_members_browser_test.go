package web_test

import (
	"archive/zip"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tally-analytics/tally/server/servertest"
)

// evalString runs js in the page and answers its string, failing the test
// on an error.
func evalString(t *testing.T, ctx context.Context, js string) string {
	t.Helper()
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return out
}

// fetchStatus is the status the page's fetch of path gets (GET, with the
// page's cookies).
func fetchStatus(t *testing.T, ctx context.Context, path string) string {
	t.Helper()
	return evalString(t, ctx, fmt.Sprintf(`fetch(%q).then(function (r) { return String(r.status); })`, path))
}

// TestSettingsInviteInABrowser: an owner invites a colleague as viewer in
// Settings › Members and copies the link shown once; the colleague opens
// it in a browser context of its own, chooses a password, is signed in and
// sees the dashboard. The viewer is kept out of the settings: the header
// offers only its account, the settings page says it needs admin and
// shows no members page, and the API answers 403. Back in the owner's
// browser the colleague is a member; the owner's own demotion (the only
// owner) is refused beside the role, the colleague made admin, and a
// second invitation revoked after a confirmation, its link dead.
func TestSettingsInviteInABrowser(t *testing.T) {
	onBothBackends(t, func(t *testing.T, newServer func(...servertest.Option) *servertest.Server) {
		owner, cancel := browser(t)
		defer cancel()
		srv := newServer()
		addUser(t, srv, "olga@example.com", "owner", "owner's password")
		members := srv.QueryURL + "/v1/ui/settings.html?page=members"
		err := chromedp.Do(owner, chromedp.EmulateViewport(390, 844))
		if err == nil {
			err = accountSignIn(owner, srv, "olga@example.com", "owner's password")
		}
		if err == nil {
			err = chromedp.Do(owner,
				chromedp.Navigate(members),
				chromedp.WaitReady(chromedp.CSS(`body[data-page="members"]`)),
				// The only owner demoting itself: the API's refusal beside the role.
				chromedp.SetValue(chromedp.CSS(`#members form.row-form select[name=role]`), "admin"),
				chromedp.Click(chromedp.CSS(`#members form.row-form button[type=submit]`)),
			)
		}
		if err != nil {
			t.Fatal(err)
		}
		waitText(t, owner, `#members form.row-form .field-error`, "only owner")

		err = chromedp.Do(owner,
			chromedp.SendKeys(chromedp.CSS(`#invite-form [name=email]`), "vera@example.com"),
			chromedp.SetValue(chromedp.CSS(`#invite-form [name=role]`), "viewer"),
			chromedp.Click(chromedp.CSS(`#invite-form button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(`#invitation-link .secret-value`)),
		)
		if err != nil {
			t.Fatal(err)
		}
		link := evalString(t, owner, `document.querySelector("#invitation-link .secret-value").textContent`)
		if !strings.HasPrefix(link, srv.QueryURL+"/v1/ui/#invite=") {
			t.Fatalf("the invitation link: got %q, want the dashboard's #invite= link", link)
		}
		waitText(t, owner, `#invitations`, "vera@example.com")
		if w := evalString(t, owner, `String(document.scrollingElement.scrollWidth)`); w != "390" {
			t.Errorf("the members page at 390 px with a link shown and an invitation listed: got %s px wide, want 390 (no sideways scroll)", w)
		}

		// The colleague, in a fresh browser context.
		vera, cancel2 := browser(t)
		defer cancel2()
		err = chromedp.Do(vera,
			chromedp.EmulateViewport(390, 844),
			chromedp.Navigate(link),
			chromedp.WaitVisible(chromedp.ID("new-password")),
			chromedp.SendKeys(chromedp.ID("new-password"), "vera's own password"),
			chromedp.Click(chromedp.CSS("#set-password button")),
			chromedp.WaitReady(chromedp.CSS("body[data-ready]")),
			chromedp.WaitVisible(chromedp.ID("signout")),
			chromedp.WaitVisible(chromedp.ID("settings-link")),
		)
		if err != nil {
			t.Fatal(err)
		}
		if got := evalString(t, vera, `document.getElementById("site-select").value + " " + document.getElementById("settings-link").textContent`); got != srv.SiteID+" Account" {
			t.Errorf("the colleague's dashboard: got site and header link %q, want %q (the site shown, no Settings link)", got, srv.SiteID+" Account")
		}
		err = chromedp.Do(vera,
			chromedp.Navigate(members),
			chromedp.WaitReady(chromedp.CSS(`body[data-page]`)),
			chromedp.WaitVisible(chromedp.ID("need-admin")),
		)
		if err != nil {
			t.Fatal(err)
		}
		if got := evalString(t, vera, `document.body.getAttribute("data-page") + " " + [].map.call(document.querySelectorAll("#settings-nav a"), function (a) { return a.textContent; }).join(",")`); got != "account Your account" {
			t.Errorf("a viewer on the members page: got page and links %q, want only its account", got)
		}
		for _, path := range []string{"/v1/workspaces/" + srv.Workspace + "/members", "/v1/workspaces/" + srv.Workspace + "/invitations", "/v1/sites/" + srv.SiteID + "/webhook-secrets"} {
			if got := fetchStatus(t, vera, path); got != "403" {
				t.Errorf("the viewer's GET %s: got %s, want 403", path, got)
			}
		}

		// The owner sees the colleague as a viewer, and makes it admin.
		err = chromedp.Do(owner,
			chromedp.Navigate(members),
			chromedp.WaitReady(chromedp.CSS(`body[data-page="members"]`)),
		)
		if err != nil {
			t.Fatal(err)
		}
		waitText(t, owner, `#members`, "vera@example.com")
		if got := evalString(t, owner, `document.querySelector("#invitations").textContent`); !strings.Contains(got, "No open invitations") {
			t.Errorf("after the acceptance: got invitations %q, want none open", got)
		}
		row := `#members tbody tr:nth-child(2)`
		if got := evalString(t, owner, `document.querySelector("`+row+` td").textContent`); got != "vera@example.com" {
			t.Fatalf("the second member row: got %q, want vera@example.com", got)
		}
		err = chromedp.Do(owner,
			chromedp.SetValue(chromedp.CSS(row+` select[name=role]`), "admin"),
			chromedp.Click(chromedp.CSS(row+` form.row-form button[type=submit]`)),
		)
		if err != nil {
			t.Fatal(err)
		}
		waitText(t, owner, "#status", "vera@example.com is now admin")
		if got := fetchStatus(t, vera, "/v1/workspaces/"+srv.Workspace+"/invitations"); got != "200" {
			t.Errorf("the colleague made admin, GET invitations: got %s, want 200", got)
		}

		// A second invitation, revoked after the confirmation: its link is dead.
		err = chromedp.Do(owner,
			chromedp.SendKeys(chromedp.CSS(`#invite-form [name=email]`), "sam@example.com"),
			chromedp.Click(chromedp.CSS(`#invite-form button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(`#invitations form.row-form button`)),
		)
		if err != nil {
			t.Fatal(err)
		}
		token := strings.TrimPrefix(evalString(t, owner, `document.querySelector("#invitation-link .secret-value").textContent`), srv.QueryURL+"/v1/ui/#invite=")
		err = chromedp.Do(owner,
			chromedp.Click(chromedp.CSS(`#invitations form.row-form button`)),
			chromedp.WaitVisible(chromedp.ID("confirm-ok")),
			chromedp.Click(chromedp.ID("confirm-ok")),
		)
		if err != nil {
			t.Fatal(err)
		}
		waitText(t, owner, "#invitations", "No open invitations")
		fresh, cancel3 := browser(t)
		defer cancel3()
		if err := chromedp.Do(fresh, chromedp.Navigate(srv.QueryURL+"/v1/ui/")); err != nil {
			t.Fatal(err)
		}
		got := evalString(t, fresh, fmt.Sprintf(`fetch("/v1/auth/invitations/accept", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({token: %q, password: "sam's password 1"})}).then(function (r) { return r.json().then(function (b) { return r.status + " " + b.error.code; }); })`, token))
		if got != "400 invalid_token" {
			t.Errorf("the revoked invitation's link: got %q, want 400 invalid_token", got)
		}
		if a := auditActions(t, srv); countOf(a, "invitation.revoke") != 1 || countOf(a, "member.update") != 1 || countOf(a, "invitation.accept") != 1 {
			t.Errorf("audit: got %q, want an invitation accepted, a member updated and an invitation revoked", a)
		}
	})
}

// TestSettingsImportUploadInABrowser: an admin uploads a GoatCounter
// export in Settings › Imports; the bar follows the upload (XHR's
// progress events: the page's note counts the bytes sent), then the
// server's counts show and the import is listed. A bad file is refused
// beside the file field, naming its line, and nothing of it is stored.
func TestSettingsImportUploadInABrowser(t *testing.T) {
	onBothBackends(t, func(t *testing.T, newServer func(...servertest.Option) *servertest.Server) {
		ctx, cancel := browser(t)
		defer cancel()
		srv := newServer()
		addUser(t, srv, "ada@example.com", "admin", "admin's password")
		dir := t.TempDir()
		const rows = 3000
		var b strings.Builder
		b.WriteString("2Path,Title,Event,UserAgent,Browser,System,Session,Bot,Referrer,Referrer scheme,Screen size,Location,FirstVisit,Date\n")
		for i := 0; i < rows; i++ {
			fmt.Fprintf(&b, "/page/%d,Page %d,false,,Firefox 123,Linux,session-%d,0,www.example.com/from/%d,h,\"1920,1080,1\",DE,true,2024-03-01T10:%02d:%02dZ\n", i%50, i%50, i%400, i%30, i/60%60, i%60)
		}
		good := filepath.Join(dir, "goatcounter-export.csv")
		bad := filepath.Join(dir, "broken.csv")
		if err := os.WriteFile(good, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bad, []byte(strings.Join(strings.SplitAfter(b.String(), "\n")[:4], "")+"/x,X,false,,,,s,0,,,,,true,yesterday\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 1000))
		if err == nil {
			err = accountSignIn(ctx, srv, "ada@example.com", "admin's password")
		}
		if err == nil {
			err = chromedp.Do(ctx,
				chromedp.Navigate(srv.QueryURL+"/v1/ui/settings.html?page=imports&site="+srv.SiteID),
				chromedp.WaitReady(chromedp.CSS(`body[data-page="imports"]`)),
				// The notes the page writes while it uploads, as they come.
				chromedp.Evaluate[chromedp.Void](`window.notes = []; new MutationObserver(function () { notes.push(document.getElementById("import-status").textContent); }).observe(document.getElementById("import-status"), {childList: true, characterData: true, subtree: true}); undefined`),
				chromedp.SetUploadFiles(`#import-form input[type=file]`, []string{bad}),
				chromedp.SetValue(`#import-form select[name=source]`, "goatcounter"),
				chromedp.Click(`#import-form button[type=submit]`),
			)
		}
		if err != nil {
			t.Fatal(err)
		}
		waitText(t, ctx, `#import-form label:has([name=file]) + .field-error`, "broken.csv:5: ")
		if got := evalString(t, ctx, `document.querySelector("#import-form .field-error").textContent`); !strings.Contains(got, "Date: want an RFC 3339 time") {
			t.Errorf("the bad file: got %q beside the field, want the line's error", got)
		}

		// A file over the server's 256 MiB is refused before a byte is sent
		// (a sparse file: its size is all the page reads).
		huge := filepath.Join(dir, "huge.csv")
		if err := os.WriteFile(huge, nil, 0o644); err != nil || os.Truncate(huge, 257<<20) != nil {
			t.Fatal("make a sparse file")
		}
		err = chromedp.Do(ctx,
			chromedp.SetUploadFiles(`#import-form input[type=file]`, []string{huge}),
			chromedp.SetValue(`#import-form select[name=source]`, "goatcounter"),
			chromedp.Click(`#import-form button[type=submit]`),
		)
		if err != nil {
			t.Fatal(err)
		}
		waitText(t, ctx, `#import-form label:has([name=file]) + .field-error`, "more than the 256 MiB an upload may be")
		if a := auditActions(t, srv); strings.Contains(a, "site.import") {
			t.Errorf("audit after the refusals: got %q, want no import", a)
		}

		// Plausible's export, zipped as Plausible hands it out.
		zipped := filepath.Join(dir, "example_com_20260104.zip")
		f, err := os.Create(zipped)
		if err != nil {
			t.Fatal(err)
		}
		zw := zip.NewWriter(f)
		csvs, _ := filepath.Glob(filepath.Join("..", "testdata", "import", "plausible", "*.csv"))
		for _, name := range csvs {
			data, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			w, _ := zw.Create(filepath.Base(name))
			w.Write(data)
		}
		if err := zw.Close(); err != nil || f.Close() != nil || len(csvs) == 0 {
			t.Fatalf("zip the Plausible export (%d files): %v", len(csvs), err)
		}
		// (first: Plausible's days are imported only before the site's own
		// first visit, which the GoatCounter rows below would make 2024-03-01)
		err = chromedp.Do(ctx,
			chromedp.SetUploadFiles(`#import-form input[type=file]`, []string{zipped}),
			chromedp.Click(`#import-form button[type=submit]`),
			chromedp.WaitVisible(`#import-counts dd[data-count=source]`),
		)
		if err != nil {
			t.Fatal(err)
		}
		waitText(t, ctx, "#import-counts", "plausible")
		waitText(t, ctx, "#imports", "days 2026-01-01 to 2026-01-03")
		if got := evalString(t, ctx, `document.querySelector("#imports td[data-head=Files]").textContent`); got != "example_com_20260104.zip" {
			t.Errorf("the Plausible import's files: got %q, want its zip once", got)
		}

		err = chromedp.Do(ctx,
			chromedp.Evaluate[chromedp.Void](`notes = []; undefined`),
			chromedp.SetUploadFiles(`#import-form input[type=file]`, []string{good}),
			chromedp.Click(`#import-form button[type=submit]`),
			chromedp.WaitVisible(chromedp.ID("import-counts")),
			chromedp.Poll[chromedp.Void](`document.querySelector("#import-counts dd") && document.querySelector("#import-counts dd").textContent === "goatcounter"`),
		)
		if err != nil {
			t.Fatal(err)
		}
		got := evalString(t, ctx, `[].map.call(document.querySelectorAll("#import-counts dd"), function (d) { return d.getAttribute("data-count") + "=" + d.textContent; }).slice(0, 5).join(" ")`)
		if want := fmt.Sprintf("source=goatcounter rows=%d imported=%d already there=0 skipped (bots)=0", rows, rows); got != want {
			t.Errorf("the counts: got %q, want %q", got, want)
		}
		notes := evalString(t, ctx, `notes.join("|")`)
		if !strings.Contains(notes, "Uploading goatcounter-export.csv: ") || !strings.Contains(notes, " MiB of ") {
			t.Errorf("the notes while uploading: got %q, want the bytes sent counted", notes)
		}
		if got := evalString(t, ctx, `(function (p) { return p.value + "/" + p.max; })(document.getElementById("import-progress"))`); got != "1/1" {
			t.Errorf("the bar at the end: got %s, want full", got)
		}
		waitText(t, ctx, "#imports", "goatcounter-export.csv")
		if events, _ := srv.Events(); len(events) != rows {
			t.Errorf("got %d events stored, want %d (none of the bad file)", len(events), rows)
		}

		// An admin's members page has no owner's controls.
		err = chromedp.Do(ctx,
			chromedp.Navigate(srv.QueryURL+"/v1/ui/settings.html?page=members"),
			chromedp.WaitReady(chromedp.CSS(`body[data-page="members"]`)),
		)
		if err != nil {
			t.Fatal(err)
		}
		if got := evalString(t, ctx, `document.querySelectorAll("#members select, #members button").length + " " + [].map.call(document.querySelectorAll("#invite-form [name=role] option"), function (o) { return o.value; }).join(",")`); got != "0 viewer,admin" {
			t.Errorf("an admin's members page: got %q, want no role or remove controls and invitations as viewer or admin only", got)
		}
	})
}

// TestSettingsWebhookSecretsInABrowser: an owner makes a webhook secret,
// shown once with its receiver's address, then revokes it after the
// confirmation; the list says so and the receiver refuses it.
func TestSettingsWebhookSecretsInABrowser(t *testing.T) {
	onBothBackends(t, func(t *testing.T, newServer func(...servertest.Option) *servertest.Server) {
		ctx, cancel := browser(t)
		defer cancel()
		srv := newServer()
		addUser(t, srv, "olga@example.com", "owner", "owner's password")
		err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844))
		if err == nil {
			err = accountSignIn(ctx, srv, "olga@example.com", "owner's password")
		}
		if err == nil {
			err = chromedp.Do(ctx,
				chromedp.Navigate(srv.QueryURL+"/v1/ui/settings.html?page=webhooks&site="+srv.SiteID),
				chromedp.WaitReady(chromedp.CSS(`body[data-page="webhooks"]`)),
				chromedp.Click(`#webhook-form button[type=submit]`),
				chromedp.WaitVisible(`#webhook-secret .secret-value`),
				chromedp.WaitVisible(`#webhook-secrets form.row-form button`),
			)
		}
		if err != nil {
			t.Fatal(err)
		}
		secret := evalString(t, ctx, `document.querySelector("#webhook-secret .secret-value").textContent`)
		if url := evalString(t, ctx, `document.getElementById("webhook-url").textContent`); url != srv.QueryURL+"/v1/webhooks/payments/"+srv.SiteID || len(secret) < 20 {
			t.Fatalf("got the receiver %q and secret %q, want the site's payments receiver and a secret", url, secret)
		}
		err = chromedp.Do(ctx,
			chromedp.Click(`#webhook-secrets form.row-form button`),
			chromedp.WaitVisible(chromedp.ID("confirm-ok")),
			chromedp.Click(chromedp.ID("confirm-ok")),
		)
		if err != nil {
			t.Fatal(err)
		}
		waitText(t, ctx, "#webhook-secrets", "Revoked")
		res, err := http.Post(srv.QueryURL+"/v1/webhooks/payments/"+srv.SiteID, "application/json", strings.NewReader(`{"id":"evt_1","type":"charge.succeeded","data":{"object":{"id":"ch_1"}}}`))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 401 {
			t.Errorf("the receiver after the revocation: got %d, want 401 (no active secret)", res.StatusCode)
		}
		if a := auditActions(t, srv); countOf(a, "webhook_secret.revoke") != 1 {
			t.Errorf("audit: got %q, want the secret revoked once", a)
		}
	})
}
