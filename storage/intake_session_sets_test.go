package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// visitRows prints every session with its visit, sorted, leaving out
// only the row ids, which differ by the order of inserts.
func visitRows(t *testing.T, db *DB) string {
	t.Helper()
	return queryText(t, db, `SELECT site_id, anon_id, started_at, ended_at, event_count, user_id, entry_page, exit_page, pageviews,
		referrer, source, utm_source, utm_campaign, country, browser, os, device, entry_ms, exit_ms, referrer_ms, visit_ready
		FROM sessions ORDER BY site_id, anon_id, started_ms`)
}

// One run holds the events of many visitors in every case a visitor's
// sessions can be in: new visitors, visitors returning in order, events
// that bridge two stored sessions, that move a session's start earlier,
// that join a long session starting more than 30 minutes before them,
// that lie before all of a visitor's sessions or among many of them in
// several clusters, at the very millisecond a stored session starts, and
// one anon id on two sites. The sessions, their visits and the daily
// rollups come out as when every event is stored alone in time order on
// SQLite, and as the rule computes them; on PostgreSQL that run reads and
// writes its sessions a statement for all visitors (intake_sessions_pg.go).
func TestSessionsOfManyVisitorsInOneRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	n := 0
	event := func(site, anon string, at time.Time, page string) IngestEvent {
		n++
		url := "https://example.com" + page
		e := IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), SiteID: site, Type: "pageview", AnonID: anon,
			TS: at, URL: &url, Raw: []byte(`{}`), Country: "DE", Browser: "Firefox", OS: "Linux", DeviceType: "desktop"}
		if n%3 == 0 {
			e.Type, e.URL = "signup", nil
		}
		if n%4 == 0 {
			ref := fmt.Sprintf("https://ref%d.example/post", n%7)
			e.Referrer = &ref
		}
		return e
	}
	var history, run []IngestEvent
	m := time.Minute
	for v := range 48 {
		site, anon := "s", fmt.Sprintf("v%02d", v)
		if v%9 == 8 {
			site, anon = "t", fmt.Sprintf("v%02d", v-1) // the anon id of the previous visitor, on another site
		}
		at := func(d time.Duration) time.Time { return base.Add(d + time.Duration(v)*time.Second) }
		hist := func(ds ...time.Duration) {
			for _, d := range ds {
				history = append(history, event(site, anon, at(d), fmt.Sprintf("/h%d", len(history)%5)))
			}
		}
		now := func(ds ...time.Duration) {
			for _, d := range ds {
				run = append(run, event(site, anon, at(d), fmt.Sprintf("/r%d?utm_source=mail&utm_campaign=c%d", len(run)%3, v)))
			}
		}
		switch v % 8 {
		case 0: // new
			now(0, 10*m)
		case 1: // in order, one of them at the newest session's start to the millisecond
			hist(-20*m, -10*m)
			now(-20*m, -5*m, 2*m)
		case 2: // bridges two sessions 50 minutes apart, then starts a third
			hist(-120*m, -70*m)
			now(-95*m, 0)
		case 3: // before every session, and moving one's start earlier
			hist(0, 5*m)
			now(-72*time.Hour, -10*m)
		case 4: // among ten sessions, in four clusters, bridging twice
			for k := range 10 {
				hist(time.Duration(k-10) * 50 * m)
			}
			now(-375*m, -360*m, -150*m+25*m, 10*m, 24*time.Hour)
		case 5: // far after its newest session
			hist(-48*time.Hour, -47*time.Hour)
			now(0)
		case 6: // history only: untouched by the run
			hist(-30*m, -25*m)
		case 7: // inside a long session that starts before the events' cluster does
			hist(-200*m, -180*m, -160*m, -140*m, -120*m, -60*m, -50*m)
			now(-100 * m)
		}
	}
	if len(run) < 60 {
		t.Fatalf("got %d events in the run, want 60 or more", len(run))
	}
	rng := rand.New(rand.NewPCG(3, 9))
	rng.Shuffle(len(run), func(i, j int) { run[i], run[j] = run[j], run[i] })

	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s", "t")
	// The history a request per visitor, in time order within it.
	byVisitor := map[string][]IngestEvent{}
	var visitors []string
	for _, e := range history {
		k := e.SiteID + "/" + e.AnonID
		if byVisitor[k] == nil {
			visitors = append(visitors, k)
		}
		byVisitor[k] = append(byVisitor[k], e)
	}
	for _, k := range visitors {
		if _, err := db.Ingest(ctx, byVisitor[k], nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	// The run: one request, so one intake run.
	if _, err := db.Ingest(ctx, run, nil, nil); err != nil {
		t.Fatal(err)
	}

	ref := openSQLite(t, filepath.Join(t.TempDir(), "ref.db"))
	withSites(t, ref, "s", "t")
	all := append(slices.Clone(history), run...)
	inOrder := slices.Clone(all)
	slices.SortStableFunc(inOrder, func(a, b IngestEvent) int { return a.TS.Compare(b.TS) })
	for _, e := range inOrder {
		if _, err := ref.Ingest(ctx, []IngestEvent{e}, nil, nil); err != nil {
			t.Fatal(err)
		}
	}

	if got, want := visitRows(t, db), visitRows(t, ref); got != want {
		t.Errorf("got sessions\n%s\nwant (each event alone, in order, on SQLite)\n%s", got, want)
	}
	got, want := twoInstancesAnswers(t, db), twoInstancesAnswers(t, ref)
	for _, name := range []string{"sessions", "visits", "events", "usage"} {
		if got[name] != want[name] {
			t.Errorf("%s: got\n%s\nwant (each event alone, in order, on SQLite)\n%s", name, got[name], want[name])
		}
	}
	// And as the rule says, each visitor of each site apart.
	keyed := make([]IngestEvent, len(all))
	for i, e := range all {
		keyed[i] = IngestEvent{AnonID: e.SiteID + "/" + e.AnonID, TS: e.TS}
	}
	rows, err := db.read.Query(`SELECT site_id || '/' || anon_id, started_at, ended_at, event_count FROM sessions`)
	if err != nil {
		t.Fatal(err)
	}
	var stored []sessionRow
	for rows.Next() {
		var r sessionRow
		if err := rows.Scan(&r.anon, &r.start, &r.end, &r.count); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, r)
	}
	rows.Close()
	sortSessions(stored)
	if rule := expectedSessions(keyed); !slices.Equal(stored, rule) {
		t.Errorf("got sessions %v, want %v", stored, rule)
	}
}

