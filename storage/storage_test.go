package storage

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tally-analytics/tally/storage/internal/engine"
)

func openTest(t *testing.T, path string) *DB {
	t.Helper()
	db, err := openTestDB(t, context.Background(), Options{Path: path})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// withSites creates a workspace with the sites ids, which Ingest needs.
func withSites(t testing.TB, db *DB, ids ...string) *Workspace {
	t.Helper()
	ctx := context.Background()
	sys := Actor{Kind: ActorSystem}
	ws, err := db.CreateWorkspace(ctx, sys, "Test", "test-"+engine.RandomHex(4))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := db.CreateSite(ctx, sys, ws, id, id); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

func TestOpenAppliesMigrationsOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sub", "dir", "a.db") // folders are created
	db := openTest(t, path)
	db.Close()
	db = openTest(t, path)
	var n, versions int
	if err := db.read.QueryRow(`SELECT COUNT(*), COUNT(DISTINCT version) FROM schema_migrations`).Scan(&n, &versions); err != nil {
		t.Fatal(err)
	}
	if n == 0 || n != versions {
		t.Fatalf("got %d migration rows for %d versions, want one row each", n, versions)
	}
	for _, table := range []string{"events", "sessions", "user_profiles", "identity_links", "audit_log", "dlq",
		"webhook_secrets", "workspaces", "sites", "api_keys", "sourcemaps", "sourcemap_parts"} {
		// A read of the table itself: the catalogues differ by backend.
		var rows int
		if err := db.read.QueryRow(`SELECT COUNT(*) FROM ` + table).Scan(&rows); err != nil {
			t.Errorf("table %s missing: %v", table, err)
		}
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a.db")
	db := openTest(t, path)
	if err := db.writer.do(context.Background(), func(tx *writeTx) error {
		_, err := tx.Exec(`INSERT INTO schema_migrations(version, name, applied_at) VALUES (9999, 'future', 'x')`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := openTestDB(t, context.Background(), Options{Path: path}); err == nil {
		t.Fatal("got no error opening a database from a newer release")
	}
}

func TestPragmas(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "SQLite's pragmas")
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	checks := []struct {
		pool   *sql.DB
		pragma string
		want   string
	}{
		{db.write, "journal_mode", "wal"},
		{db.read, "journal_mode", "wal"},
		{db.write, "foreign_keys", "1"},
		{db.write, "busy_timeout", "10000"},
		{db.read, "busy_timeout", "10000"},
		{db.write, "synchronous", "2"}, // FULL: DURABILITY=power is the default
		{db.read, "query_only", "1"},
	}
	for _, c := range checks {
		var got string
		if err := c.pool.QueryRow(`PRAGMA ` + c.pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("PRAGMA %s: got %s, want %s", c.pragma, got, c.want)
		}
	}
	if _, err := db.read.Exec(`INSERT INTO workspaces(id, name, slug, created_at) VALUES ('x','x','x','x')`); err == nil {
		t.Error("a read connection accepted a write")
	}
}

func TestMemoryDatabaseIsSharedAndIsolated(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "SQLite's in-memory database")
	a := openTest(t, ":memory:")
	b := openTest(t, ":memory:")
	if _, err := a.CreateWorkspace(context.Background(), Actor{Kind: ActorSystem}, "A", "a"); err != nil {
		t.Fatal(err)
	}
	list, err := a.Workspaces(context.Background()) // read pool sees the writer's data
	if err != nil || len(list) != 1 {
		t.Fatalf("got %d workspaces (%v) through the read pool, want 1", len(list), err)
	}
	if list, _ := b.Workspaces(context.Background()); len(list) != 0 {
		t.Fatalf("got %d workspaces in a second :memory: database, want 0", len(list))
	}
}

// walCheckpointSeq reads the checkpoint sequence number from the WAL
// header, which SQLite increments each time the WAL starts over.
func walCheckpointSeq(t *testing.T, path string) uint32 {
	t.Helper()
	f, err := os.Open(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var hdr [16]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		t.Fatalf("read WAL header: %v", err)
	}
	return binary.BigEndian.Uint32(hdr[12:])
}

// Under steady load the writer always has a commit in flight, so the WAL
// would never be fully copied at the start of a transaction and would grow
// without bound. The writer must let it start over.
func TestWALStartsOverUnderSteadyLoad(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "SQLite's WAL")
	path := filepath.Join(t.TempDir(), "a.db")
	db, err := openTestDB(t, context.Background(), Options{Path: path, CheckpointEvery: 5 * time.Millisecond, walRestartFrames: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	withSites(t, db, "s")
	ctx := context.Background()
	raw := []byte(`{"padding":"` + strings.Repeat("x", 400) + `"}`)
	var sent atomic.Int64
	send := func() error {
		n := sent.Add(1)
		_, err := db.Ingest(ctx, []IngestEvent{{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), SiteID: "s",
			Type: "pageview", AnonID: fmt.Sprintf("a%d", n%5000), TS: time.Now(), Raw: raw}}, nil, nil)
		return err
	}
	if err := send(); err != nil {
		t.Fatal(err)
	}
	first := walCheckpointSeq(t, path)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 { // enough senders that the writer's queue is never empty
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := send(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	restarts := uint32(0)
	deadline := time.Now().Add(20 * time.Second)
	for restarts < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		restarts = walCheckpointSeq(t, path) - first
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if restarts < 3 {
		t.Fatalf("got %d WAL restarts in 20 s of steady load (%d events), want at least 3", restarts, sent.Load())
	}
}

// The checkpoint loop reports its failures instead of dropping them: here
// its connection is closed under it.
func TestCheckpointLoopLogsFailures(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "SQLite's WAL checkpoints")
	lines := make(chan string, 100)
	db, err := openTestDB(t, context.Background(), Options{Path: filepath.Join(t.TempDir(), "a.db"), CheckpointEvery: time.Millisecond,
		Logger: slog.New(recordsTo(lines))})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.ckpt.Close()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case line := <-lines:
			if strings.HasPrefix(line, "WAL checkpoints are failing") {
				return
			}
		case <-timeout:
			t.Fatal("got no log line of a failing checkpoint in 10 s, want one")
		}
	}
}

// recordsTo is a slog handler that sends each record's message to lines,
// dropping it when lines is full.
type recordsTo chan<- string

func (h recordsTo) Enabled(context.Context, slog.Level) bool { return true }
func (h recordsTo) Handle(_ context.Context, r slog.Record) error {
	select {
	case h <- r.Message:
	default:
	}
	return nil
}
func (h recordsTo) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordsTo) WithGroup(string) slog.Handler      { return h }

// Deleting a site with more rows than one chunk removes all of them, counts
// them in the audit entry, and leaves other sites alone.
func TestDeleteSiteInChunks(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	ctx := context.Background()
	sys := Actor{Kind: ActorSystem}
	ws := withSites(t, db, "big", "other")
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	n := 0
	send := func(site string, count int) {
		for count > 0 {
			batch := make([]IngestEvent, min(count, 500))
			for i := range batch {
				n++
				batch[i] = IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), SiteID: site, Type: "pageview",
					AnonID: fmt.Sprintf("v%d", n%700), TS: at.Add(time.Duration(n) * time.Second), Raw: []byte(`{}`)}
			}
			if _, err := db.Ingest(ctx, batch, nil, nil); err != nil {
				t.Fatal(err)
			}
			count -= len(batch)
		}
	}
	send("big", 2*siteDeleteChunk+345)
	send("other", 10)
	var sessions int
	if err := db.read.QueryRow(`SELECT COUNT(*) FROM sessions WHERE site_id = 'big'`).Scan(&sessions); err != nil {
		t.Fatal(err)
	}

	if err := db.DeleteSite(ctx, sys, ws, "big"); err != nil {
		t.Fatal(err)
	}
	for _, table := range siteDataTables {
		var left int
		if err := db.read.QueryRow(`SELECT COUNT(*) FROM ` + table.table + ` WHERE site_id = 'big'`).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left != 0 {
			t.Errorf("got %d rows of the deleted site in %s, want 0", left, table.table)
		}
	}
	var others int
	if err := db.read.QueryRow(`SELECT COUNT(*) FROM events WHERE site_id = 'other'`).Scan(&others); err != nil || others != 10 {
		t.Fatalf("got %d events of the other site (%v), want 10", others, err)
	}
	deleted := siteDeleteCounts(t, db, ws)
	want := 2*siteDeleteChunk + 345
	if deleted["events"] != want || deleted["event_ids"] != want || deleted["sessions"] != sessions {
		t.Fatalf("got deleted_rows %v, want %d events and ids and %d sessions", deleted, want, sessions)
	}
	if _, ok := db.Site("big"); ok {
		t.Fatal("the deleted site is still known")
	}
	if _, err := db.CreateSite(ctx, sys, ws, "big", "again"); err != nil {
		t.Fatalf("re-creating the id: %v", err)
	}
}

