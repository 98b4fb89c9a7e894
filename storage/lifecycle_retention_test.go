package storage

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testClock is a settable clock for storage tests.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// retentionStart is the first day retention tests load.
var retentionStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// loadDays ingests, for each site and each of days days from first, perEvent
// events of ten visitors (two of them users) at noon of that day, with the
// clock at that day, and one DLQ row a day.
func loadDays(t *testing.T, db *DB, clk *testClock, sites []string, first time.Time, days, perDay int) {
	t.Helper()
	ctx := context.Background()
	for d := range days {
		day := first.AddDate(0, 0, d)
		clk.Set(day.Add(12 * time.Hour))
		var events []IngestEvent
		var dlq []Quarantined
		for _, site := range sites {
			for i := range perDay {
				e := IngestEvent{ID: fmt.Sprintf("%s-%s-%d", site, day.Format(dayLayout), i), SiteID: site, Type: "pageview",
					AnonID: fmt.Sprintf("v%d", i%10), TS: day.Add(12*time.Hour + time.Duration(i)*time.Second),
					Raw: []byte(fmt.Sprintf(`{"n":%d,"pad":"%0200d"}`, i, i))}
				if i%10 < 2 {
					u := fmt.Sprintf("user-%d", i%10)
					e.UserID = &u
				}
				url := fmt.Sprintf("https://example.com/p%d", i%5)
				e.URL = &url
				events = append(events, e)
			}
			dlq = append(dlq, Quarantined{ID: fmt.Sprintf("dlq-%s-%s", site, day.Format(dayLayout)), SiteID: site,
				Payload: []byte(`{}`), Errors: `[]`, AnonID: "v1"})
		}
		if _, err := db.Ingest(ctx, events, dlq, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// rollups returns every rollup row of site, as text.
func rollups(t *testing.T, db *DB, site string) string {
	t.Helper()
	var out string
	// Rows are joined in Go (group_concat is SQLite's), in key order.
	for _, q := range []string{
		`SELECT day, type, count FROM daily_events WHERE site_id = ? ORDER BY day, type`,
		`SELECT day, sessions, duration_ms, events, bounces FROM daily_sessions WHERE site_id = ? ORDER BY day`,
		`SELECT day, dimension, value, count FROM daily_dimensions WHERE site_id = ? ORDER BY day, dimension, value`,
		`SELECT month, accepted FROM site_usage WHERE site_id = ? ORDER BY month`,
	} {
		rows, err := db.read.Query(q, site)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		var lines []string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			var line string
			for _, v := range vals {
				if b, ok := v.([]byte); ok {
					v = string(b)
				}
				line += fmt.Sprint(v)
			}
			lines = append(lines, line)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		if len(lines) == 0 {
			t.Fatalf("got no rows from %s for %s, so the test cannot show they are kept", q, site)
		}
		out += strings.Join(lines, ";") + "\n"
	}
	return out
}

// Each site loses exactly the raw rows older than its retention (its own,
// else the server's; 0 keeps everything); rollups, links and profiles stay;
// every writer job deletes at most purgeChunk rows; the site's
// purged_before moves to its cut; and the day is recorded as done.
func TestPurgeDeletesRawRowsOlderThanTheCut(t *testing.T) {
	t.Parallel()
	clk := &testClock{}
	ctx := context.Background()
	db, err := openTestDB(t, ctx, Options{Path: filepath.Join(t.TempDir(), "a.db"), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	clk.Set(retentionStart)
	ws := withSites(t, db, "short", "default", "keep", "live")
	sys := Actor{Kind: ActorSystem}
	for site, days := range map[string]*int{"short": ptr(10), "keep": ptr(0)} {
		s, _ := db.Site(site)
		if _, err := db.UpdateSite(ctx, sys, s, SiteChange{Retention: true, RetentionDays: days}); err != nil {
			t.Fatal(err)
		}
	}
	_ = ws
	sites := []string{"short", "default", "keep"}
	loadDays(t, db, clk, sites, retentionStart, 40, 40)
	today := retentionStart.AddDate(0, 0, 39)
	clk.Set(today.Add(13 * time.Hour))

	before := map[string]string{}
	counts := map[string]map[string]int{}
	for _, site := range sites {
		before[site] = rollups(t, db, site)
		counts[site] = siteRowCounts(t, db, site)
	}
	if due, err := db.PurgeDue(ctx); err != nil || !due {
		t.Fatalf("got due %v (%v) before the first purge, want true", due, err)
	}
	jobs := map[string]int{}
	late := IngestEvent{ID: "late", SiteID: "live", Type: "pageview", AnonID: "v1", TS: today.Add(12 * time.Hour), Raw: []byte(`{}`)}
	db.hooks.purgeJob = func(table string, rows int64, _ time.Duration) {
		jobs[table]++
		if rows > purgeChunk {
			t.Errorf("got a job deleting %d rows of %s, want at most %d", rows, table, purgeChunk)
		}
		if jobs[table] == 1 && table == "events" {
			// Between two jobs the writer is free: intake commits.
			if _, err := db.Ingest(ctx, []IngestEvent{late}, nil, nil); err != nil {
				t.Errorf("got %v ingesting during the purge, want it stored", err)
			}
		}
	}
	res, err := db.Purge(ctx, 20)
	db.hooks.purgeJob = nil
	if err != nil {
		t.Fatal(err)
	}
	if jobs["events"] < 4 {
		t.Errorf("got %d events jobs, want the work chunked", jobs["events"])
	}
	wantCut := map[string]string{"short": "2026-01-31", "default": "2026-01-21"}
	for _, site := range sites {
		cut, purged := wantCut[site]
		if res.Cuts[site] != cut {
			t.Errorf("got cut %q for %s, want %q", res.Cuts[site], site, cut)
		}
		if got := rollups(t, db, site); got != before[site] {
			t.Errorf("got the rollups of %s changed by the purge, want them kept", site)
		}
		s, _ := db.Site(site)
		if s.PurgedBefore != cut {
			t.Errorf("got purged_before %q for %s, want %q", s.PurgedBefore, site, cut)
		}
		after := siteRowCounts(t, db, site)
		for _, table := range []string{"identity_links", "user_profiles", "daily_events", "daily_sessions", "daily_dimensions", "site_usage"} {
			if after[table] != counts[site][table] {
				t.Errorf("got %d rows of %s for %s, want its %d kept", after[table], table, site, counts[site][table])
			}
		}
		cutTS := cut + "T00:00:00.000Z"
		if !purged {
			cutTS = "0000"
		}
		cutMS, _ := time.Parse(timeLayout, cut+"T00:00:00.000Z")
		if !purged {
			cutMS = time.Time{}
		}
		for _, q := range []struct{ table, old, young string }{
			{"events", `ts < ?2`, `ts >= ?2`},
			{"sessions", `ended_at < ?2`, `ended_at >= ?2`},
			{"dlq", `received_at < ?2`, `received_at >= ?2`},
			{"event_ids", `received_ms < ?2`, `received_ms >= ?2`},
		} {
			// PostgreSQL wants every argument used, so each query gets its own.
			cutArg := any(cutTS)
			if q.table == "event_ids" {
				cutArg = cutMS.UnixMilli()
			}
			old := count(t, db, `SELECT COUNT(*) FROM `+q.table+` WHERE site_id = ?1 AND `+q.old, site, cutArg)
			young := count(t, db, `SELECT COUNT(*) FROM `+q.table+` WHERE site_id = ?1 AND `+q.young, site, cutArg)
			if old != 0 {
				t.Errorf("got %d rows of %s of %s before its cut %q, want none", old, q.table, site, cut)
			}
			if purged && young == counts[site][q.table] {
				t.Errorf("got all %d rows of %s of %s kept, want the old ones gone", young, q.table, site)
			}
			if young == 0 {
				t.Errorf("got no rows of %s of %s after the cut, want them kept", q.table, site)
			}
			if !purged && young != counts[site][q.table] {
				t.Errorf("got %d rows of %s of %s, want all %d kept", young, q.table, site, counts[site][q.table])
			}
		}
	}
	if n := count(t, db, `SELECT COUNT(*) FROM events WHERE id = 'late'`); n != 1 {
		t.Errorf("got %d rows of the event ingested during the purge, want 1", n)
	}
	if due, err := db.PurgeDue(ctx); err != nil || due {
		t.Errorf("got due %v (%v) after the purge, want false", due, err)
	}
	clk.Set(today.AddDate(0, 0, 1))
	if due, _ := db.PurgeDue(ctx); !due {
		t.Errorf("got due false the next day, want true")
	}
}

func ptr[T any](v T) *T { return &v }

// twentyDays opens a database file with site "s" holding perDay events a
// day for the 20 days from retentionStart, and sets the clock to the last
// of them; it returns the database, its clock and the file's path.
func twentyDays(t *testing.T, perDay int) (*DB, *testClock, string) {
	t.Helper()
	clk := &testClock{}
	path := filepath.Join(t.TempDir(), "a.db")
	db, err := openTestDB(t, context.Background(), Options{Path: path, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	clk.Set(retentionStart)
	withSites(t, db, "s")
	loadDays(t, db, clk, []string{"s"}, retentionStart, 20, perDay)
	clk.Set(retentionStart.AddDate(0, 0, 19).Add(time.Hour))
	return db, clk, path
}

// A purge stopped midway (here its context ends after two jobs, as at a
// shutdown or crash) leaves the day not done; after a restart the next
// purge deletes the rest.
func TestPurgeResumesAfterACrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clk, path := twentyDays(t, 100)
	cut := "2026-01-11T00:00:00.000Z"
	old := count(t, db, `SELECT COUNT(*) FROM events WHERE ts < ?`, cut)

	stopCtx, stop := context.WithCancel(ctx)
	jobs := 0
	db.hooks.purgeJob = func(string, int64, time.Duration) {
		if jobs++; jobs == 2 {
			stop()
		}
	}
	if _, err := db.Purge(stopCtx, 10); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v from the stopped purge, want context.Canceled", err)
	}
	left := count(t, db, `SELECT COUNT(*) FROM events WHERE ts < ?`, cut)
	if left == 0 || left == old {
		t.Fatalf("got %d of %d old events left after the stopped purge, want some gone and some left", left, old)
	}
	db.Close()

	db, err := openTestDB(t, ctx, Options{Path: path, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if due, err := db.PurgeDue(ctx); err != nil || !due {
		t.Fatalf("got due %v (%v) after the stopped purge, want true", due, err)
	}
	if s, _ := db.Site("s"); s.PurgedBefore != "2026-01-11" {
		t.Errorf("got purged_before %q after the restart, want 2026-01-11", s.PurgedBefore)
	}
	if _, err := db.Purge(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM events WHERE ts < ?`, cut); n != 0 {
		t.Errorf("got %d old events after the second purge, want none", n)
	}
	if due, _ := db.PurgeDue(ctx); due {
		t.Errorf("got due true after the second purge, want false")
	}
}

// filePages is the database's size in pages, with what the WAL holds.
func filePages(t *testing.T, db *DB) (pages, free int) {
	t.Helper()
	if err := db.read.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if err := db.read.QueryRow(`PRAGMA freelist_count`).Scan(&free); err != nil {
		t.Fatal(err)
	}
	return pages, free
}

// At a steady rate the file stops growing: the pages a purge frees are
// reused by the events that come after it. Load 20 days, purge the first
// ten, load ten more: the file is no larger than after the first load.
func TestPurgeFreedPagesAreReused(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "SQLite's free pages")
	clk := &testClock{}
	ctx := context.Background()
	db, err := openTestDB(t, ctx, Options{Path: filepath.Join(t.TempDir(), "a.db"), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	clk.Set(retentionStart)
	withSites(t, db, "s")
	loadDays(t, db, clk, []string{"s"}, retentionStart, 20, 300)
	loaded, _ := filePages(t, db)
	clk.Set(retentionStart.AddDate(0, 0, 19).Add(13 * time.Hour))
	if _, err := db.Purge(ctx, 10); err != nil {
		t.Fatal(err)
	}
	purged, free := filePages(t, db)
	loadDays(t, db, clk, []string{"s"}, retentionStart.AddDate(0, 0, 20), 10, 300)
	reloaded, freeAfter := filePages(t, db)
	t.Logf("pages: %d loaded, %d after the purge (%d free), %d after loading as much again (%d free)", loaded, purged, free, reloaded, freeAfter)
	if free < loaded/4 {
		t.Errorf("got %d free pages after purging half of %d, want the purge to free pages", free, loaded)
	}
	if reloaded > loaded+loaded/50 {
		t.Errorf("got %d pages after loading again, want at most %d (those of the first load, 2%% slack): freed pages reused", reloaded, loaded+loaded/50)
	}
}
