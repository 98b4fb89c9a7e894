package storage

import (
	"path/filepath"
	"strings"
	"testing"
)

// A heavy user (hundreds of devices) is read and erased through indexes:
// the timeline ranks each device's candidates from the (site_id, anon_id,
// ts_ms) index and reads only the kept rows from the table, and the erasure
// walk deletes a window of devices per statement through each table's
// anon id index (reading the rows, then deleting them by rowid), reading
// the user's links in anon id order from the index by user, and each
// rollup subtraction searches its rollup row by the primary key. A
// timing-free check of the plans (docs/benchmarks.md#reads).
func TestHeavyUserQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "SQLite's query plans")
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	window := `site_id = ?1 AND anon_id IN (SELECT anon_id FROM ` + newLinks.byUser("") + `
		WHERE site_id = ?1 AND user_id = ?2 AND anon_id > ?3 AND anon_id <= ?4)`
	type planCase struct {
		name, query string
		args        []any
		want        []string // steps the plan must hold
		rowReaders  int      // cursors that read rows of the events table
	}
	var rollups []planCase
	// The erasure's subtraction from each rollup: the row searched by the
	// rollup's primary key, to update it, or to delete it if it would be
	// left empty.
	for _, r := range rollupTables {
		q := unrollSQL(r)
		args := make([]any, len(r.keys)+len(r.amounts))
		for i := range args {
			args[i] = "x"
		}
		pk := "SEARCH " + r.table + " USING PRIMARY KEY (" + strings.Join(r.keys, "=? AND ") + "=?)"
		rollups = append(rollups, planCase{"unroll " + r.table, q[0], args, []string{pk}, 0},
			planCase{"unroll delete " + r.table, q[1], args[:len(r.keys)], []string{pk}, 0})
	}
	for _, c := range append([]planCase{
		// ts_ms is a virtual column, so SQLite's plan does not call the
		// index covering; rowReaders shows it is (only the outer e, the
		// page's rows, reads the table).
		{"timeline", timelineNewest(sqliteDialect{}, newLinks), []any{"s", "u", 1767225600000, 101}, []string{
			"SEARCH e USING INTEGER PRIMARY KEY (rowid=?)",
			"SEARCH l USING COVERING INDEX identity_links_user (site_id=? AND user_id=?)",
			"SEARCH x USING INDEX events_site_anon_ts (site_id=? AND anon_id=? AND ts_ms>? AND ts_ms<?)",
			"SEARCH events USING INDEX events_site_anon_ts (site_id=? AND anon_id=? AND ts_ms<?)"}, 1},
		{"walk events", eraseEventsSelect + window + ` LIMIT ?5`, []any{"s", "u", "", "z", 250}, []string{
			"SEARCH events USING INDEX events_site_anon_ts (site_id=? AND anon_id=?)",
			"SEARCH identity_links USING COVERING INDEX identity_links_user (site_id=? AND user_id=? AND anon_id>? AND anon_id<?)"}, 1},
		{"walk sessions", eraseSessionsSelect + window + ` LIMIT ?5`, []any{"s", "u", "", "z", 250}, []string{
			"SEARCH sessions USING INDEX sessions_site_anon_start (site_id=? AND anon_id=?)"}, 0},
		// What the walk read, deleted by rowid. With a trigger on the
		// table (event_pages' delete, migration 0021) SQLite deletes in two
		// passes: the first finds the rowids (a seek each, no column read).
		{"walk events delete", `DELETE FROM events WHERE seq IN (?, ?, ?)`, []any{1, 2, 3}, []string{
			"SEARCH events USING INTEGER PRIMARY KEY (rowid=?)"}, 1},
		{"walk sessions delete", `DELETE FROM sessions WHERE id IN (?, ?, ?)`, []any{1, 2, 3}, []string{
			"SEARCH sessions USING INTEGER PRIMARY KEY (rowid=?)"}, 0},
		{"walk dlq", `SELECT rowid FROM dlq WHERE ` + window + ` LIMIT ?5`, []any{"s", "u", "", "z", 250}, []string{
			"SEARCH dlq USING COVERING INDEX dlq_site_anon (site_id=? AND anon_id=?)"}, 0},
		// The walk's window and the links step read the user's links from
		// the index by user alone, in anon id order, without sorting.
		{"walk window", `SELECT COUNT(*), MAX(anon_id) FROM (SELECT anon_id FROM ` + newLinks.byUser("") + `
			WHERE site_id = ?1 AND user_id = ?2 AND anon_id > ?3 ORDER BY anon_id LIMIT ?4)`, []any{"s", "u", "", 1000}, []string{
			"SEARCH identity_links USING COVERING INDEX identity_links_user (site_id=? AND user_id=? AND anon_id>?)"}, 0},
		{"links step", `DELETE FROM identity_links WHERE site_id = ?1 AND user_id = ?2 AND anon_id IN
			(SELECT anon_id FROM identity_links INDEXED BY identity_links_user WHERE site_id = ?1 AND user_id = ?2 LIMIT ?3)`,
			[]any{"s", "u", 250}, []string{
				"SEARCH identity_links USING PRIMARY KEY (site_id=? AND anon_id=? AND user_id=?)",
				"SEARCH identity_links USING COVERING INDEX identity_links_user (site_id=? AND user_id=?)"}, 0},
	}, rollups...) {
		plan := queryPlan(t, db, c.query, c.args...)
		for _, step := range plan {
			if strings.HasPrefix(step, "SCAN ") && !strings.HasSuffix(step, "CONSTANT ROWS") && !strings.HasPrefix(step, "SCAN CONSTANT") && !strings.HasPrefix(step, "SCAN (subquery-") && step != "SCAN d" {
				t.Errorf("%s: plan %q: got %q, want no scan", c.name, plan, step)
			}
			if strings.HasPrefix(c.name, "walk") && strings.Contains(step, "TEMP B-TREE") {
				t.Errorf("%s: plan %q: got %q, want no sort", c.name, plan, step)
			}
		}
		if got := tableReaders(t, db, "events", c.query, c.args...); got != c.rowReaders {
			t.Errorf("%s: got %d cursors reading events rows, want %d", c.name, got, c.rowReaders)
		}
		wantPlanSteps(t, c.name, plan, c.want)
	}
}

// tableReaders returns how many of the cursors that query opens on table
// read a row of it (a column, or a seek by rowid). A cursor that only
// follows an index by a deferred seek, which SQLite makes only when a row
// is read, is not counted: SQLite's plan calls an index on a virtual
// column not covering even where the row is never read.
func tableReaders(t *testing.T, db *DB, table, query string, args ...any) int {
	t.Helper()
	var root int64
	if err := db.read.QueryRow(`SELECT rootpage FROM sqlite_schema WHERE type = 'table' AND name = ?`, table).Scan(&root); err != nil {
		t.Fatal(err)
	}
	rows, err := db.read.Query(`EXPLAIN `+query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	opened, reads := map[int64]bool{}, map[int64]bool{}
	for rows.Next() {
		var addr, p1, p2, p3, p5 int64
		var op string
		var p4, comment any
		if err := rows.Scan(&addr, &op, &p1, &p2, &p3, &p4, &p5, &comment); err != nil {
			t.Fatal(err)
		}
		switch op {
		case "OpenRead":
			if p2 == root {
				opened[p1] = true
			}
		case "Column", "Rowid", "SeekRowid", "NotExists":
			reads[p1] = true
		}
	}
	n := 0
	for c := range opened {
		if reads[c] {
			n++
		}
	}
	return n
}
