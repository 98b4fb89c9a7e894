package server

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tally-analytics/tally/internal/chromiumtest"
	"github.com/tally-analytics/tally/internal/dbtest"
)

// TestDashboardFunnelSaysPurgedDays: the dashboard's funnel names the days
// whose raw events a retention purge removed, as the funnel's answer gives
// them (docs/dashboard.md), under the steps it still counts.
func TestDashboardFunnelSaysPurgedDays(t *testing.T) {
	dbtest.SkipUnderRace(t, "data-heavy answers compared in one goroutine")
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.RetentionDays = 10 })
	h.setupTenant("acme", "web")
	// A visitor reads /x then clicks on each of January 1 to 20, each day
	// sent on that day.
	h.clock.Advance(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC).Sub(h.clock.Now()))
	n := 0
	for d := 1; d <= 20; d++ {
		n++
		h.sendAt("web", n, "phone", "pageview", day(d, 10, 0), map[string]any{"url": "https://a.test/x"})
		n++
		h.sendAt("web", n, "phone", "click", day(d, 10, 5), map[string]any{"url": "https://a.test/x"})
		h.clock.Advance(24 * time.Hour)
	}
	h.clock.Advance(time.Date(2026, 1, 21, 12, 0, 0, 0, time.UTC).Sub(h.clock.Now()))
	for _, g := range []string{`{"name":"1 Read x","page_path":"/x"}`, `{"name":"2 Click","event_name":"click"}`} {
		mustStatus(t, h.q("POST", "/v1/sites/web/goals", testAdminToken, g), 201, "")
	}
	if err := h.srv.purge(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The answer the dashboard shows (its Last 30 days end today, January 21:
	// docs/dashboard.md#default-range): days before the cut purged.
	r := h.q("POST", "/v1/sites/web/funnel", testAdminToken, `{"steps":["1 Read x","2 Click"],"date_range":["2025-12-23","2026-01-21"]}`)
	mustStatus(t, r, 200, "")
	var answer struct {
		PurgedRange []string `json:"purged_range"`
	}
	if err := json.Unmarshal(r.body, &answer); err != nil || len(answer.PurgedRange) != 2 {
		t.Fatalf("funnel answer: got purged_range %v (%v), want two dates (%s)", answer.PurgedRange, err, r.body)
	}
	want := "Retention purged the raw events of " + answer.PurgedRange[0][:10] + " to " + answer.PurgedRange[1][:10] + ": those days count no step."

	ctx := chromiumtest.Browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(h.query.URL+"/")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`sessionStorage.setItem("tally_token", `+jsonString(testAdminToken)+`), true`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(h.query.URL+"/?ws=acme&site=web&period=30d&step=1%20Read%20x&step=2%20Click"),
		chromedp.WaitReady(chromedp.CSS("body[data-ready]"))); err != nil {
		t.Fatal(err)
	}
	note, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector("#funnel p") || {}).textContent || ""`))
	if err != nil {
		t.Fatal(err)
	}
	if note != want {
		t.Errorf("funnel note: got %q, want %q", note, want)
	}
	// The days after the cut still count: January 11 to 20, one visit each.
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll("#funnel-table tr")).slice(1).
		map(function (tr) { return tr.cells[1].textContent; }).join(",")`))
	if err != nil {
		t.Fatal(err)
	}
	if rows != "1,1" {
		t.Errorf("funnel visitors: got %q, want 1,1 (one visitor on the kept days)", rows)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
