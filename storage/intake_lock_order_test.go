package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// writeLog makes the database record, in a table, every row written to
// the rollups and every day partial deleted, in the order of the writes:
// the key of each, its columns joined by a unit separator.
func writeLog(t *testing.T, db *DB) {
	t.Helper()
	tables := map[string][]string{
		"daily_events":     {"site_id", "day", "type"},
		"daily_dimensions": {"site_id", "day", "dimension", "value"},
		"daily_sessions":   {"site_id", "day"},
		"site_usage":       {"site_id", "month"},
		"day_partials":     {"site_id", "day_start"},
	}
	stmts := []string{`CREATE TABLE write_log (n INTEGER PRIMARY KEY, tbl TEXT NOT NULL, k TEXT NOT NULL)`}
	for table, keys := range tables {
		for _, op := range []string{"INSERT", "UPDATE", "DELETE"} {
			row := "new"
			if op == "DELETE" {
				row = "old"
			}
			cols := make([]string, len(keys))
			for i, k := range keys {
				cols[i] = row + "." + k
			}
			stmts = append(stmts, fmt.Sprintf(`CREATE TRIGGER log_%s_%s AFTER %s ON %s BEGIN
				INSERT INTO write_log(tbl, k) VALUES ('%s', %s); END`, table, op, op, table, table, strings.Join(cols, " || char(31) || ")))
		}
	}
	err := db.writer.do(context.Background(), func(tx *writeTx) error {
		for _, s := range stmts {
			if _, err := tx.Exec(s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkWriteOrder checks that each table's rows were written in the order
// of their keys since the last check, that there were at least min of
// each, and empties the log.
func checkWriteOrder(t *testing.T, db *DB, min int, tables ...string) {
	t.Helper()
	rows, err := db.read.Query(`SELECT tbl, k FROM write_log ORDER BY n`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][][]string{}
	for rows.Next() {
		var table, k string
		if err := rows.Scan(&table, &k); err != nil {
			t.Fatal(err)
		}
		got[table] = append(got[table], strings.Split(k, "\x1f"))
	}
	rows.Close()
	for _, table := range tables {
		keys := got[table]
		if len(keys) < min {
			t.Fatalf("%s: got %d writes, want at least %d", table, len(keys), min)
		}
		for i := 1; i < len(keys); i++ {
			if slices.Compare(keys[i-1], keys[i]) > 0 {
				t.Fatalf("%s: got %q written after %q, want the order of the keys", table, keys[i], keys[i-1])
			}
		}
	}
	if err := db.writer.do(context.Background(), func(tx *writeTx) error {
		_, err := tx.Exec(`DELETE FROM write_log`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestRollupWritesInKeyOrder checks that a run of intake writes the rows
// of each rollup, and deletes the day partials of the days it changes, in
// the order of their keys, and that an erasure subtracts from the rollups
// in that order too (intake_lock_order.go): never in the order of a Go map.
func TestRollupWritesInKeyOrder(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "it records the writes with SQLite triggers; on PostgreSQL lockRun orders an intake run's locks (TestConcurrentIngestTwoDBs)")
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	var sites []string
	for i := range 25 {
		sites = append(sites, fmt.Sprintf("s%02d", i))
	}
	withSites(t, db, append(sites, "e")...)
	ctx := context.Background()
	day0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// Partials of every day, for the intake and the erasure to drop.
	partials := func(sites ...string) {
		err := db.writer.do(ctx, func(tx *writeTx) error {
			for _, s := range sites {
				for d := range 40 {
					start := day0.AddDate(0, 0, d).UnixMilli()
					if _, err := tx.Exec(`INSERT INTO day_partials(site_id, zone, dim, basis, day_start, day_end, data)
						VALUES (?, 'UTC', '', 'events', ?, ?, x'00') ON CONFLICT DO NOTHING`, s, start, start+dayMS); err != nil {
						return err
					}
				}
			}
			_, err := tx.Exec(`DELETE FROM write_log`)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	writeLog(t, db)
	partials(sites...)

	n := 0
	event := func(site, anon string, at time.Time, typ string, i int) IngestEvent {
		n++
		u := fmt.Sprintf("https://shop.test/p/%d", i%13)
		r := fmt.Sprintf("https://ref%d.test/", i%5)
		return IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), SiteID: site, Type: typ, AnonID: anon,
			URL: &u, Referrer: &r, TS: at, Country: []string{"DE", "FR", "US"}[i%3], Browser: "Chrome", OS: "Linux",
			DeviceType: "desktop", Raw: []byte(`{}`)}
	}
	var batch []IngestEvent
	for i := range 400 {
		at := day0.AddDate(0, 0, i*7%40).Add(time.Duration(i) * time.Minute)
		batch = append(batch, event(sites[i%25], fmt.Sprintf("v%d", i%7), at, []string{"pageview", "pageview", "click"}[i%3], i))
	}
	if _, err := db.Ingest(ctx, batch, nil, nil); err != nil {
		t.Fatal(err)
	}
	checkWriteOrder(t, db, 20, "daily_events", "daily_dimensions", "daily_sessions", "site_usage", "day_partials")

	// One visitor's visits of 40 days, then erased: few enough rows for
	// one job of the erasure.
	batch = nil
	for d := range 40 {
		for i := range 3 {
			batch = append(batch, event("e", "x", day0.AddDate(0, 0, d).Add(time.Duration(10+i)*time.Minute),
				[]string{"pageview", "click"}[i%2], d*3+i))
		}
	}
	if _, err := db.Ingest(ctx, batch, nil, nil); err != nil {
		t.Fatal(err)
	}
	checkWriteOrder(t, db, 20, "daily_events", "daily_dimensions", "daily_sessions")
	partials("e")
	site, _ := db.Site("e")
	counts, err := db.EraseSubject(ctx, Actor{Kind: ActorSystem}, site, Subject{AnonID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if counts.Events != 120 {
		t.Fatalf("erased %d events, want 120", counts.Events)
	}
	checkWriteOrder(t, db, 20, "daily_events", "daily_dimensions", "daily_sessions", "day_partials")
}
