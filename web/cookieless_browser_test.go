package web_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tally-analytics/tally/server/servertest"
)

// Under Do-Not-Track the script keeps nothing and makes a new anon id on
// every page load; the collector still counts the browser as one visitor
// (docs/intake.md#gates-in-order, gate 5): two page loads are stored with one
// cookieless id.
func TestCookielessPageLoadsAreOneVisitor(t *testing.T) {
	ctx, cancel := browser(t)
	defer cancel()
	srv := servertest.New(t)
	site := pages(srv.CollectorURL, srv.SiteID)
	defer site.Close()
	for _, p := range []string{"/dnt.html", "/dnt.html?page=2"} {
		if err := chromedp.Do(ctx, chromedp.Navigate(site.URL+p)); err != nil {
			t.Fatal(err)
		}
	}
	events := srv.MustWaitEvents(t, 2, 15*time.Second)
	if a, b := events[0].AnonID, events[1].AnonID; a != b || len(a) != 34 || a[:2] != "c_" {
		t.Errorf("two page loads of one browser: got anon ids %s and %s, want one cookieless id", a, b)
	}
}
