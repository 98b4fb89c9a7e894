package server

import (
	"testing"
)

// TestQueryEventsThroughVisits: filtered reports read events through the
// visits that overlap the range (docs/query-api.md#how-reports-stay-fast); a
// visit across the range's start or end, a cookieless visitor's, and a late
// event that joins a visit before the range to one inside it, all by hand.
func TestQueryEventsThroughVisits(t *testing.T) {
	t.Parallel()
	h, tn := newQueryHarness(t)
	m := list("visitors", "visits", "pageviews")
	in := func(from, to string, filters ...any) map[string]any {
		return map[string]any{"metrics": m, "date_range": list(from, to), "filters": filters}
	}
	tests := []struct {
		name string
		body map[string]any
		want string
	}{
		// A2 (from Google) starts Jan 12 23:50; its /blog/b at 00:10 is in.
		{"visit across the range's start", in("2026-01-13T00:00:00Z", "2026-01-13T01:00:00Z",
			[]any{"is", "visit:source", list("Google")}, []any{"contains", "event:page", list("/blog")}), "1 1 1"},
		// B1 (US) runs 22:45-23:10; only its / at 22:45 is in.
		{"visit across the range's end", in("2026-01-12T22:00:00Z", "2026-01-12T23:00:00Z",
			[]any{"is", "visit:country", list("US")}, []any{"is", "event:name", list("pageview")}), "1 1 1"},
		// C, cookieless and direct: / at 08:00 is before the range, /docs in.
		{"cookieless visitor", in("2026-01-15T08:00:30Z", "2026-01-15T12:00:00Z",
			[]any{"is", "visit:source", list("Direct / None")}, []any{"contains", "event:page", list("/docs")}), "1 1 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := queryRows(t, h, tn.readKey, "web", tt.body); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
	// f lands from a mail campaign at 23:20 on Jan 12 and comes back at
	// 00:05, 45 minutes later: a second, direct visit.
	h.sendQ("web", 101, qev{anon: "f", typ: "pageview", url: "https://shop.test/?utm_source=mail", ts: utc(1, 12, 23, 20), ua: chromeUA})
	h.sendQ("web", 102, qev{anon: "f", typ: "pageview", url: "https://shop.test/blog/c", ts: utc(1, 13, 0, 5), ua: chromeUA})
	mail := in("2026-01-13", "2026-01-13", []any{"is", "visit:source", list("mail")}, []any{"contains", "event:page", list("/blog/c")})
	if got, want := queryRows(t, h, tn.readKey, "web", mail), "0 0 0"; got != want {
		t.Errorf("two visits: got %s, want %s", got, want)
	}
	// A late event at 23:45 joins them: one visit from mail, begun before
	// the range, whose /blog/c is in it.
	h.sendQ("web", 103, qev{anon: "f", typ: "pageview", url: "https://shop.test/x", ts: utc(1, 12, 23, 45), ua: chromeUA})
	if got, want := queryRows(t, h, tn.readKey, "web", mail), "1 1 1"; got != want {
		t.Errorf("joined by a late event: got %s, want %s", got, want)
	}
}