// The set-based statements of a run read and write sessions by index,
// however many rows the table holds and whether or not it was analyzed:
// each visitor's newest session and the sessions near its events by
// (site_id, anon_id, started_ms), never by (site_id, started_ms), which
// reads all of a site's sessions; the updates and deletes by id
// (docs/postgresql.md#intake). A new database's sessions table is never
// analyzed until autovacuum gets to it, and the writer keeps the plan
// PostgreSQL made for a statement's sixth run, when the table was small.
// On a fresh table the read took (site_id, started_ms) at every size with
// anon_id = (the shape before), and at 1,000 sessions without sorts off;
// without sequential scans off the updates scanned the whole table at
// every size, and the delete up to 2,000 (plansByIndex).
func TestSessionSetsUseIndexes(t *testing.T) {
	t.Parallel()
	onlyPostgres(t, "PostgreSQL's plans of its set-based statements")
	for _, tc := range []struct {
		name     string
		visitors int // of 10 sessions each, an hour apart
		analyze  bool
	}{
		{"fresh table, 100 sessions", 10, false},
		{"fresh table, 1,000 sessions", 100, false},
		{"fresh table, 2,000 sessions", 200, false},
		{"fresh table, 20,000 sessions", 2000, false},
		{"analyzed table, 20,000 sessions", 2000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkSessionSetPlans(t, tc.visitors, tc.analyze)
		})
	}
}

