package storage

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The GDPR and timeline queries of a subject search indexes by the
// subject, never a whole site's rows: no full scan, and no index search
// bound by the site id alone (a timing-free check of what each costs).
func TestSubjectQueriesSearchBySubject(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "SQLite's query plans")
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withOldLinksTable(t, db)
	var queries []string
	// The links in the table, and in both tables while the move of
	// migration 0017 runs.
	for _, l := range []linkTables{newLinks, bothLinks} {
		for _, s := range []Subject{{UserID: "u"}, {AnonID: "a"}} {
			queries = append(queries,
				`SELECT * FROM events WHERE `+s.visitorWhere(l),
				`SELECT * FROM sessions WHERE `+s.visitorWhere(l),
				`SELECT * FROM user_profiles WHERE `+s.profileWhere(l),
				`SELECT * FROM `+s.linkSource(l)+` WHERE `+s.linkWhere(),
				`SELECT * FROM dlq WHERE `+s.dlqWhere(sqliteDialect{}, l))
			for _, table := range l.deleteFrom(s.UserID != "") {
				queries = append(queries, `DELETE FROM `+table+` WHERE `+s.linkWhere())
			}
		}
		queries = append(queries,
			`SELECT `+timelineColumns+` FROM `+l.byUser("l")+` CROSS JOIN events e
		ON e.seq IN (SELECT seq FROM events WHERE site_id = l.site_id AND anon_id = l.anon_id AND ts_ms < ?3 ORDER BY ts_ms DESC, seq DESC LIMIT ?4)
		WHERE l.site_id = ?1 AND l.user_id = ?2 ORDER BY e.ts DESC, e.seq DESC LIMIT ?4`,
			`SELECT EXISTS (`+timelineEvents(sqliteDialect{}, l)+` AND e.ts_ms < ?3)`,
			timelineEvents(sqliteDialect{}, l)+` AND e.ts_ms = ?3`)
	}
	siteOnly := regexp.MustCompile(`\(site_id=\?\)`)
	// The union of both link tables is a co-routine of its two searches,
	// which the query then scans: only the subject's links.
	coroutine := regexp.MustCompile(`^SCAN (\(subquery-\d+\)|l)$`)
	for _, q := range queries {
		plan := queryPlan(t, db, q, "s", "u", "2026-01-01", 5)
		for _, step := range plan {
			if strings.HasPrefix(step, "SCAN ") && step != "SCAN CONSTANT ROW" && !coroutine.MatchString(step) || siteOnly.MatchString(step) {
				t.Errorf("%s\nplans %q: got a walk over the site, want searches by the subject", q, plan)
			}
		}
	}
}

// queryPlan returns the steps of SQLite's plan for query, one detail each.
func queryPlan(t *testing.T, db *DB, query string, args ...any) []string {
	t.Helper()
	rows, err := db.read.Query(`EXPLAIN QUERY PLAN `+query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	return plan
}

// wantPlanSteps fails the test for each of want that is not a step of
// plan.
func wantPlanSteps(t *testing.T, name string, plan, want []string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(plan, w) {
			t.Errorf("%s: plan %q: got no step %q, want it", name, plan, w)
		}
	}
}

// oldLinksLayout is identity_links as migration 0001 made it, for turning a
// database back to before 0017.
const oldLinksLayout = `CREATE TABLE identity_links_rowid (
    site_id     TEXT NOT NULL,
    anon_id     TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (site_id, anon_id, user_id)
)`

// withOldLinksTable adds an empty old links table to db, as a database
// whose links move has not finished has it, for plans over both tables.
func withOldLinksTable(t *testing.T, db *DB) {
	t.Helper()
	execInWriter(t, db, oldLinksLayout, `CREATE INDEX identity_links_site_user ON identity_links_rowid(site_id, user_id)`)
}
