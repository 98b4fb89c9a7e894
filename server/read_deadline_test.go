package server

import (
	"testing"
	"time"
)

// TestReadsStopAtTheQueryTimeout: every read of the query API has the
// query timeout as its deadline and answers 503 query_timeout past it,
// never a 500 or an answer after as long as the database takes; an
// answer the read gave of its own (a 400) stays. A timeout of 1 ns is
// past before any read begins.
func TestReadsStopAtTheQueryTimeout(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.QueryTimeout = time.Nanosecond })
	tn := h.setupTenant("acme", "web")
	h.sendQ("web", 1, qev{anon: "a", typ: "pageview", url: "https://shop.test/", ts: utc(1, 20, 12, 0)})
	query := map[string]any{"metrics": list("visitors"), "date_range": list("2026-01-01", "2026-01-31"),
		"filters": []any{[]any{"matches", "event:page", list("^/")}}}
	days := "?from=2026-01-01&to=2026-01-31"
	for _, c := range []struct {
		method, path string
		body         any
		status       int
		code         string
	}{
		{"POST", "/v1/sites/web/query", query, 503, "query_timeout"},
		{"POST", "/api/v2/query", map[string]any{"site_id": "web", "metrics": list("pageviews"), "date_range": "all"}, 503, "query_timeout"},
		{"GET", "/v1/sites/web/pageviews" + days, nil, 503, "query_timeout"},
		{"GET", "/v1/sites/web/events" + days, nil, 503, "query_timeout"},
		{"GET", "/v1/sites/web/sessions" + days, nil, 503, "query_timeout"},
		{"GET", "/v1/sites/web/breakdown" + days + "&dimension=url", nil, 503, "query_timeout"},
		{"GET", "/v1/sites/web/users/u/timeline", nil, 503, "query_timeout"},
		{"GET", "/v1/sites/web/realtime", nil, 503, "query_timeout"},
		{"GET", "/v1/sites/web/properties", nil, 503, "query_timeout"},
		{"GET", "/v1/sites/web/export" + days + "&format=csv", nil, 503, "query_timeout"},
		{"POST", "/v1/sites/web/funnel", map[string]any{"steps": list("A", "B"), "date_range": "7d"}, 503, "query_timeout"},
		{"POST", "/v1/sites/web/query", map[string]any{"metrics": list("visitorz"), "date_range": "7d"}, 400, "invalid_query"},
	} {
		r := h.q(c.method, c.path, tn.readKey, c.body)
		code := r.code()
		if c.path == "/api/v2/query" {
			code = "query_timeout" // Plausible's body has no code: its message is checked below
			mustPlausibleStatus(t, r, c.status, "QUERY_TIMEOUT")
		}
		if r.status != c.status || code != c.code {
			t.Errorf("%s %s: got %d %q, want %d %q; body %s", c.method, c.path, r.status, r.code(), c.status, c.code, r.body)
		}
	}
}
