package storage

import (
	"bytes"
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tally-analytics/tally/fault"
)

// storedSourcemap reads back the map of (site, release, file): its parts
// in order, or the inline map of a row from before parts existed.
func storedSourcemap(t *testing.T, db *DB, site, release, file string) []byte {
	t.Helper()
	var upload sql.NullString
	var inline []byte
	if err := db.read.QueryRow(`SELECT upload, map FROM sourcemaps WHERE site_id = ? AND release = ? AND file = ?`,
		site, release, file).Scan(&upload, &inline); err != nil {
		t.Fatalf("read sourcemap %s/%s: %v", release, file, err)
	}
	if !upload.Valid {
		return inline
	}
	if len(inline) != 0 {
		t.Errorf("got an inline map of %d bytes besides the parts, want none", len(inline))
	}
	rows, err := db.read.Query(`SELECT seq, data FROM sourcemap_parts WHERE site_id = ? AND upload = ? ORDER BY seq`, site, upload.String)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var data []byte
	for want := 0; rows.Next(); want++ {
		var seq int
		var part []byte
		if err := rows.Scan(&seq, &part); err != nil {
			t.Fatal(err)
		}
		if seq != want {
			t.Fatalf("got part %d, want part %d", seq, want)
		}
		data = append(data, part...)
	}
	return data
}

