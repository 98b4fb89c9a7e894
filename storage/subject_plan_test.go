package storage

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The GDPR and timeline queries of a subject search indexes by the
// subject, never a whole site's rows: no full scan, and no index search
// bound by the site id alone (a timing-free check of what each costs).
func TestSubjectQueriesSearchBySubject(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	var queries []string
	for _, s := range []Subject{{UserID: "u"}, {AnonID: "a"}} {
		queries = append(queries,
			`SELECT * FROM events WHERE `+s.visitorWhere(),
			`SELECT * FROM sessions WHERE `+s.visitorWhere(),
			`SELECT * FROM user_profiles WHERE `+s.profileWhere(),
			`SELECT * FROM identity_links WHERE `+s.linkWhere(),
			`SELECT * FROM dlq WHERE `+s.dlqWhere())
	}
	queries = append(queries,
		`SELECT `+timelineColumns+` FROM identity_links l INDEXED BY identity_links_site_user CROSS JOIN events e
		ON e.seq IN (SELECT seq FROM events WHERE site_id = l.site_id AND anon_id = l.anon_id AND ts_ms < ?3 ORDER BY ts_ms DESC, seq DESC LIMIT ?4)
		WHERE l.site_id = ?1 AND l.user_id = ?2 ORDER BY e.ts DESC, e.seq DESC LIMIT ?4`,
		`SELECT EXISTS (`+timelineEvents+` AND e.ts_ms < ?3)`,
		timelineEvents+` AND e.ts_ms = ?3`)
	siteOnly := regexp.MustCompile(`\(site_id=\?\)`)
	for _, q := range queries {
		plan := queryPlan(t, db, q, "s", "u", "2026-01-01", 5)
		for _, step := range plan {
			if strings.HasPrefix(step, "SCAN ") && step != "SCAN CONSTANT ROW" || siteOnly.MatchString(step) {
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