// siteRowCounts counts the rows of site in every table DeleteSite empties.
func siteRowCounts(t *testing.T, db *DB, site string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for _, table := range siteDataTables {
		var n int
		if err := db.read.QueryRow(`SELECT COUNT(*) FROM `+table.table+` WHERE site_id = ?`, site).Scan(&n); err != nil {
			t.Fatal(err)
		}
		counts[table.table] = n
	}
	return counts
}

// fillSite writes rollup rows straight into the tables (through intake
// they would take a while): urls distinct urls and types distinct event
// types on one day, plus days of sessions and a few sourcemaps (inline, as
// before migration 0008, and in parts) and webhook secrets.
func fillSite(t *testing.T, db *DB, site string, urls, types, days int) {
	t.Helper()
	// Rows made in Go and the rollups written as intake writes them (into
	// the instance's slot on PostgreSQL), so the same SQL runs on both
	// backends.
	day0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	err := db.writer.do(context.Background(), func(tx *writeTx) error {
		for _, q := range []struct {
			sql  string
			n    int
			args func(n int) []any
		}{
			{db.d.rollupUpsertSQL("daily_dimensions", []string{"site_id", "day", "dimension", "value"}, []string{"count"}, db.pg.slot), urls,
				func(n int) []any {
					return []any{site, "2026-03-01", "url", fmt.Sprintf("https://example.com/%0400d", n), 1}
				}},
			{db.d.rollupUpsertSQL("daily_events", []string{"site_id", "day", "type"}, []string{"count"}, db.pg.slot), types,
				func(n int) []any { return []any{site, "2026-03-01", fmt.Sprintf("type-%d", n), 1} }},
			{db.d.rollupUpsertSQL("daily_sessions", []string{"site_id", "day"}, []string{"sessions", "duration_ms", "events", "bounces"}, db.pg.slot), days,
				func(n int) []any { return []any{site, day0.AddDate(0, 0, n).Format("2006-01-02"), 1, 0, 1, 1} }},
			{`INSERT INTO sourcemaps(site_id, release, file, map, size, created_at, updated_at) VALUES (?, 'r1', ?, ?, 1000, '', '')`, 3,
				func(n int) []any { return []any{site, fmt.Sprintf("f%d.js", n), make([]byte, 1000)} }},
			{`INSERT INTO sourcemap_parts(site_id, upload, seq, created_at, data) VALUES (?, 'u1', ?, '', ?)`, 4,
				func(n int) []any { return []any{site, n, make([]byte, 1000)} }},
			{`INSERT INTO webhook_secrets(site_id, adapter, secret) VALUES (?, 'stripe', ?)`, 2,
				func(n int) []any { return []any{site, fmt.Sprintf("s%d", n)} }},
		} {
			stmt, err := tx.Prepare(q.sql)
			if err != nil {
				return err
			}
			for n := range q.n {
				if _, err := stmt.Exec(q.args(n)...); err != nil {
					stmt.Close()
					return err
				}
			}
			stmt.Close()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A site's rollups grow with what its clients send (every distinct url and
// event type is a row), so deleting a site chunks them like its events: no
// writer job, the final one included, removes more than a chunk of a table,
// however many the site has; rows that appear after their table was
// emptied make the final job give way to more chunks instead of growing.
// All rows go, counted exactly in the audit entry; another site keeps its.
func TestDeleteSiteBoundsEveryJob(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	ctx := context.Background()
	sys := Actor{Kind: ActorSystem}
	ws := withSites(t, db, "big", "other")
	fillSite(t, db, "big", 20_000, 3_000, 1_000)
	fillSite(t, db, "other", 300, 30, 10)
	events := make([]IngestEvent, 0, 2*siteDeleteChunk)
	for i := range cap(events) {
		site := []string{"big", "other"}[i%2]
		events = append(events, IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), SiteID: site, Type: "pageview",
			AnonID: fmt.Sprintf("v%d", i%40), TS: time.Date(2026, 3, 1, 10, 0, i, 0, time.UTC), Raw: []byte(`{}`)})
	}
	if _, err := db.Ingest(ctx, events, nil, nil); err != nil {
		t.Fatal(err)
	}
	want := siteRowCounts(t, db, "big")
	others := siteRowCounts(t, db, "other")

	// Late rows, more than a chunk, arrive once the last table is empty.
	chunks := map[string]int64{}
	for _, table := range siteDataTables {
		chunks[table.table] = int64(table.chunk)
	}
	late := 2*chunks["daily_events"] + 7
	last := siteDataTables[len(siteDataTables)-1].table
	injected := false
	finals := map[string]int64{}
	db.hooks.siteDeleteJob = func(table string, rows int64, final bool) {
		if rows > chunks[table] {
			t.Errorf("got a job deleting %d rows of %s (final: %v), want at most %d", rows, table, final, chunks[table])
		}
		if final {
			if _, ok := finals[table]; ok {
				t.Errorf("got two final jobs for %s", table)
			}
			finals[table] = rows
		}
		if table == last && rows == 0 && !injected {
			injected = true
			err := db.writer.do(ctx, func(tx *writeTx) error {
				upsert := db.d.rollupUpsertSQL("daily_events", []string{"site_id", "day", "type"}, []string{"count"}, db.pg.slot)
				for n := range late {
					if _, err := tx.Exec(upsert, "big", "2026-03-02", fmt.Sprintf("late-%d", n), 1); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Error(err)
			}
			want["daily_events"] += int(late)
		}
	}
	if err := db.DeleteSite(ctx, sys, ws, "big"); err != nil {
		t.Fatal(err)
	}
	db.hooks.siteDeleteJob = nil

	if len(finals) != len(siteDataTables) {
		t.Errorf("got a final job over %d tables, want %d", len(finals), len(siteDataTables))
	}
	for table, n := range siteRowCounts(t, db, "big") {
		if n != 0 {
			t.Errorf("got %d rows of the deleted site in %s, want 0", n, table)
		}
	}
	for table, n := range siteRowCounts(t, db, "other") {
		if n != others[table] {
			t.Errorf("got %d rows of the other site in %s, want %d", n, table, others[table])
		}
	}
	deleted := siteDeleteCounts(t, db, ws)
	if len(deleted) != len(want) {
		t.Errorf("got deleted_rows of %d tables, want %d", len(deleted), len(want))
	}
	for table, n := range want {
		if deleted[table] != n {
			t.Errorf("got deleted_rows[%s] = %d, want %d", table, deleted[table], n)
		}
	}
	if !injected || want["daily_dimensions"] < 20_000 || want["sourcemaps"] != 3 || want["sourcemap_parts"] != 4 || want["events"] != siteDeleteChunk {
		t.Errorf("got %v before the delete (late rows added: %v), want the filled rows", want, injected)
	}
}

// Events of a site deleted after their request's credential check are not
// stored: the writer refuses them, so the id can start empty again.
func TestIngestRefusesADeletedSite(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "live")
	ctx := context.Background()
	event := func(site string, n int) IngestEvent {
		return IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), SiteID: site, Type: "pageview",
			AnonID: "v", TS: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), Raw: []byte(`{}`)}
	}
	if _, err := db.Ingest(ctx, []IngestEvent{event("gone", 1)}, nil, nil); !errors.Is(err, ErrSiteGone) {
		t.Fatalf("got %v for a deleted site, want ErrSiteGone", err)
	}
	if _, err := db.Ingest(ctx, nil, []Quarantined{{ID: "q", SiteID: "gone", Payload: []byte(`{}`), Errors: `[]`}}, nil); !errors.Is(err, ErrSiteGone) {
		t.Fatalf("got %v for a DLQ row of a deleted site, want ErrSiteGone", err)
	}
	if r, err := db.Ingest(ctx, []IngestEvent{event("live", 2)}, nil, nil); err != nil || r.Accepted != 1 {
		t.Fatalf("got %+v, %v for a live site, want 1 accepted", r, err)
	}
	var n int
	if err := db.read.QueryRow(`SELECT (SELECT COUNT(*) FROM events WHERE site_id = 'gone') + (SELECT COUNT(*) FROM dlq WHERE site_id = 'gone')`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("got %d rows of the deleted site (%v), want 0", n, err)
	}
}

