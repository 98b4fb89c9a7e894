package server

import "testing"

// TestQuerySessionMetricsByPage: session metrics by event:page are the
// visits' that entered on each page, and bounce_rate under an event:page
// filter counts the visits that entered on the pages it names, as
// Plausible answers them (docs/query-api.md); by hand.
func TestQuerySessionMetricsByPage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	for i, e := range []qev{
		// a enters on /ignore and sees /plausible.io a minute later.
		{anon: "a", url: "https://shop.test/ignore", ts: utc(1, 5, 10, 0)},
		{anon: "a", url: "https://shop.test/plausible.io", ts: utc(1, 5, 10, 1)},
		// b enters on /important-page, then /.
		{anon: "b", url: "https://shop.test/important-page", ts: utc(1, 5, 10, 0)},
		{anon: "b", url: "https://shop.test/", ts: utc(1, 5, 10, 1)},
		// c bounces on /plausible.io.
		{anon: "c", url: "https://shop.test/plausible.io", ts: utc(1, 5, 10, 1)},
	} {
		e.typ, e.ua = "pageview", chromeUA
		h.sendQ("web", i+1, e)
	}
	pages := []any{"is", "event:page", list("/plausible.io", "/important-page")}
	tests := []struct {
		name string
		body map[string]any
		want string
	}{
		{"bounce_rate under an event:page filter: the visits that entered there", q(list("visitors", "bounce_rate"), list("visit:browser"), pages),
			"Chrome: 3 50"},
		{"the same without a dimension", q(list("visitors", "visits", "bounce_rate"), nil, pages), "3 3 50"},
		{"bounce_rate by page under a page filter", q(list("bounce_rate"), list("event:page"), pages),
			"/important-page: 0; /plausible.io: 100"},
		{"session metrics by page", q(list("visits", "bounce_rate", "visit_duration", "views_per_visit"), list("event:page")),
			"/: 1 0 0 0; /ignore: 1 0 60 2; /important-page: 1 0 60 2; /plausible.io: 2 100 0 1"},
		{"a filter on another page", q(list("bounce_rate"), nil, []any{"is", "event:page", list("/")}), "0"},
		// matches is resolved into values on PostgreSQL: the entry page's too
		// (it once read 0 there, 50 on SQLite).
		{"the same with matches", q(list("visitors", "visits", "bounce_rate"), nil, []any{"matches", "event:page", list("^/(plausible\\.io|important-page)$")}), "3 3 50"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sortedRows(queryRows(t, h, tn.readKey, "web", tt.body)); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
	r := h.q("POST", "/v1/sites/web/query", tn.readKey, q(list("bounce_rate"), list("event:name")))
	mustStatus(t, r, 400, "unsupported_query")
}
