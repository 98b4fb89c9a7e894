package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// visitSources is each visit's source of site s, by anon id, and the
// query API's visit:source groups over March 2026 (day partials).
func visitSources(t *testing.T, db *DB) (map[string]string, []string) {
	t.Helper()
	rows, err := db.read.Query(`SELECT anon_id, coalesce(source, '') FROM sessions WHERE site_id = 's'`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for rows.Next() {
		var anon, src string
		if err := rows.Scan(&anon, &src); err != nil {
			t.Fatal(err)
		}
		got[anon] = src
	}
	rows.Close()
	stats, err := db.Stats(context.Background(), StatsQuery{Site: "s", Zone: time.UTC,
		From: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC),
		Metrics: []string{MetricVisits}, Dimensions: []string{"visit:source"}})
	if err != nil {
		t.Fatal(err)
	}
	var groups []string
	for _, r := range stats {
		groups = append(groups, fmt.Sprintf("%s=%v", r.Dims[0], r.Metrics[0]))
	}
	slices.Sort(groups)
	return got, groups
}

// Sessions stored before migration 0026 hold hosts; the backfill names
// them a chunk at a time, and the day partials computed before are
// dropped, so reports show the names.
func TestSourceNamesBackfill(t *testing.T) {
	db, err := openTestDB(t, context.Background(), Options{Path: filepath.Join(t.TempDir(), "a.db"), sourceNamesChunk: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	withSites(t, db, "s")
	ingestAll(t, db,
		ev("a", "g", "pageview", 0, "https://shop.test/", "https://www.google.com/"),
		ev("b", "f", "pageview", 0, "https://shop.test/?utm_source=fb", ""),
		ev("c", "o", "pageview", 0, "https://shop.test/", "https://blog.test/post"),
		ev("d", "n", "pageview", 0, "https://shop.test/", ""))
	named := map[string]string{"g": "Google", "f": "Facebook", "o": "blog.test", "n": ""}
	if got, _ := visitSources(t, db); fmt.Sprint(got) != fmt.Sprint(named) {
		t.Fatalf("at intake: got %v, want %v", got, named)
	}
	// The rows as stored before 0026.
	err = db.writer.do(context.Background(), func(tx *writeTx) error {
		if _, err := tx.Exec(`UPDATE sessions SET source_text = NULL`); err != nil {
			return err
		}
		if _, err := tx.Exec(`DELETE FROM day_partials`); err != nil {
			return err
		}
		tx.partialsChanged("s")
		_, err := tx.Exec(`INSERT INTO source_names_backfill(id, next_id, end_id) SELECT 1, 0, MAX(id) FROM sessions`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	before := map[string]string{"g": "google.com", "f": "fb", "o": "blog.test", "n": ""}
	got, groups := visitSources(t, db)
	if fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("before the backfill: got %v, want %v", got, before)
	}
	if want := []string{"Direct / None=1", "blog.test=1", "fb=1", "google.com=1"}; !slices.Equal(groups, want) {
		t.Fatalf("report before the backfill: got %v, want %v", groups, want)
	}
	steps := 0
	for done := false; !done; steps++ {
		if _, done, err = db.backfillSourceNames(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
	}
	if steps != 4 {
		t.Errorf("got %d steps of one session, want 4", steps)
	}
	got, groups = visitSources(t, db)
	if fmt.Sprint(got) != fmt.Sprint(named) {
		t.Errorf("after the backfill: got %v, want %v", got, named)
	}
	if want := []string{"Direct / None=1", "Facebook=1", "Google=1", "blog.test=1"}; !slices.Equal(groups, want) {
		t.Errorf("report after the backfill: got %v, want %v", groups, want)
	}
	var left int
	if err := db.read.QueryRow(`SELECT COUNT(*) FROM source_names_backfill`).Scan(&left); err != nil || left != 0 {
		t.Errorf("got %d backfill rows (%v), want 0", left, err)
	}
}