// A database path may hold the characters a URI gives meaning to: each
// path opens its own file, named exactly so.
func TestDatabasePathWithURICharacters(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "SQLite's file path")
	dir := t.TempDir()
	for _, name := range []string{"a#b.db", "a?mode=ro.db", "a%41.db", "a.db"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			db := openTest(t, path)
			withSites(t, db, "s-"+strings.NewReplacer("#", "", "?", "", "=", "", "%", "", ".", "").Replace(name))
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("got %v, want the database at %s", err, path)
			}
		})
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), "-wal") && !strings.HasSuffix(e.Name(), "-shm") {
			names = append(names, e.Name())
		}
	}
	if got, want := strings.Join(names, ","), "a#b.db,a%41.db,a.db,a?mode=ro.db"; got != want {
		t.Fatalf("got files %s, want %s", got, want)
	}
}

// siteDeleteCounts returns the deleted_rows of the workspace's newest audit
// entry, which must be a site.delete.
func siteDeleteCounts(t *testing.T, db *DB, ws *Workspace) map[string]int {
	t.Helper()
	entries, _, err := db.Audit(context.Background(), ws.ID, 1, time.Time{})
	if err != nil || len(entries) != 1 || entries[0].Action != "site.delete" {
		t.Fatalf("got %+v (%v), want the site.delete entry", entries, err)
	}
	var meta struct {
		Deleted map[string]int `json:"deleted_rows"`
	}
	if err := json.Unmarshal(entries[0].Metadata, &meta); err != nil {
		t.Fatal(err)
	}
	return meta.Deleted
}