// checkSessionSetPlans explains the set-based statements over visitors of
// 10 sessions each, in a table analyzed or not.
func checkSessionSetPlans(t *testing.T, visitors int, analyze bool) {
	ctx := context.Background()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	// Autovacuum would analyze the table after a minute or so.
	if _, err := db.write.ExecContext(ctx, `ALTER TABLE sessions SET (autovacuum_enabled = off)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.write.ExecContext(ctx, `INSERT INTO sessions(site_id, anon_id, start_text, end_text, start_ms, duration_ms, event_count, pageviews, visit_ready)
		SELECT 's', 'v' || (n / 10), '', '', 1767225600000 + (n % 10) * 3600000, 60000, 2, 1, 1 FROM generate_series(0, ?::bigint - 1) n`, visitors*10); err != nil {
		t.Fatal(err)
	}
	if analyze {
		if _, err := db.write.ExecContext(ctx, `ANALYZE sessions`); err != nil {
			t.Fatal(err)
		}
	}
	var sites, anons []string
	var clusterOf, floors, ceils, ids []int64
	for v := range 100 {
		sites, anons = append(sites, "s"), append(anons, fmt.Sprintf("v%d", v*17%visitors))
		clusterOf = append(clusterOf, int64(v+1))
		floors, ceils = append(floors, 1767225600000+3*3600000-1800000), append(ceils, 1767225600000+3*3600000+1800000)
		ids = append(ids, int64(v*173%(visitors*10)+1))
	}
	var visitArrays []any
	for _, name := range visitStoredNames {
		if visitStoredInts[name] {
			visitArrays = append(visitArrays, make([]*int64, len(ids)))
		} else {
			visitArrays = append(visitArrays, make([]*string, len(ids)))
		}
	}
	counts := make([]int64, len(ids))
	users := make([]*string, len(ids))
	// The writer runs them prepared, in a transaction, after
	// plansByIndex: PostgreSQL plans the first five runs for their
	// arguments, and the later ones once for any (a generic plan, shown by
	// EXPLAIN EXECUTE of a statement PREPAREd with plan_cache_mode forcing
	// it). Both must use the indexes.
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, plansByIndex); err != nil {
		t.Fatal(err)
	}
	explain := func(query string, args ...any) string {
		t.Helper()
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			t.Fatalf("%.60s: %v", query, err)
		}
		defer rows.Close()
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, strings.TrimSpace(line))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return strings.Join(plan, "\n")
	}
	exec := func(query string) {
		t.Helper()
		if _, err := tx.ExecContext(ctx, query); err != nil {
			t.Fatalf("%.60s: %v", query, err)
		}
	}
	for _, c := range []struct {
		name, query string
		args        []any
		index       string
	}{
		{"load", loadSessionSetsSQL, []any{sites, anons, clusterOf, floors, ceils}, "sessions_site_anon_start"},
		{"update", updateSessionSetsSQL(false), append([]any{ids, counts, counts, users}, visitArrays...), "sessions_pkey"},
		{"update with start", updateSessionSetsSQL(true), append([]any{ids, counts, counts, users, counts}, visitArrays...), "sessions_pkey"},
		{"delete", `DELETE FROM sessions WHERE id = ANY(?::bigint[])`, []any{ids}, "sessions_pkey"},
	} {
		custom := explain(`EXPLAIN `+c.query, c.args...)
		exec(`SET LOCAL plan_cache_mode = force_generic_plan`)
		exec(`PREPARE set_plan AS ` + c.query) // the driver numbers its ? as PREPARE's $1...
		generic := explain(`EXPLAIN EXECUTE set_plan(` + strings.TrimSuffix(strings.Repeat("NULL, ", len(c.args)), ", ") + `)`)
		exec(`DEALLOCATE set_plan`)
		exec(`SET LOCAL plan_cache_mode TO DEFAULT`)
		for kind, plan := range map[string]string{"custom": custom, "generic": generic} {
			scans := 0
			for _, line := range strings.Split(plan, "\n") {
				// A bitmap scan names its index on the line of the
				// index's scan, and the table on the line above.
				byIndex := strings.Contains(line, "using "+c.index+" on sessions") || strings.Contains(line, "Bitmap Index Scan on "+c.index)
				if !byIndex && (strings.Contains(line, "Bitmap Heap Scan on sessions") || !strings.Contains(line, " Scan ") || !strings.Contains(line, " sessions")) {
					continue
				}
				scans++
				if !byIndex {
					t.Errorf("%s, %s plan: got %q in\n%s\nwant each read of sessions by the index %s", c.name, kind, line, plan, c.index)
				}
			}
			// A disabled plan costs 10^10 more: past jit_above_cost the read
			// was compiled at each run (seconds).
			if strings.Contains(plan, "JIT:") {
				t.Errorf("%s, %s plan: got\n%s\nwant no JIT", c.name, kind, plan)
			}
			if scans == 0 {
				t.Errorf("%s, %s plan: got\n%s\nwant reads of sessions by the index %s", c.name, kind, plan, c.index)
			}
		}
	}
}

// Only the update of a session whose start moved sets the columns the
// indexes of started_ms depend on (see prepareIngest).
func TestSessionSetUpdateLeavesTheStartAlone(t *testing.T) {
	t.Parallel()
	for _, start := range []bool{false, true} {
		set, _, _ := strings.Cut(updateSessionSetsSQL(start), " FROM ")
		for _, col := range []string{"start_ms =", "start_text =", "end_text ="} {
			if got := strings.Contains(set, col); got != start {
				t.Errorf("start %v: got %q setting %s: %v, want %v", start, set, col, got, start)
			}
		}
	}
}

// The writer runs its session statements with a plan made once per
// connection (plansByIndex forces the generic plan), not planned again for
// each run's arguments: PostgreSQL kept planning the read of sessions at
// every run, its generic plan costed above the custom ones, and that
// planning was 0.67 ms of a single event's 1.3 ms of statements
// (pg_stat_statements, docs/benchmarks.md).
func TestSessionSetsArePlannedOnce(t *testing.T) {
	t.Parallel()
	onlyPostgres(t, "PostgreSQL's plan cache")
	ctx := context.Background()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	base := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	const runs = 12
	for i := range runs {
		url := "https://example.com/"
		e := IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i+1), SiteID: "s", Type: "pageview",
			AnonID: fmt.Sprintf("v%d", i%3), TS: base.Add(time.Duration(i) * time.Minute), URL: &url, Raw: []byte(`{}`)}
		if _, err := db.Ingest(ctx, []IngestEvent{e}, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	// The write pool has one connection: the writer's, where the
	// statements are prepared.
	rows, err := db.write.QueryContext(ctx, `SELECT left(statement, 40), generic_plans, custom_plans FROM pg_prepared_statements
		WHERE statement LIKE 'WITH v AS (SELECT * FROM unnest%' OR statement LIKE 'UPDATE sessions s SET%'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	found := 0
	for rows.Next() {
		var stmt string
		var generic, custom int
		if err := rows.Scan(&stmt, &generic, &custom); err != nil {
			t.Fatal(err)
		}
		found++
		if custom != 0 {
			t.Errorf("%s...: got %d custom plans and %d generic, want no custom plan", stmt, custom, generic)
		}
		if strings.HasPrefix(stmt, "WITH v") && generic < runs {
			t.Errorf("%s...: got %d generic plans, want one a run (%d)", stmt, generic, runs)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatal("got no prepared session statement on the write connection, want the writer's")
	}
}
