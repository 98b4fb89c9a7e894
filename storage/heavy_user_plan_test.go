package storage

import (
	"path/filepath"
	"strings"
	"testing"
)

// A heavy user (hundreds of devices) is read and erased through indexes:
// the timeline ranks each device's candidates from the (site_id, anon_id,
// ts) index and reads only the kept rows from the table, and the erasure
// walk deletes a window of devices per statement through each table's
// anon id index. A timing-free check of the plans (README "Reads").
func TestHeavyUserQueriesUseIndexes(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	window := `site_id = ?1 AND anon_id IN (SELECT anon_id FROM identity_links INDEXED BY identity_links_site_user
		WHERE site_id = ?1 AND user_id = ?2 AND rowid > ?3 AND rowid <= ?4)`
	for _, c := range []struct {
		name, query string
		args        []any
		want        []string // steps the plan must hold
	}{
		{"timeline", timelineNewest, []any{"s", "u", "2026-01-01", 101}, []string{
			"SEARCH e USING INTEGER PRIMARY KEY (rowid=?)",
			"SEARCH l USING INDEX identity_links_site_user (site_id=? AND user_id=?)",
			"SEARCH x USING COVERING INDEX events_site_anon_ts (site_id=? AND anon_id=? AND ts>? AND ts<?)",
			"SEARCH events USING COVERING INDEX events_site_anon_ts (site_id=? AND anon_id=? AND ts<?)"}},
		{"walk events", `SELECT seq FROM events WHERE ` + window + ` LIMIT ?5`, []any{"s", "u", 0, 9, 250}, []string{
			"SEARCH events USING COVERING INDEX events_site_anon_ts (site_id=? AND anon_id=?)",
			"SEARCH identity_links USING INDEX identity_links_site_user (site_id=? AND user_id=? AND rowid>? AND rowid<?)"}},
		{"walk sessions", `SELECT id FROM sessions WHERE ` + window + ` LIMIT ?5`, []any{"s", "u", 0, 9, 250}, []string{
			"SEARCH sessions USING COVERING INDEX sessions_site_anon_start (site_id=? AND anon_id=?)"}},
		{"walk dlq", `SELECT rowid FROM dlq WHERE ` + window + ` LIMIT ?5`, []any{"s", "u", 0, 9, 250}, []string{
			"SEARCH dlq USING COVERING INDEX dlq_site_anon (site_id=? AND anon_id=?)"}},
	} {
		plan := queryPlan(t, db, c.query, c.args...)
		for _, step := range plan {
			if strings.HasPrefix(step, "SCAN ") && !strings.HasPrefix(step, "SCAN CONSTANT") {
				t.Errorf("%s: plan %q: got %q, want no scan", c.name, plan, step)
			}
		}
		for _, w := range c.want {
			found := false
			for _, step := range plan {
				found = found || step == w
			}
			if !found {
				t.Errorf("%s: plan %q: got no step %q, want it", c.name, plan, w)
			}
		}
	}
}