// countRows runs a COUNT query.
func countRows(t *testing.T, db *DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.read.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// jobBytes records what every sourcemap writer job wrote or freed.
type jobBytes struct {
	mu   sync.Mutex
	jobs []int64
}

func (j *jobBytes) watch(db *DB) {
	db.hooks.sourcemapJobBytes = func(n int64) {
		j.mu.Lock()
		j.jobs = append(j.jobs, n)
		j.mu.Unlock()
	}
}

// check fails t if a job since the last check handled more than a part,
// or if fewer than minJobs ran, and forgets them.
func (j *jobBytes) check(t *testing.T, what string, minJobs int, total int64) {
	t.Helper()
	j.mu.Lock()
	defer j.mu.Unlock()
	var sum int64
	for i, n := range j.jobs {
		if n > SourcemapPartMax {
			t.Errorf("%s: got job %d handling %d bytes of map, want at most %d", what, i, n, SourcemapPartMax)
		}
		sum += n
	}
	if len(j.jobs) < minJobs || sum != total {
		t.Errorf("%s: got %d jobs handling %d bytes, want at least %d handling %d", what, len(j.jobs), sum, minJobs, total)
	}
	j.jobs = nil
}

// No writer job of an upload, a replacement or a release delete writes or
// frees more than a part (1 MiB) of map, however large the map: a 25 MiB
// map in one job held every site's intake for about 80 ms.
func TestSourcemapJobsHoldAtMostAPart(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	ws := withSites(t, db, "web")
	ctx := context.Background()
	site, _ := db.Site("web")
	const big = 25 << 20
	first := bytes.Repeat([]byte("first map "), big/10)
	second := bytes.Repeat([]byte("second map"), big/10)
	var jobs jobBytes
	jobs.watch(db)

	// One piece, as a caller holding the whole map would pass it.
	if err := db.UpsertSourcemap(ctx, site, "1", "app.js", [][]byte{first}, SourcemapLimits{}); err != nil {
		t.Fatal(err)
	}
	jobs.check(t, "upload", 25, int64(len(first)))
	// Pieces as the server reads them: 64 KiB, doubling up to 1 MiB.
	var pieces [][]byte
	for rest, n := second, 64<<10; len(rest) > 0; n = min(2*n, SourcemapPartMax) {
		k := min(n, len(rest))
		pieces, rest = append(pieces, rest[:k]), rest[k:]
	}
	if err := db.UpsertSourcemap(ctx, site, "1", "app.js", pieces, SourcemapLimits{}); err != nil {
		t.Fatal(err)
	}
	jobs.check(t, "replacement", 50, int64(len(first)+len(second)))
	if got := storedSourcemap(t, db, "web", "1", "app.js"); !bytes.Equal(got, second) {
		t.Fatalf("got a stored map of %d bytes, want the second upload's %d", len(got), len(second))
	}
	if n := countRows(t, db, `SELECT COUNT(*) FROM sourcemap_parts`); n != len(pieces) {
		t.Fatalf("got %d parts after the replacement, want the new map's %d", n, len(pieces))
	}

	if err := db.UpsertSourcemap(ctx, site, "1", "vendor.js", [][]byte{first[:3<<20]}, SourcemapLimits{}); err != nil {
		t.Fatal(err)
	}
	jobs.check(t, "second file", 3, 3<<20)
	files, freed, err := db.DeleteSourcemaps(ctx, Actor{Kind: ActorSystem}, site, "1", "")
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(len(second) + 3<<20); files != 2 || freed != want {
		t.Fatalf("got %d files and %d bytes freed, want 2 and %d", files, freed, want)
	}
	jobs.check(t, "release delete", 28, int64(len(second)+3<<20))
	if n := countRows(t, db, `SELECT COUNT(*) FROM sourcemap_parts`) + countRows(t, db, `SELECT COUNT(*) FROM sourcemaps`); n != 0 {
		t.Fatalf("got %d rows and parts left after the delete, want 0", n)
	}
	entries, _, err := db.Audit(ctx, ws.ID, 1, time.Time{})
	if err != nil || len(entries) != 1 || entries[0].Action != "sourcemap.delete" {
		t.Fatalf("got %+v (%v), want the sourcemap.delete entry", entries, err)
	}
}

// An upload that cannot finish deletes the parts it wrote: its site
// deleted, the caps filled by another upload, or its client gone, between
// two parts.
func TestSourcemapUploadCutShortLeavesNoParts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sys := Actor{Kind: ActorSystem}
	tests := []struct {
		name string
		// between runs after the upload's second part is written; cancel
		// ends the upload's context.
		between func(t *testing.T, db *DB, ws *Workspace, site *Site, cancel func())
		limits  SourcemapLimits
		code    string
		maps    int // sourcemap rows left on the site
		// after is the number of jobs (the check, then parts) before
		// between runs: 3 unless set.
		after int
	}{
		{"site deleted", func(t *testing.T, db *DB, ws *Workspace, _ *Site, _ func()) {
			if err := db.DeleteSite(ctx, sys, ws, "web"); err != nil {
				t.Fatal(err)
			}
			// Created again: the upload must not land in the new site.
			if _, err := db.CreateSite(ctx, sys, ws, "web", "again"); err != nil {
				t.Fatal(err)
			}
		}, SourcemapLimits{}, fault.NotFound, 0, 0},
		{"caps filled meanwhile", func(t *testing.T, db *DB, _ *Workspace, site *Site, _ func()) {
			if err := db.UpsertSourcemap(ctx, site, "1", "other.js", [][]byte{[]byte(`{}`)}, SourcemapLimits{Files: 1}); err != nil {
				t.Fatal(err)
			}
		}, SourcemapLimits{Files: 1}, fault.SourcemapQuotaExceeded, 1, 0},
		{"client gone", func(_ *testing.T, _ *DB, _ *Workspace, _ *Site, cancel func()) { cancel() },
			SourcemapLimits{}, fault.Internal, 0, 0},
		// Only an upload stalled for over an hour can see this: its parts
		// were pruned as orphans, so it must not point a row at them.
		{"parts pruned meanwhile", func(t *testing.T, db *DB, _ *Workspace, _ *Site, _ func()) {
			if err := db.Prune(ctx); err != nil {
				t.Fatal(err)
			}
			if n := countRows(t, db, `SELECT COUNT(*) FROM sourcemap_parts`); n != 0 {
				t.Fatalf("got %d parts after the prune, want the stalled upload's pruned", n)
			}
		}, SourcemapLimits{}, fault.Unavailable, 0, 0},
		// Once every part is written the upload finishes: it cannot tell
		// whether its last job committed, and must not delete the parts
		// of a row that points at them.
		{"client gone before the last job", func(_ *testing.T, _ *DB, _ *Workspace, _ *Site, cancel func()) { cancel() },
			SourcemapLimits{}, "", 1, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A site created again differs from the first; an upload's
			// parts look old to whatever comes after them.
			now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
			var mu sync.Mutex
			db, err := openTestDB(t, ctx, Options{Path: filepath.Join(t.TempDir(), "a.db"), Now: func() time.Time {
				mu.Lock()
				defer mu.Unlock()
				now = now.Add(time.Millisecond)
				if tt.code == fault.Unavailable {
					now = now.Add(time.Hour)
				}
				return now
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			ws := withSites(t, db, "web")
			site, _ := db.Site("web")
			upload, cancel := context.WithCancel(ctx)
			defer cancel()
			jobs := 0
			db.hooks.sourcemapJobBytes = func(int64) {
				jobs++
				if jobs == max(tt.after, 3) {
					db.hooks.sourcemapJobBytes = nil
					tt.between(t, db, ws, site, cancel)
				}
			}
			data := bytes.Repeat([]byte{'m'}, 5<<20)
			err = db.UpsertSourcemap(upload, site, "1", "app.js", [][]byte{data}, tt.limits)
			if fault.Code(err) != tt.code {
				t.Fatalf("got %v, want %s", err, tt.code)
			}
			if jobs < max(tt.after, 3) {
				t.Fatalf("got %d jobs, want the upload cut short after %d", jobs, max(tt.after, 3))
			}
			if n := countRows(t, db, `SELECT COUNT(*) FROM sourcemaps`); n != tt.maps {
				t.Errorf("got %d sourcemaps, want %d", n, tt.maps)
			}
			if tt.code == "" {
				if got := storedSourcemap(t, db, "web", "1", "app.js"); !bytes.Equal(got, data) {
					t.Errorf("got a stored map of %d bytes, want the %d uploaded", len(got), len(data))
				}
			} else if n := countRows(t, db, `SELECT COUNT(*) FROM sourcemap_parts WHERE length(data) = ?`, SourcemapPartMax); n != 0 {
				t.Errorf("got %d parts of the cut upload left, want 0", n)
			}
		})
	}
}

// Parts no row points at, of an upload or a delete a crash cut short, are
// deleted by the minute prune once an hour old, one part a job; parts in
// use, and young ones (an upload under way), stay.
func TestSourcemapOrphanPartsPruned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	db, err := openTestDB(t, ctx, Options{Path: filepath.Join(t.TempDir(), "a.db"), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	withSites(t, db, "web")
	site, _ := db.Site("web")
	kept := bytes.Repeat([]byte{'k'}, 3<<20)
	if err := db.UpsertSourcemap(ctx, site, "1", "app.js", [][]byte{kept}, SourcemapLimits{}); err != nil {
		t.Fatal(err)
	}
	// What a crash leaves: parts of an upload that never got its row.
	crashed := func(upload string) {
		err := db.writer.do(ctx, func(tx *writeTx) error {
			for seq := range 3 {
				if _, err := tx.Exec(`INSERT INTO sourcemap_parts(site_id, upload, seq, created_at, data) VALUES ('web', ?, ?, ?, ?)`,
					upload, seq, FormatTime(clock()), make([]byte, SourcemapPartMax)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	crashed("old")
	advance(30 * time.Minute)
	crashed("young")

	var jobs jobBytes
	jobs.watch(db)
	for _, step := range []struct {
		after time.Duration
		left  int // orphan parts left
	}{{29 * time.Minute, 6}, {2 * time.Minute, 3}, {time.Hour, 0}} {
		advance(step.after)
		if err := db.Prune(ctx); err != nil {
			t.Fatal(err)
		}
		if n := countRows(t, db, `SELECT COUNT(*) FROM sourcemap_parts WHERE upload IN ('old', 'young')`); n != step.left {
			t.Fatalf("got %d orphan parts after the prune, want %d", n, step.left)
		}
	}
	jobs.check(t, "prune", 6, 6*SourcemapPartMax)
	if got := storedSourcemap(t, db, "web", "1", "app.js"); !bytes.Equal(got, kept) {
		t.Fatalf("got a stored map of %d bytes after the prune, want the %d uploaded", len(got), len(kept))
	}
}

// A map stored inline, before parts existed (migration 0008), still counts
// under the caps, is replaced by one in parts and deleted with its row.
func TestSourcemapInlineMapFromBeforeParts(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "web")
	ctx := context.Background()
	site, _ := db.Site("web")
	err := db.writer.do(ctx, func(tx *writeTx) error {
		_, err := tx.Exec(`INSERT INTO sourcemaps(site_id, release, file, map, size, created_at, updated_at)
			VALUES ('web', '1', 'a.js', ?, 3145728, '', ''), ('web', '1', 'b.js', ?, 2, '', '')`, make([]byte, 3145728), []byte("{}"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	limits := SourcemapLimits{Files: 2, Bytes: 4<<20 + 2}
	if err := db.UpsertSourcemap(ctx, site, "1", "c.js", [][]byte{{1}}, limits); fault.Code(err) != fault.SourcemapQuotaExceeded {
		t.Fatalf("got %v for a third file, want %s: the inline maps count", err, fault.SourcemapQuotaExceeded)
	}
	replacement := bytes.Repeat([]byte{'r'}, 4<<20)
	var jobs jobBytes
	jobs.watch(db)
	if err := db.UpsertSourcemap(ctx, site, "1", "a.js", [][]byte{replacement}, limits); err != nil {
		t.Fatalf("got %v replacing an inline map with a larger one that fits, want it stored", err)
	}
	// The final job frees the inline map in one go: its one-time cost.
	if n := len(jobs.jobs); n < 6 || jobs.jobs[n-1] != 3<<20 {
		t.Fatalf("got jobs handling %v bytes, want the last to free the inline 3 MiB", jobs.jobs)
	}
	jobs.jobs = jobs.jobs[:len(jobs.jobs)-1]
	jobs.check(t, "replacement of an inline map", 5, 4<<20)
	if got := storedSourcemap(t, db, "web", "1", "a.js"); !bytes.Equal(got, replacement) {
		t.Fatalf("got a stored map of %d bytes, want the replacement's %d", len(got), len(replacement))
	}
	if got := storedSourcemap(t, db, "web", "1", "b.js"); string(got) != `{}` {
		t.Fatalf("got %q for the untouched inline map, want {}", got)
	}
	files, freed, err := db.DeleteSourcemaps(ctx, Actor{Kind: ActorSystem}, site, "1", "")
	if err != nil || files != 2 || freed != 4<<20+2 {
		t.Fatalf("got %d files, %d bytes (%v), want 2 and %d", files, freed, err, 4<<20+2)
	}
	if n := countRows(t, db, `SELECT COUNT(*) FROM sourcemap_parts`) + countRows(t, db, `SELECT COUNT(*) FROM sourcemaps`); n != 0 {
		t.Fatalf("got %d rows and parts left after the delete, want 0", n)
	}
}

// Freeing parts and finding orphans search indexes: no query walks the
// sourcemaps or their parts, whose rows hold up to 1 MiB (or, before
// migration 0008, 25 MiB) each.
func TestSourcemapPartQueriesSearch(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "SQLite's query plans")
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	for _, tt := range []struct {
		query string
		args  []any
		want  string // a step the plan must hold
	}{
		{uploadInUse, []any{"u"}, "COVERING INDEX sourcemaps_upload"},
		{nextPart, []any{"s", "u"}, "sqlite_autoindex_sourcemap_parts_1 (site_id=? AND upload=?)"},
		{orphanUploads(sqliteDialect{}), []any{"2026-01-01", 5}, "COVERING INDEX sourcemap_parts_age (created_at<?)"},
	} {
		joined := strings.Join(queryPlan(t, db, tt.query, tt.args...), "; ")
		if strings.Contains(joined, "SCAN ") || !strings.Contains(joined, tt.want) {
			t.Errorf("%s\ngot the plan %q, want searches only, with %q", tt.query, joined, tt.want)
		}
	}
}

// A database written before migration 0008 upgrades with its maps inline:
// they keep counting, and are replaced and deleted correctly.
func TestSourcemapUpgradeKeepsInlineMaps(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "upgrades an old SQLite layout")
	path := filepath.Join(t.TempDir(), "a.db")
	if err := migrateOnly(t, path, embeddedMigrations(t, "0007")); err != nil {
		t.Fatal(err)
	}
	old, err := sql.Open("sqlite", FileURI(path))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Exec(`INSERT INTO workspaces(id, name, slug, created_at) VALUES ('w', 'W', 'w', '2026-01-01T00:00:00.000Z');
		INSERT INTO sites(id, workspace_id, name, created_at) VALUES ('web', 'w', 'Web', '2026-01-01T00:00:00.000Z');
		INSERT INTO sourcemaps(site_id, release, file, map, size, created_at, updated_at)
		VALUES ('web', '1', 'a.js', randomblob(2097152), 2097152, '', ''), ('web', '1', 'b.js', x'7b7d', 2, '', '')`); err != nil {
		t.Fatal(err)
	}
	old.Close()

	db := openTest(t, path)
	ctx := context.Background()
	site, _ := db.Site("web")
	if got := storedSourcemap(t, db, "web", "1", "b.js"); string(got) != `{}` {
		t.Fatalf("got %q for an inline map after the upgrade, want {}", got)
	}
	limits := SourcemapLimits{Bytes: 2<<20 + 2}
	if err := db.UpsertSourcemap(ctx, site, "1", "c.js", [][]byte{{1}}, limits); fault.Code(err) != fault.SourcemapQuotaExceeded {
		t.Fatalf("got %v, want %s: the inline maps count", err, fault.SourcemapQuotaExceeded)
	}
	replacement := bytes.Repeat([]byte{'r'}, 2<<20)
	if err := db.UpsertSourcemap(ctx, site, "1", "a.js", [][]byte{replacement}, limits); err != nil {
		t.Fatal(err)
	}
	if got := storedSourcemap(t, db, "web", "1", "a.js"); !bytes.Equal(got, replacement) {
		t.Fatalf("got a stored map of %d bytes, want the replacement's %d", len(got), len(replacement))
	}
	files, freed, err := db.DeleteSourcemaps(ctx, Actor{Kind: ActorSystem}, site, "1", "")
	if err != nil || files != 2 || freed != 2<<20+2 {
		t.Fatalf("got %d files, %d bytes (%v), want 2 and %d", files, freed, err, 2<<20+2)
	}
	if n := countRows(t, db, `SELECT COUNT(*) FROM sourcemap_parts`) + countRows(t, db, `SELECT COUNT(*) FROM sourcemaps`); n != 0 {
		t.Fatalf("got %d rows and parts left after the delete, want 0", n)
	}
}
