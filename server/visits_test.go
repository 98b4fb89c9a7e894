package server

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/tally-analytics/tally/privacy"
)

// visitRow is the visit columns of the site's only session.
func (h *harness) visitRow(site string) (anon string, cols string) {
	h.t.Helper()
	var vals [11]sql.NullString
	err := h.sqlDB().QueryRow(`SELECT anon_id, entry_page, exit_page, pageviews, referrer, source, utm_source, utm_medium, utm_campaign, utm_term, utm_content
		FROM sessions WHERE site_id = ?`, site).Scan(&vals[0], &vals[1], &vals[2], &vals[3], &vals[4], &vals[5], &vals[6], &vals[7], &vals[8], &vals[9], &vals[10])
	if err != nil {
		h.t.Fatal(err)
	}
	parts := make([]string, 0, 10)
	for _, v := range vals[1:] {
		parts = append(parts, nullStr(v))
	}
	return vals[0].String, strings.Join(parts, " ")
}

// Each intake gives the visit its campaign: Segment's context.campaign
// (a message's own, else its batch's) wins over the URL's utm_*
// parameters field by field; Tally's own events take the URL's; a
// cookieless event keeps no query string, so its visit has no utm_*.
func TestVisitCampaignByIntake(t *testing.T) {
	t.Parallel()
	const cols = "entry_page exit_page pageviews referrer source utm_source utm_medium utm_campaign utm_term utm_content"
	t.Run("Segment context.campaign", func(t *testing.T) {
		h := newHarness(t)
		h.setupTenant("acme", "shop")
		page := `{"type":"page","anonymousId":"a1","timestamp":"2026-01-31T09:00:00.000Z",` +
			`"properties":{"url":"https://shop.test/spring?utm_source=url&utm_medium=email&utm_term=t1","referrer":"https://www.news.test/story/"},` +
			`"context":{"campaign":{"name":"Spring Sale","source":"newsletter"}}}`
		later := `{"type":"page","anonymousId":"a1","timestamp":"2026-01-31T09:01:00.000Z","properties":{"url":"https://shop.test/cart"},` +
			`"context":{"campaign":{"name":"other","source":"other"}}}`
		segmentOKAnswer(t, h.segmentPost("/v1/batch", "shop", `{"batch":[`+later+`,`+page+`]}`))
		want := "/spring /cart 2 news.test/story newsletter newsletter email Spring Sale t1 <null>"
		if _, got := h.visitRow("shop"); got != want {
			t.Fatalf("got %s, want %s (%s)", got, want, cols)
		}
	})
	t.Run("Segment campaign of the batch", func(t *testing.T) {
		h := newHarness(t)
		h.setupTenant("acme", "shop")
		body := `{"batch":[{"type":"track","anonymousId":"a1","event":"Viewed","properties":{"url":"https://shop.test/p"}}],` +
			`"context":{"campaign":{"medium":"cpc","content":"banner"}}}`
		segmentOKAnswer(t, h.segmentPost("/v1/batch", "shop", body))
		want := "<null> <null> 0 <null> <null> <null> cpc <null> <null> banner"
		if _, got := h.visitRow("shop"); got != want {
			t.Fatalf("got %s, want %s (%s)", got, want, cols)
		}
	})
	t.Run("Tally event: the URL's utm parameters", func(t *testing.T) {
		h := newHarness(t)
		h.setupTenant("acme", "web")
		intake(t, h.c("POST", "/events", "web", ev("web", 1, map[string]any{
			"url": "https://example.test/landing?utm_source=ads&utm_campaign=c%201", "referrer": "https://example.test/self"}), "User-Agent", chromeUA))
		want := "/landing /landing 1 <null> ads ads <null> c 1 <null> <null>"
		if _, got := h.visitRow("web"); got != want {
			t.Fatalf("got %s, want %s (%s)", got, want, cols)
		}
	})
	t.Run("cookieless visit", func(t *testing.T) {
		h := newHarness(t)
		h.setupTenant("acme", "web")
		for i, u := range []string{"https://example.test/a?utm_source=ads", "https://example.test/b"} {
			intake(t, h.c("POST", "/events", "web", ev("web", i+1, map[string]any{"consent": "denied", "url": u,
				"referrer": "https://www.search.test/results?q=me", "ts": "2026-01-31T09:0" + string(rune('0'+i)) + ":00.000Z"}), "User-Agent", chromeUA))
		}
		anon, got := h.visitRow("web")
		want := "/a /b 2 search.test/results search.test <null> <null> <null> <null> <null>"
		if !privacy.IsCookielessID(anon) || got != want {
			t.Fatalf("got visitor %s with %s, want a cookieless visitor with %s (%s)", anon, got, want, cols)
		}
	})
}
