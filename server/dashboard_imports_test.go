package server

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tally-analytics/tally/internal/chromiumtest"
	"github.com/tally-analytics/tally/internal/dbtest"
	"github.com/tally-analytics/tally/storage"
)

// TestDashboardShowsImportedHistory: the dashboard asks for imported days
// (include.imports), draws them apart in the chart and names their range
// under it; where a view's filters keep them out, the note says so with
// the query API's warning (docs/dashboard.md).
func TestDashboardShowsImportedHistory(t *testing.T) {
	dbtest.SkipUnderRace(t, "data-heavy answers compared in one goroutine")
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	// January 27 to 29 imported (10, 20 and 30 visitors from Google on /),
	// one visitor of the site's own on January 30.
	importHistory(t, h.db, "web", "2026-01-29", 3)
	h.sendAt("web", 1, "own", "pageview", day(30, 10, 0), map[string]any{"url": "https://a.test/x"})

	ctx := chromiumtest.Browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(h.query.URL+"/")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`sessionStorage.setItem("tally_token", `+jsonString(testAdminToken)+`), true`)); err != nil {
		t.Fatal(err)
	}
	show := func(url string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(h.query.URL+url), chromedp.WaitReady(chromedp.CSS("body[data-ready]"))); err != nil {
			t.Fatal(err)
		}
	}
	text := func(js string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	show("/?ws=acme&site=web&period=30d")
	if got := text(`document.querySelector("#card-visitors .card-value").textContent`); got != "61" {
		t.Errorf("unique visitors: got %s, want 61 (60 imported, 1 own)", got)
	}
	if got := text(`Array.from(document.querySelectorAll("#chart rect.imported title")).map(function (t) { return t.textContent; }).join("; ")`); got !=
		"2026-01-27: 10 visitors (imported); 2026-01-28: 20 visitors (imported); 2026-01-29: 30 visitors (imported)" {
		t.Errorf("imported bars: got %q", got)
	}
	if got := text(`document.querySelectorAll("#chart rect:not(.imported)").length + ""`); got != "27" {
		t.Errorf("other bars: got %s, want 27 (January 1 to 26 and 30)", got)
	}
	if got := text(`document.querySelector("#imported-note").textContent`); got != "Imported history: 2026-01-27 to 2026-01-29 (lighter bars)." {
		t.Errorf("note: got %q", got)
	}
	if got := text(`Array.from(document.querySelectorAll("#t-sources tr.row")).map(function (r) { return r.cells[0].textContent + " " + r.cells[1].textContent; }).join("; ")`); got != "Google 60; Direct / None 1" {
		t.Errorf("sources: got %q, want Google 60; Direct / None 1", got)
	}
	// Filters on two dimensions: the imported rollups cannot answer.
	show("/?ws=acme&site=web&period=30d&f=visit%3Asource,Google&f=visit%3Acountry,DE")
	if got := text(`document.querySelector("#imported-note").textContent`); got != "Imported history of 2026-01-27 to 2026-01-29 is not in these figures: "+storage.ImportsWarning(storage.ImportsUnsupportedQuery) {
		t.Errorf("note with two filters: got %q", got)
	}
	if got := text(`document.querySelectorAll("#chart rect.imported").length + ""`); got != "0" {
		t.Errorf("imported bars with two filters: got %s, want 0", got)
	}
}
