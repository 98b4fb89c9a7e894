package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tally-analytics/tally/internal/dbtest"
)

// seedReadRows writes the same events and visits to db, with the columns
// the PostgreSQL writer adds (path, props, received_ms) where db is on
// PostgreSQL. The raw is the wire text as is, which both backends keep
// where the compressed form cannot take it. Until the write path is
// ported, reads are tested on rows seeded here.
func seedReadRows(t *testing.T, db *DB) {
	t.Helper()
	ctx := context.Background()
	type ev struct {
		anon, typ, url, ts, country, props string
	}
	events := []ev{
		{"v1", "pageview", "https://acme.example/", "2026-01-05T09:05:00.120Z", "DE", `{"plan":"pro","n":1e2}`},
		{"v1", "pageview", "https://acme.example/pricing?x=1", "2026-01-05T09:06:00.000Z", "DE", `{"plan":"Pro","z":-0}`},
		{"v1", "signup", "https://acme.example/pricing", "2026-01-05T09:07:30.999Z", "DE", `{"plan":"é","nested":{"a": [1, 2]}}`},
		{"v2", "pageview", "https://acme.example/blog/ü", "2026-01-06T23:59:59.500Z", "FR", `{"plan":"Z","plan":"a"}`},
		{"v2", "pageview", "https://acme.example/", "2026-01-07T00:00:00.000Z", "FR", `{"plan":null}`},
		{"v3", "pageview", "https://acme.example/Docs", "2026-01-12T12:00:00.000Z", "", `{"plan":"z","u":"\u00e9\ud83d\ude00"}`},
		{"v3", "click", "", "2026-01-12T12:00:05.000Z", "", ``},
	}
	type visit struct {
		anon       string
		start, end string
		n, views   int
	}
	visits := []visit{
		{"v1", "2026-01-05T09:05:00.120Z", "2026-01-05T09:07:30.999Z", 3, 2},
		{"v2", "2026-01-06T23:59:59.500Z", "2026-01-07T00:00:00.000Z", 2, 2},
		{"v3", "2026-01-12T12:00:00.000Z", "2026-01-12T12:00:05.000Z", 2, 1},
	}
	ms := func(ts string) int64 {
		tm, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			t.Fatal(err)
		}
		return tm.UnixMilli()
	}
	pg := db.d.Name() == "postgres"
	for i, v := range visits {
		if _, err := db.write.ExecContext(ctx, `INSERT INTO sessions(id, site_id, anon_id, start_text, end_text, event_count, pageviews,
			start_ms, duration_ms, country) VALUES (?, 's', ?, '', '', ?, ?, ?, ?, 'DE')`,
			i+1, v.anon, v.n, v.views, ms(v.start), ms(v.end)-ms(v.start)); err != nil {
			t.Fatalf("session %d: %v", i+1, err)
		}
	}
	for i, e := range events {
		raw := fmt.Sprintf(`{"type":%q,"anon_id":%q}`, e.typ, e.anon)
		var props any
		if e.props != "" {
			raw = fmt.Sprintf(`{"type":%q,"anon_id":%q,"properties":%s}`, e.typ, e.anon, e.props)
			props = e.props
		}
		var url, country any
		if e.url != "" {
			url = e.url
		}
		if e.country != "" {
			country = e.country
		}
		received := FormatTime(time.UnixMilli(ms(e.ts) + 20).UTC())
		if pg {
			var path any
			if url != nil {
				path = PagePath(e.url)
			}
			_, err := db.write.ExecContext(ctx, `INSERT INTO events(seq, id_text, site_id, type, url, ts, anon_id, raw, received_at, country, path, props, received_ms)
				VALUES (?, ?, 's', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				i+1, fmt.Sprintf("id-%d", i+1), e.typ, url, e.ts, e.anon, []byte(raw), received, country, path, props, ms(received))
			if err != nil {
				t.Fatalf("event %d: %v", i+1, err)
			}
			var name any
			if e.typ != "pageview" {
				name = e.typ
			}
			if _, err := db.write.ExecContext(ctx, `INSERT INTO event_pages(seq, name, path) VALUES (?, ?, ?)`, i+1, name, path); err != nil {
				t.Fatalf("event page %d: %v", i+1, err)
			}
			continue
		}
		if _, err := db.write.ExecContext(ctx, `INSERT INTO events(seq, id_text, site_id, type, url, ts, anon_id, raw, received_at, country)
			VALUES (?, ?, 's', ?, ?, ?, ?, ?, ?, ?)`,
			i+1, fmt.Sprintf("id-%d", i+1), e.typ, url, e.ts, e.anon, raw, received, country); err != nil {
			t.Fatalf("event %d: %v", i+1, err)
		}
	}
	if pg {
		// The ids were given: the identities go on after them, so that
		// the writer's rows (seedFunnelRows) follow.
		for _, c := range [][2]string{{"events", "seq"}, {"sessions", "id"}} {
			if _, err := db.write.ExecContext(ctx, `SELECT setval(pg_get_serial_sequence('`+c[0]+`', '`+c[1]+`'), (SELECT MAX(`+c[1]+`) FROM `+c[0]+`))`); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestReadsMatchAcrossBackends reads the same rows from SQLite and from
// PostgreSQL and compares every answer's JSON
// (docs/postgresql.md#on-postgresql).
func TestReadsMatchAcrossBackends(t *testing.T) {
	t.Parallel()
	dbtest.OnlyPostgres(t, "compares SQLite with the run's PostgreSQL")
	ctx := context.Background()
	pg, err := openTestDB(t, ctx, Options{Path: filepath.Join(t.TempDir(), "pg.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	lite := openSQLite(t, filepath.Join(t.TempDir(), "lite.db"))
	seedReadRows(t, lite)
	seedReadRows(t, pg)

	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	to := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	berlin, _ := time.LoadLocation("Europe/Berlin")
	la, _ := time.LoadLocation("America/Los_Angeles")
	kolkata, _ := time.LoadLocation("Asia/Kolkata")
	all := []string{MetricVisitors, MetricVisits, MetricPageviews, MetricEvents, MetricBounceRate, MetricVisitDuration}
	queries := map[string]StatsQuery{
		"aggregate":       {Metrics: all},
		"by page":         {Metrics: all[:4], Dimensions: []string{"event:page"}},
		"by name":         {Metrics: all[:4], Dimensions: []string{"event:name"}},
		"by plan":         {Metrics: all[:4], Dimensions: []string{PropPrefix + "plan"}},
		"by n":            {Metrics: all[:4], Dimensions: []string{PropPrefix + "n"}},
		"by nested":       {Metrics: all[:4], Dimensions: []string{PropPrefix + "nested"}},
		"by z":            {Metrics: all[:4], Dimensions: []string{PropPrefix + "z"}},
		"by u":            {Metrics: all[:4], Dimensions: []string{PropPrefix + "u"}},
		"by country":      {Metrics: all, Dimensions: []string{"visit:country"}},
		"contains":        {Metrics: all[:4], Filters: []QueryFilter{{Op: "contains", Dim: "event:page", Values: []string{"pric"}}}},
		"contains folded": {Metrics: all[:4], Filters: []QueryFilter{{Op: "contains", Dim: PropPrefix + "plan", Values: []string{"PRO"}, Fold: true}}},
		"is":              {Metrics: all[:4], Filters: []QueryFilter{{Op: "is", Dim: "event:page", Values: []string{"/"}}}},
		"matches page":    {Metrics: all[:4], Filters: []QueryFilter{{Op: "matches", Dim: "event:page", Values: []string{`^/(pri|blog/\pL)`}}}},
		"matches plan":    {Metrics: all[:4], Dimensions: []string{PropPrefix + "plan"}, Filters: []QueryFilter{{Op: "matches", Dim: PropPrefix + "plan", Values: []string{`(?i)^pro$`, `^\z`}}}},
		"matches folded":  {Metrics: all[:4], Filters: []QueryFilter{{Op: "matches", Dim: "event:page", Values: []string{`^/docs$`}, Fold: true}}},
		"matches not":     {Metrics: all[:4], Dimensions: []string{"event:page"}, Filters: []QueryFilter{{Op: "matches_not", Dim: "event:page", Values: []string{`^/$`}}}},
		"matches visit":   {Metrics: all, Filters: []QueryFilter{{Op: "matches", Dim: "visit:country", Values: []string{`^D.$`}}}},
		"or of matches":   {Metrics: all[:4], Filters: []QueryFilter{{Op: "or", Children: []QueryFilter{{Op: "matches", Dim: "event:name", Values: []string{`^sign`}}, {Op: "contains", Dim: "event:page", Values: []string{"Docs"}}}}}},
		"empty or":        {Metrics: all[:4], Filters: []QueryFilter{{Op: "or"}}},
	}
	for _, unit := range []string{"hour", "day", "week", "month"} {
		for _, zone := range []*time.Location{time.UTC, berlin, la, kolkata} {
			queries["time by "+unit+" in "+zone.String()] = StatsQuery{Metrics: all, Dimensions: []string{"time"}, TimeUnit: unit, Zone: zone}
			queries["events by "+unit+" in "+zone.String()] = StatsQuery{Metrics: all[:4], Dimensions: []string{"time", "event:page"}, TimeUnit: unit, Zone: zone}
		}
	}
	for name, q := range queries {
		t.Run(name, func(t *testing.T) {
			q.Site, q.From, q.To = "s", from, to
			want := answerJSON(t, func() (any, error) { return lite.Stats(ctx, q) })
			got := answerJSON(t, func() (any, error) { return pg.Stats(ctx, q) })
			if got != want {
				t.Errorf("got %s, want %s", got, want)
			}
		})
	}
	reads := map[string]func(db *DB) (any, error){
		"property names": func(db *DB) (any, error) { return db.PropertyNames(ctx, "s", 1000) },
		"site events":    func(db *DB) (any, error) { return db.SiteEvents(ctx, "s") },
		"realtime": func(db *DB) (any, error) {
			return db.RealtimeVisitors(ctx, "s", time.Date(2026, 1, 6, 0, 0, 0, 0, time.UTC), 1000)
		},
		"export": func(db *DB) (any, error) {
			var all []ExportEvent
			err := db.ExportEvents(ctx, "s", from, to, 0, func(page []ExportEvent) error {
				all = append(all, page...)
				return nil
			})
			return all, err
		},
		"event counts": func(db *DB) (any, error) { return db.EventCounts(ctx, "s", from, to) },
	}
	seedFunnelRows(t, lite)
	seedFunnelRows(t, pg)
	for name, read := range funnelAndGoalReads(t, ctx) {
		reads[name] = read
	}
	seedImportedRows(t, lite)
	seedImportedRows(t, pg)
	for name, read := range importedReads(ctx) {
		reads[name] = read
	}
	for name, read := range reads {
		t.Run(name, func(t *testing.T) {
			want := answerJSON(t, func() (any, error) { return read(lite) })
			got := answerJSON(t, func() (any, error) { return read(pg) })
			if got != want {
				t.Errorf("got %s, want %s", got, want)
			}
		})
	}
}

// seedVisitRows stores visits of site w through intake (docs/intake.md#visits):
// entry and exit pages, referrers and their sources, campaigns from URLs
// and from Segment's context.campaign, locations and devices, sessions
// across midnight in several zones, an identified user.
func seedVisitRows(t *testing.T, db *DB) {
	t.Helper()
	withSites(t, db, "w")
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	type e struct {
		anon, typ, url, ref, ts, country, city, browser, os, device, user, campaign string
	}
	list := []e{
		{"a", "pageview", "https://acme.example/?utm_source=news&utm_medium=mail&utm_campaign=spring", "https://www.google.com/search?q=x", "2026-01-05T09:05:00.120Z", "DE", "Berlin", "Chrome", "Windows", "desktop", "", ""},
		{"a", "pageview", "https://acme.example/pricing", "https://acme.example/", "2026-01-05T09:06:00.000Z", "DE", "Berlin", "Chrome", "Windows", "desktop", "", ""},
		{"a", "signup", "https://acme.example/pricing", "", "2026-01-05T09:07:30.999Z", "DE", "Berlin", "Chrome", "Windows", "desktop", "u1", ""},
		{"a", "pageview", "https://acme.example/blog/ü", "https://news.ycombinator.com/item?id=1", "2026-01-09T18:00:00.000Z", "DE", "Hamburg", "Chrome", "Windows", "desktop", "u1", ""},
		{"b", "pageview", "https://acme.example/Docs", "", "2026-01-06T23:59:59.500Z", "FR", "Paris", "Safari", "iOS", "mobile", "", `{"name":"winter","source":"ads","medium":"cpc","term":"café","content":"banner"}`},
		{"b", "pageview", "https://acme.example/", "", "2026-01-07T00:10:00.000Z", "FR", "Paris", "Safari", "iOS", "mobile", "", ""},
		{"c", "click", "", "", "2026-01-12T12:00:05.000Z", "", "", "", "", "", "", ""},
		{"c", "pageview", "https://acme.example/Docs?ref=producthunt", "https://t.co/abc", "2026-01-12T12:00:00.000Z", "US", "", "Firefox", "Linux", "desktop", "", ""},
		{"d", "pageview", "https://acme.example/", "android-app://com.slack", "2026-01-31T23:30:00.000Z", "IN", "Mumbai", "Chrome", "Android", "mobile", "", ""},
		{"d", "pageview", "https://acme.example/pricing", "", "2026-02-01T00:20:00.000Z", "IN", "Mumbai", "Chrome", "Android", "mobile", "", ""},
	}
	var events []IngestEvent
	for i, x := range list {
		ev := IngestEvent{ID: fmt.Sprintf("w-%d", i+1), SiteID: "w", Type: x.typ, AnonID: x.anon, TS: at(x.ts),
			Country: x.country, City: x.city, Browser: x.browser, OS: x.os, DeviceType: x.device, Credential: "site",
			ReceivedAt: at(x.ts).Add(20 * time.Millisecond)}
		ev.Raw = []byte(fmt.Sprintf(`{"type":%q,"anon_id":%q}`, x.typ, x.anon))
		if x.campaign != "" {
			ev.Raw = []byte(fmt.Sprintf(`{"type":"page","anonymousId":%q,"context":{"campaign":%s}}`, x.anon, x.campaign))
			ev.Campaign = ParseCampaign([]byte(x.campaign))
		}
		if x.url != "" {
			ev.URL = &x.url
		}
		if x.ref != "" {
			ev.Referrer = &x.ref
		}
		if x.user != "" {
			ev.UserID = &x.user
		}
		events = append(events, ev)
	}
	// Out of order, in two runs: the visits must not depend on arrival.
	ingestAll(t, db, events[5:]...)
	ingestAll(t, db, events[:5]...)
}

// TestVisitReadsMatchAcrossBackends reads visits stored through intake
// from SQLite and from PostgreSQL: every visit dimension, as breakdown and
// as filter, visit metrics by time in several zones, sessions, timeline
// and first visit (docs/intake.md#visits, docs/query-api.md).
func TestVisitReadsMatchAcrossBackends(t *testing.T) {
	t.Parallel()
	dbtest.OnlyPostgres(t, "compares SQLite with the run's PostgreSQL")
	ctx := context.Background()
	pg, err := openTestDB(t, ctx, Options{Path: filepath.Join(t.TempDir(), "pg.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	lite := openSQLite(t, filepath.Join(t.TempDir(), "lite.db"))
	seedVisitRows(t, lite)
	seedVisitRows(t, pg)

	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	to := time.Date(2026, 2, 2, 0, 0, 0, 0, time.UTC)
	berlin, _ := time.LoadLocation("Europe/Berlin")
	la, _ := time.LoadLocation("America/Los_Angeles")
	kolkata, _ := time.LoadLocation("Asia/Kolkata")
	all := []string{MetricVisitors, MetricVisits, MetricPageviews, MetricEvents, MetricBounceRate, MetricVisitDuration}
	queries := map[string]StatsQuery{"aggregate": {Metrics: all}}
	for _, dim := range []string{"visit:entry_page", "visit:exit_page", "visit:source", "visit:referrer", "visit:utm_source", "visit:utm_medium",
		"visit:utm_campaign", "visit:utm_term", "visit:utm_content", "visit:country", "visit:city", "visit:browser", "visit:os", "visit:device"} {
		queries["by "+dim] = StatsQuery{Metrics: all, Dimensions: []string{dim}}
		queries["by "+dim+" and page"] = StatsQuery{Metrics: all[:4], Dimensions: []string{dim, "event:page"}}
		queries["is "+dim] = StatsQuery{Metrics: all, Filters: []QueryFilter{{Op: "is", Dim: dim, Values: []string{"Berlin", "news", "/", "Google", "mobile", "DE"}}}}
		queries["is not "+dim] = StatsQuery{Metrics: all, Filters: []QueryFilter{{Op: "is_not", Dim: dim, Values: []string{"Berlin", "news", "/", "Google", "mobile", "DE"}}}}
		queries["contains "+dim] = StatsQuery{Metrics: all, Dimensions: []string{dim}, Filters: []QueryFilter{{Op: "contains", Dim: dim, Values: []string{"E", "o"}, Fold: true}}}
		queries["matches "+dim] = StatsQuery{Metrics: all, Filters: []QueryFilter{{Op: "matches", Dim: dim, Values: []string{`^[A-Z]`, `^/p`}}}}
	}
	for _, unit := range []string{"hour", "day", "week", "month"} {
		for _, zone := range []*time.Location{time.UTC, berlin, la, kolkata} {
			queries["time by "+unit+" in "+zone.String()] = StatsQuery{Metrics: all, Dimensions: []string{"time"}, TimeUnit: unit, Zone: zone}
			queries["sources by "+unit+" in "+zone.String()] = StatsQuery{Metrics: all, Dimensions: []string{"time", "visit:source"}, TimeUnit: unit, Zone: zone}
		}
	}
	for name, q := range queries {
		t.Run(name, func(t *testing.T) {
			q.Site, q.From, q.To = "w", from, to
			want := answerJSON(t, func() (any, error) { return lite.Stats(ctx, q) })
			got := answerJSON(t, func() (any, error) { return pg.Stats(ctx, q) })
			if got != want {
				t.Errorf("got %s, want %s", got, want)
			}
		})
	}
	reads := map[string]func(db *DB) (any, error){
		"sessions": func(db *DB) (any, error) { return db.Sessions(ctx, "w", from, to) },
		"timeline": func(db *DB) (any, error) {
			list, next, err := db.Timeline(ctx, "w", "u1", 100, time.Time{})
			return []any{list, next}, err
		},
		"first visit": func(db *DB) (any, error) {
			at, ok, err := db.FirstVisit(ctx, "w")
			return []any{at, ok}, err
		},
		"estimate": func(db *DB) (any, error) {
			rows, exact, err := db.StatsEstimate(ctx, StatsQuery{Site: "w", From: from, To: to, Metrics: all, Dimensions: []string{"visit:source"}})
			return []any{rows, exact}, err
		},
		"stored events": func(db *DB) (any, error) { return db.EventRecords(ctx, "w") },
		"site events":   func(db *DB) (any, error) { return db.SiteEvents(ctx, "w") },
	}
	for name, read := range reads {
		t.Run(name, func(t *testing.T) {
			want := answerJSON(t, func() (any, error) { return read(lite) })
			got := answerJSON(t, func() (any, error) { return read(pg) })
			if got != want {
				t.Errorf("got %s, want %s", got, want)
			}
		})
	}
}

func answerJSON(t *testing.T, read func() (any, error)) string {
	t.Helper()
	v, err := read()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPostgresCollationAndNulls checks the orders an answer depends on:
// bytes, not a locale ("Z" before "a", "é" after "z"), and a breakdown's
// (none) and ties the same on both backends.
func TestPostgresCollationAndNulls(t *testing.T) {
	t.Parallel()
	dbtest.OnlyPostgres(t, "compares SQLite with the run's PostgreSQL")
	ctx := context.Background()
	pg, err := openTestDB(t, ctx, Options{Path: filepath.Join(t.TempDir(), "pg.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	lite := openSQLite(t, filepath.Join(t.TempDir(), "lite.db"))
	seedReadRows(t, lite)
	seedReadRows(t, pg)
	var got []string
	rows, err := pg.read.QueryContext(ctx, `SELECT x FROM (SELECT url AS x FROM events UNION ALL SELECT 'Z' UNION ALL SELECT 'a' UNION ALL SELECT 'é' UNION ALL SELECT 'z') y ORDER BY x`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s *string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		if s != nil {
			got = append(got, *s)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	iz, ia, ie, iz2 := -1, -1, -1, -1
	for i, s := range got {
		switch s {
		case "Z":
			iz = i
		case "a":
			ia = i
		case "é":
			ie = i
		case "z":
			iz2 = i
		}
	}
	if !(iz < ia && iz2 < ie) {
		t.Errorf("got order %q, want \"Z\" before \"a\" and \"é\" after \"z\" (bytes)", got)
	}
	q := StatsQuery{Site: "s", From: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC),
		Metrics: []string{MetricVisitors}, Dimensions: []string{PropPrefix + "plan"}}
	want := answerJSON(t, func() (any, error) { return lite.Stats(ctx, q) })
	if got := answerJSON(t, func() (any, error) { return pg.Stats(ctx, q) }); got != want {
		t.Errorf("breakdown with ties and (none): got %s, want %s", got, want)
	}
}

// seedFunnelRows ingests, through the writer, site f's events for the
// funnels and goals compared across backends: random visits over two
// weeks (some across midnight) and a few odd ones (texts of any script, a
// percent-encoded path, a property as a number and as a string, null,
// nested), and site f's goals.
func seedFunnelRows(t *testing.T, db *DB) {
	t.Helper()
	withSites(t, db, "f")
	r := rand.New(rand.NewPCG(17, 2))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pages := []string{"/", "/pricing", "/docs/a", "/blog/a", "/blog/2026/b", "/%C3%BCber", "/Pricing"}
	types := []string{"pageview", "pageview", "pageview", "signup", "purchase", "ünïcödé ✓"}
	props := []string{``, `{"plan":"pro"}`, `{"plan":"Pro"}`, `{"plan":49}`, `{"plan":"49"}`, `{"plan":null}`, `{"plan":{"a":1}}`, `{"plan":"é😀"}`}
	countries := []string{"DE", "FR", ""}
	var events []IngestEvent
	for i := range 1500 {
		v := r.IntN(120)
		ts := start.Add(time.Duration(r.IntN(14*24*3600)) * time.Second)
		if r.IntN(4) == 0 {
			ts = start.AddDate(0, 0, r.IntN(14)).Add(time.Duration(r.IntN(3600)-1800) * time.Second)
		}
		url := "https://shop.test" + pages[r.IntN(len(pages))]
		raw := `{}`
		if p := props[r.IntN(len(props))]; p != "" {
			raw = `{"properties":` + p + `}`
		}
		events = append(events, IngestEvent{ID: fmt.Sprintf("f-%d", i), SiteID: "f", Type: types[r.IntN(len(types))],
			AnonID: fmt.Sprintf("v%d", v), TS: ts, URL: &url, Raw: []byte(raw), Country: countries[v%len(countries)]})
		// A visit's next event a few minutes later, so that steps follow
		// each other within visits.
		for k := range r.IntN(4) {
			next := events[len(events)-1]
			url := "https://shop.test" + pages[r.IntN(len(pages))]
			next.ID, next.URL, next.Type = fmt.Sprintf("f-%d-%d", i, k), &url, types[r.IntN(len(types))]
			next.TS = next.TS.Add(time.Duration(1+r.IntN(300)) * time.Second)
			events = append(events, next)
		}
	}
	// Two events of one millisecond: arrival order decides.
	same := start.AddDate(0, 0, 3).Add(10 * time.Hour)
	u1, u2 := "https://shop.test/pricing", "https://shop.test/"
	events = append(events,
		IngestEvent{ID: "same-1", SiteID: "f", Type: "signup", AnonID: "w", TS: same, URL: &u2, Raw: []byte(`{}`)},
		IngestEvent{ID: "same-2", SiteID: "f", Type: "pageview", AnonID: "w", TS: same, URL: &u1, Raw: []byte(`{}`)})
	for len(events) > 0 {
		n := min(len(events), 500)
		if _, err := db.Ingest(context.Background(), events[:n], nil, nil); err != nil {
			t.Fatal(err)
		}
		events = events[n:]
	}
	site, _ := db.Site("f")
	for _, g := range funnelGoals() {
		if _, err := db.CreateGoal(context.Background(), Actor{Kind: ActorSystem}, site, g); err != nil {
			t.Fatal(err)
		}
	}
}

// funnelGoals are site f's goals, in the order the dashboard's default
// funnel takes them.
func funnelGoals() []NewGoal {
	prop := func(name, event, v string) NewGoal {
		return NewGoal{Name: name, EventName: ptr(event), Property: &GoalProperty{Name: "plan", Value: v}}
	}
	return []NewGoal{pageGoal("Any", "/**"), pageGoal("Pricing", "/pricing"), pageGoal("Blog", "/blog/*"),
		eventGoal("Signup", "signup"), prop("Pro", "purchase", "pro"), prop("49", "purchase", "49"),
		pageGoal("Über", "/über"), eventGoal("Odd", "ünïcödé ✓"), prop("Null", "purchase", "null")}
}

// funnelAndGoalReads are the funnels and goal breakdowns of site f that
// TestReadsMatchAcrossBackends compares: ordered steps, page patterns,
// ranges that cut visits, the site's goals as steps (the default funnel,
// from funnel partials), filters, odd texts; goal figures by the scan
// and from goal partials.
func funnelAndGoalReads(t *testing.T, ctx context.Context) map[string]func(db *DB) (any, error) {
	t.Helper()
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	to := from.AddDate(0, 0, 15)
	berlin, _ := time.LoadLocation("Europe/Berlin")
	goal := func(db *DB, names ...string) ([]Goal, error) {
		goals, err := db.Goals(ctx, "f")
		if err != nil {
			return nil, err
		}
		var steps []Goal
		for _, n := range names {
			for _, g := range goals {
				if g.Name == n {
					steps = append(steps, g)
				}
			}
		}
		return steps, nil
	}
	country := QueryFilter{Op: "is", Dim: "visit:country", Values: []string{"DE"}}
	funnels := map[string]struct {
		steps    []string
		from, to time.Time
		zone     *time.Location
		filters  []QueryFilter
	}{
		"pages then events":  {steps: []string{"Pricing", "Signup", "Pro"}},
		"patterns":           {steps: []string{"Any", "Blog", "Any", "Blog"}},
		"repeated":           {steps: []string{"Pricing", "Pricing", "Signup"}},
		"odd texts":          {steps: []string{"Über", "Odd", "49", "Null"}},
		"window":             {steps: []string{"Any", "Signup"}, from: from.AddDate(0, 0, 3).Add(30 * time.Minute), to: from.AddDate(0, 0, 5).Add(-17 * time.Minute)},
		"in Berlin":          {steps: []string{"Blog", "Pricing", "Signup"}, zone: berlin},
		"visit filter":       {steps: []string{"Pricing", "Signup"}, filters: []QueryFilter{country}},
		"event filter":       {steps: []string{"Any", "Signup"}, filters: []QueryFilter{{Op: "contains", Dim: "event:page", Values: []string{"/BLOG", "ÜBER"}, Fold: true}, {Op: "is_not", Dim: "event:name", Values: []string{"purchase"}}}},
		"matches filter":     {steps: []string{"Any", "Any"}, filters: []QueryFilter{{Op: "matches", Dim: "event:page", Values: []string{`^/(blog|PRICING)`}, Fold: true}}},
		"goal filter":        {steps: []string{"Any", "Signup"}, filters: []QueryFilter{{Op: "not", Children: []QueryFilter{GoalFilter(Goal{PagePath: "/blog/*"})}}}},
		"property filter":    {steps: []string{"Signup", "Pro"}, filters: []QueryFilter{{Op: "is", Dim: PropPrefix + "plan", Values: []string{"pro", "49"}}}},
		"default (partials)": {}, // every goal in order: the dashboard's default funnel
	}
	reads := map[string]func(db *DB) (any, error){}
	for name, f := range funnels {
		reads["funnel "+name] = func(db *DB) (any, error) {
			steps, err := goal(db, f.steps...)
			if f.steps == nil {
				steps, err = db.Goals(ctx, "f")
				steps = defaultFunnelSteps(steps)
			}
			if err != nil {
				return nil, err
			}
			q := FunnelQuery{Site: "f", From: from, To: to, Zone: time.UTC, Steps: steps}
			if !f.from.IsZero() {
				q.From, q.To = f.from, f.to
			}
			if f.zone != nil {
				q.Zone = f.zone
			}
			q.Filters = f.filters
			return db.Funnel(ctx, q)
		}
	}
	metrics := []string{MetricVisitors, MetricEvents, MetricPageviews}
	goalQueries := map[string]StatsQuery{
		"goals":               {Metrics: metrics, Dimensions: []string{GoalDimension}},
		"goals by day":        {Metrics: metrics, Dimensions: []string{"time:day", GoalDimension}, TimeUnit: "day"},
		"goals by country":    {Metrics: metrics, Dimensions: []string{"visit:country", GoalDimension}},
		"some goals":          {Metrics: metrics, Dimensions: []string{GoalDimension}, Filters: []QueryFilter{country}},
		"one goal, by page":   {Metrics: metrics, Dimensions: []string{"event:page"}, Filters: []QueryFilter{GoalFilter(Goal{PagePath: "/blog/*"})}},
		"odd goals":           {Metrics: metrics, Filters: []QueryFilter{{Op: "or", Children: []QueryFilter{GoalFilter(Goal{PagePath: "/über"}), GoalFilter(Goal{EventName: "ünïcödé ✓"}), GoalFilter(Goal{EventName: "purchase", PropName: "plan", PropValue: "49"})}}}},
		"goals in Berlin":     {Metrics: metrics, Dimensions: []string{GoalDimension, "time:week"}, TimeUnit: "week", Zone: berlin},
		"goals from partials": {Metrics: metrics, Dimensions: []string{GoalDimension}},
	}
	for name, gq := range goalQueries {
		reads[name] = func(db *DB) (any, error) {
			goals, err := db.Goals(ctx, "f")
			if err != nil {
				return nil, err
			}
			q := gq
			if name == "some goals" {
				goals = goals[1:6] // as a filter choosing goals leaves them
			}
			q.Site, q.From, q.To, q.Goals = "f", from, to, siteGoalFilters(goals)
			if q.Zone == nil {
				q.Zone = time.UTC
			}
			if name == "goals from partials" {
				db.hooks.exactVisitorsBelow = 0 // the sketches' estimate, the same bytes on both
				defer func() { db.hooks.exactVisitorsBelow = ExactVisitorsBelow }()
			}
			rows, err := db.Stats(ctx, q)
			// Rows merged from partials come in no set order (the server
			// sorts them).
			slices.SortFunc(rows, func(a, b StatsRow) int { return slices.Compare(a.Dims, b.Dims) })
			return rows, err
		}
	}
	return reads
}

// seedImportedRows writes two complete imports of site s (December 2025
// and the first days of January 2026, which overlap its events) and one
// not complete, with rollups of the whole site, sources, pages and
// countries, as an import stores them (docs/import.md).
func seedImportedRows(t *testing.T, db *DB) {
	t.Helper()
	ctx := context.Background()
	imports := []struct {
		id          int
		first, last string
		complete    int
	}{{101, "2025-12-01", "2025-12-31", 1}, {102, "2026-01-01", "2026-01-04", 1}, {103, "2025-11-01", "2026-01-31", 0}}
	for _, im := range imports {
		if _, err := db.write.ExecContext(ctx, `INSERT INTO imports(id, site_id, source, files, first_day, last_day, rows, complete, created_at)
			VALUES (?, 's', 'plausible', '[]', ?, ?, 0, ?, '2026-02-01T00:00:00.000Z')`, im.id, im.first, im.last, im.complete); err != nil {
			t.Fatal(err)
		}
		first, _ := time.Parse(time.DateOnly, im.first)
		last, _ := time.Parse(time.DateOnly, im.last)
		for d, i := first, 0; !d.After(last); d, i = d.AddDate(0, 0, 1), i+1 {
			for _, r := range []struct{ dim, value string }{{"", ""}, {"visit:source", "Google"}, {"visit:source", "Dïrect ✓"},
				{"event:page", "/"}, {"event:page", "/blog/ü"}, {"visit:country", "DE"}} {
				n := 1 + (i*7+len(r.value))%5
				if _, err := db.write.ExecContext(ctx, `INSERT INTO imported_rows(site_id, import_id, dim, day, value, visitors, visits, pageviews, events, bounces, duration)
					VALUES ('s', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, im.id, r.dim, d.Format(time.DateOnly), r.value, n, n+1, 2*n, 2*n+1, n/2, 60*n); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// importedReads are the reads of site s with its imported days included
// that TestReadsMatchAcrossBackends compares: by nothing, by day, week
// and month (in UTC and Berlin), by source, page and country, filtered,
// and what a query says of the imports.
func importedReads(ctx context.Context) map[string]func(db *DB) (any, error) {
	from := time.Date(2025, 11, 15, 0, 0, 0, 0, time.UTC)
	to := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	berlin, _ := time.LoadLocation("Europe/Berlin")
	all := []string{MetricVisitors, MetricVisits, MetricPageviews, MetricEvents, MetricBounceRate, MetricVisitDuration}
	queries := map[string]StatsQuery{
		"imported aggregate":        {Metrics: all},
		"imported by day":           {Metrics: all, Dimensions: []string{"time:day"}},
		"imported by week":          {Metrics: all, Dimensions: []string{"time:week"}},
		"imported by month":         {Metrics: all, Dimensions: []string{"time:month"}},
		"imported by week, Berlin":  {Metrics: all, Dimensions: []string{"time:week"}, Zone: berlin},
		"imported by source":        {Metrics: all, Dimensions: []string{"visit:source"}},
		"imported by page and day":  {Metrics: all[:4], Dimensions: []string{"time:day", "event:page"}},
		"imported by country":       {Metrics: all, Dimensions: []string{"visit:country"}},
		"imported, filtered source": {Metrics: all, Filters: []QueryFilter{{Op: "contains", Dim: "visit:source", Values: []string{"ï"}}}},
		"imported, not by hour":     {Metrics: all, Dimensions: []string{"time:hour"}},
	}
	reads := map[string]func(db *DB) (any, error){}
	for name, q := range queries {
		reads[name] = func(db *DB) (any, error) {
			q.Site, q.From, q.To, q.Imports = "s", from, to, true
			if q.Zone == nil {
				q.Zone = time.UTC
			}
			rows, err := db.Stats(ctx, q)
			if err != nil {
				return nil, err
			}
			in, err := db.ImportedInclusion(ctx, q)
			return struct {
				Rows []StatsRow
				In   ImportedInclusion
			}{rows, in}, err
		}
	}
	reads["first imported day"] = func(db *DB) (any, error) {
		day, ok, err := db.FirstImportedDay(ctx, "s")
		return fmt.Sprint(day, ok), err
	}
	return reads
}
