package web_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tally-analytics/tally/server/servertest"
)

// TestSettingsPagesInABrowser opens every settings page an owner has, at
// 1280 and 390 px: each is drawn without an error and none scrolls
// sideways. With TALLY_SCREENSHOTS=1 it writes the docs' screenshots,
// docs/settings-<page>-<width>.png.
func TestSettingsPagesInABrowser(t *testing.T) {
	onBothBackends(t, func(t *testing.T, newServer func(...servertest.Option) *servertest.Server) {
		ctx, cancel := browser(t)
		defer cancel()
		srv := newServer()
		addUser(t, srv, "olga@example.com", "owner", "owner's password")
		// Something on every page, as a site in use has.
		ws, site := "/v1/workspaces/"+srv.Workspace, "/v1/sites/"+srv.SiteID
		for _, c := range []struct {
			method, path, body string
		}{
			{"POST", site + "/goals", `{"name":"Signup","event_name":"signup","currency":"EUR"}`},
			{"POST", site + "/goals", `{"name":"Pricing","page_path":"/pricing"}`},
			{"POST", site + "/funnels", `{"name":"Pricing to signup","steps":["Pricing","Signup"]}`},
			{"POST", ws + "/keys", `{"label":"CI reads","scopes":["query:read"]}`},
			{"POST", ws + "/invitations", `{"email":"sam@example.com","role":"viewer"}`},
			{"POST", site + "/webhook-secrets", `{"adapter":"payments"}`},
			{"POST", site + "/shared-links", `{"label":"Public stats"}`},
			{"POST", site + "/email-reports", `{"email":"team@example.com","weekly":true,"monthly":true}`},
			{"PUT", site + "/traffic-alerts", `{"recipients":["oncall@example.com"],"spike_visitors":500,"drop_percent":50}`},
		} {
			req, _ := http.NewRequest(c.method, srv.QueryURL+c.path, strings.NewReader(c.body))
			req.Header.Set("Authorization", "Bearer "+srv.AdminToken)
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode >= 300 {
				t.Fatalf("%s %s: got %d, want 2xx", c.method, c.path, res.StatusCode)
			}
		}
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 1000)); err != nil {
			t.Fatal(err)
		}
		if err := accountSignIn(ctx, srv, "olga@example.com", "owner's password"); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(ctx, chromedp.Navigate(srv.QueryURL+"/v1/ui/settings.html"), chromedp.WaitReady(chromedp.CSS("body[data-page]"))); err != nil {
			t.Fatal(err)
		}
		ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[].map.call(document.querySelectorAll("#settings-nav a"), function (a) { return new URLSearchParams(a.search).get("page"); })`))
		if err != nil || len(ids) == 0 {
			t.Fatalf("the settings' pages: got %v (%v), want some", ids, err)
		}
		shots := os.Getenv("TALLY_SCREENSHOTS") != ""
		for _, width := range []int{1280, 390} {
			for _, id := range ids {
				url := fmt.Sprintf("%s/v1/ui/settings.html?ws=%s&site=%s&page=%s", srv.QueryURL, srv.Workspace, srv.SiteID, id)
				err := chromedp.Do(ctx,
					chromedp.EmulateViewport(int64(width), 900),
					chromedp.Navigate(url),
					chromedp.WaitReady(chromedp.CSS(`body[data-page="`+id+`"]`)),
				)
				if err != nil {
					t.Fatalf("%s at %d px: %v", id, width, err)
				}
				got, err := chromedp.Run(ctx, chromedp.Evaluate[[]any](`[document.scrollingElement.scrollWidth, [].map.call(document.querySelectorAll("#settings-page .form-error"), function (e) { return e.textContent; }).join("; ")]`))
				if err != nil {
					t.Fatal(err)
				}
				if w := got[0].(float64); int(w) > width {
					t.Errorf("%s at %d px: got a page %v px wide, want at most %d (no sideways scroll)", id, width, w, width)
				}
				if msg := got[1].(string); msg != "" {
					t.Errorf("%s at %d px: got the error %q, want none", id, width, msg)
				}
				if shots {
					png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
					if err != nil {
						t.Fatal(err)
					}
					name := fmt.Sprintf("settings-%s-%d.png", id, width)
					if err := os.WriteFile(filepath.Join("..", "docs", name), png, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	})
}

// TestSettingsScreenshots: docs/dashboard.md shows every settings page at
// 1280 and 390 px (each registered by a web/dashboard/settings_*.js file),
// and no screenshot is past the budget; TestSettingsPagesInABrowser
// writes them.
func TestSettingsScreenshots(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("..", "docs", "dashboard.md"))
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join("dashboard", "settings_*.js"))
	registered := regexp.MustCompile(`TallySettings\.register\(\{ id: "([a-z-]+)"`)
	var ids []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range registered.FindAllSubmatch(b, -1) {
			ids = append(ids, string(m[1]))
		}
	}
	if len(ids) < 11 {
		t.Fatalf("got the settings pages %v, want at least the 11 of issue 32", ids)
	}
	for _, id := range ids {
		for _, width := range []string{"1280", "390"} {
			name := "settings-" + id + "-" + width + ".png"
			fi, err := os.Stat(filepath.Join("..", "docs", name))
			if err != nil {
				t.Errorf("%s: %v (TALLY_SCREENSHOTS=1 go test ./web -run TestSettingsPagesInABrowser writes it)", name, err)
				continue
			}
			if fi.Size() > 2*screenshotBudget {
				t.Errorf("%s: got %d bytes, want at most %d", name, fi.Size(), 2*screenshotBudget)
			}
			if !strings.Contains(string(page), "("+name+")") {
				t.Errorf("docs/dashboard.md does not show %s", name)
			}
		}
	}
}
