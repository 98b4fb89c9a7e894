package server

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tally-analytics/tally/internal/dbtest"
	"github.com/tally-analytics/tally/storage"
)

// cookielessID matches a consent-denied visitor's id, made from a daily
// salt each database draws at random: the one part of an answer that
// differs between two databases fed the same events.
var cookielessID = regexp.MustCompile(`c_[0-9a-f]{16,64}`)

// TestReadsAnswerAlikeOnBothBackends feeds the query API's data set to a
// server on SQLite and to one on PostgreSQL and compares every read's
// answer byte for byte (docs/postgresql.md#on-postgresql): the query
// API over every dimension, as breakdown and as filter, time buckets in
// zones, comparisons, total rows, time labels, pagination and CSV; the
// Plausible route; pageviews, sessions, event counts, the breakdown,
// property names, realtime, the timeline and export in both formats.
func TestReadsAnswerAlikeOnBothBackends(t *testing.T) {
	t.Parallel()
	dbtest.OnlyPostgres(t, "compares a server on SQLite with one on the run's PostgreSQL")
	pg, pgTenant := newQueryHarness(t)
	lite := newHarnessOn(t, storage.Options{Path: filepath.Join(t.TempDir(), "lite.db")}, withProxyGeo)
	liteTenant := lite.setupTenant("acme", "web")
	for i, e := range queryDataSet {
		lite.sendQ("web", i+1, e)
	}
	for _, h := range []*harness{pg, lite} {
		mustStatus(t, h.q("PATCH", "/v1/sites/web", testAdminToken, map[string]any{"time_zone": "America/New_York"}), 200, "")
	}

	type read struct {
		method, path string
		body         map[string]any
	}
	var reads []read
	query := func(b map[string]any) {
		b["site_id"] = "web"
		if _, ok := b["date_range"]; !ok {
			b["date_range"] = january
		}
		reads = append(reads, read{"POST", "/v1/sites/web/query", b})
	}
	all := list("visitors", "visits", "pageviews", "events", "bounce_rate", "visit_duration", "views_per_visit")
	dims := list("event:page", "event:name", "event:props:plan", "visit:entry_page", "visit:exit_page", "visit:source", "visit:referrer",
		"visit:utm_source", "visit:utm_medium", "visit:utm_campaign", "visit:utm_term", "visit:utm_content", "visit:country", "visit:city",
		"visit:browser", "visit:os", "visit:device")
	query(map[string]any{"metrics": all})
	for _, d := range dims {
		if strings.HasPrefix(d, "event:") {
			query(map[string]any{"metrics": list("visitors", "visits", "pageviews", "events"), "dimensions": list(d)})
		} else {
			query(map[string]any{"metrics": all, "dimensions": list(d)})
		}
		query(map[string]any{"metrics": list("visitors", "pageviews"), "dimensions": list(d, "time:day")})
		for _, op := range []string{"is", "is_not", "contains", "contains_not", "matches", "matches_not"} {
			values := list("/pricing", "pageview", "pro", "Direct / None", "Chrome", "DE", "Berlin", "news", "desktop")
			switch {
			case op == "matches" || op == "matches_not":
				values = list(`^/p`, `(?i)^d`, `o$`)
			case d == "visit:country":
				values = list("DE", "US")
			}
			query(map[string]any{"metrics": list("visitors", "visits", "pageviews", "events"), "filters": []any{[]any{op, d, values}}})
		}
	}
	for _, unit := range list("time", "time:hour", "time:day", "time:week", "time:month") {
		query(map[string]any{"metrics": all, "dimensions": list(unit)})
		query(map[string]any{"metrics": all, "dimensions": list(unit), "date_range": list("2026-01-12T20:00:00-05:00", "2026-01-13T02:00:00-05:00")})
	}
	for _, rng := range []any{"day", "7d", "30d", "month", "6mo", "12mo", "year", "all", list("2025-12-31", "2026-01-01")} {
		query(map[string]any{"metrics": all, "date_range": rng})
	}
	for _, mode := range []string{"previous_period", "year_over_year"} {
		query(map[string]any{"metrics": list("visitors", "pageviews", "bounce_rate"), "dimensions": list("time:day"),
			"include": map[string]any{"comparisons": map[string]any{"mode": mode}}})
	}
	query(map[string]any{"metrics": list("visits"), "dimensions": list("visit:source"), "include": map[string]any{"comparisons": map[string]any{
		"mode": "custom", "date_range": list("2026-01-01", "2026-01-11")}}})
	query(map[string]any{"metrics": list("pageviews"), "dimensions": list("time:day"), "include": map[string]any{"time_labels": true, "total_rows": true},
		"pagination": map[string]any{"limit": 2, "offset": 1}})
	query(map[string]any{"metrics": list("visitors", "pageviews"), "dimensions": list("event:page"), "order_by": []any{list("pageviews", "asc"), list("event:page", "desc")}})
	query(map[string]any{"metrics": list("visitors"), "dimensions": list("visit:country"), "filters": []any{
		[]any{"or", []any{[]any{"is", "visit:country", list("US")}, []any{"contains", "event:page", list("blog"), map[string]any{"case_sensitive": false}}}}}})
	reads = append(reads,
		read{"POST", "/api/v2/query", map[string]any{"site_id": "web", "metrics": all, "date_range": january, "dimensions": list("visit:source")}},
		read{"POST", "/v1/sites/web/query?format=csv", map[string]any{"site_id": "web", "metrics": list("visitors", "pageviews"), "date_range": january, "dimensions": list("event:page")}},
		read{"GET", "/v1/sites/web/pageviews?from=2026-01-01&to=2026-01-31", nil},
		read{"GET", "/v1/sites/web/sessions?from=2026-01-01&to=2026-01-31", nil},
		read{"GET", "/v1/sites/web/events?from=2026-01-01&to=2026-01-31", nil},
		read{"GET", "/v1/sites/web/breakdown?dimension=country&from=2026-01-01&to=2026-01-31", nil},
		read{"GET", "/v1/sites/web/breakdown?dimension=url&from=2026-01-01&to=2026-01-31", nil},
		read{"GET", "/v1/sites/web/properties", nil},
		read{"GET", "/v1/sites/web/realtime", nil},
		read{"GET", "/v1/sites/web/users/u-erase/timeline", nil},
		read{"GET", "/v1/sites/web/export?from=2025-12-01&to=2026-01-31&format=ndjson", nil},
		read{"GET", "/v1/sites/web/export?from=2025-12-01&to=2026-01-31&format=csv", nil},
	)
	for _, r := range reads {
		name := r.method + " " + r.path
		if r.body != nil {
			name += " " + mustJSONText(r.body)
		}
		t.Run(name, func(t *testing.T) {
			want := lite.q(r.method, r.path, liteTenant.readKey, r.body)
			got := pg.q(r.method, r.path, pgTenant.readKey, r.body)
			if want.status != 200 {
				t.Fatalf("SQLite answered %d %s, want 200 (the read itself is wrong)", want.status, want.body)
			}
			w, g := cookielessID.ReplaceAll(want.body, []byte("c_…")), cookielessID.ReplaceAll(got.body, []byte("c_…"))
			if got.status != want.status || string(g) != string(w) {
				t.Errorf("PostgreSQL: got %d %s\nwant %d %s", got.status, g, want.status, w)
			}
		})
	}
}
