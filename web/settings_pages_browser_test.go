package web_test

import (
	"fmt"
	"os"
	"path/filepath"
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
