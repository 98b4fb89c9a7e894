package storage

import (
	"context"
	"database/sql"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/internal/smallfs"

	"github.com/tally-analytics/tally/storage/internal/engine"
)

func TestDurabilityPragmas(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "SQLite's pragmas")
	tests := []struct {
		durability Durability
		want       string // PRAGMA synchronous: 1 NORMAL, 2 FULL
	}{
		{"", "2"},
		{DurabilityPower, "2"},
		{DurabilityProcess, "1"},
	}
	for _, tt := range tests {
		t.Run(string(tt.durability), func(t *testing.T) {
			db, err := openTestDB(t, context.Background(), Options{Path: filepath.Join(t.TempDir(), "a.db"), Durability: tt.durability})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var got string
			if err := db.write.QueryRow(`PRAGMA synchronous`).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got synchronous %s, want %s", got, tt.want)
			}
		})
	}
	if _, err := openTestDB(t, context.Background(), Options{Path: filepath.Join(t.TempDir(), "a.db"), Durability: "sometimes"}); err == nil {
		t.Error("got no error for durability \"sometimes\"")
	}
}

// embeddedMigrations returns the embedded migrations up to version upTo.
func embeddedMigrations(t *testing.T, upTo string) fstest.MapFS {
	t.Helper()
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	m := fstest.MapFS{}
	for _, name := range names {
		if filepath.Base(name) > upTo+"_~" {
			continue
		}
		b, err := migrationFiles.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		m[name] = &fstest.MapFile{Data: b}
	}
	return m
}

// migrateOnly applies the migrations files to the database at path, as
// Open does, without loading what a full schema has.
func migrateOnly(t *testing.T, path string, files fs.FS) error {
	t.Helper()
	dsn, _, err := engine.SQLiteDSNs(path, DurabilityPower)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return migrate(context.Background(), db, files, time.Now)
}

// schemaState reads the newest recorded migration and whether table exists.
func schemaState(t *testing.T, path, table string) (version int, exists bool) {
	t.Helper()
	db, err := sql.Open("sqlite", FileURI(path)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRow(`SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE name = ?`, table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return version, n > 0
}

func TestMigrationFailureKeepsThePreviousVersion(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "injects a broken migration into SQLite's runner")
	path := filepath.Join(t.TempDir(), "a.db")
	good := fstest.MapFS{"migrations/0001_a.sql": {Data: []byte(`CREATE TABLE a (x INTEGER);`)}}
	if err := migrateOnly(t, path, good); err != nil {
		t.Fatal(err)
	}

	// The second migration fails halfway: its first table is created, then
	// a statement fails.
	bad := fstest.MapFS{
		"migrations/0001_a.sql":   good["migrations/0001_a.sql"],
		"migrations/0002_bad.sql": {Data: []byte(`CREATE TABLE b (x INTEGER); CREATE TABLE a (y INTEGER);`)},
	}
	_, err := openTestDB(t, context.Background(), Options{Path: path, migrations: bad})
	if err == nil {
		t.Fatal("got no error from a failing migration")
	}
	for _, want := range []string{"0002_bad.sql", "stays at schema version 1", "already exists"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("got error %q, want it to contain %q", err, want)
		}
	}
	if version, exists := schemaState(t, path, "b"); version != 1 || exists {
		t.Errorf("got version %d and table b present %v, want version 1 and no table b", version, exists)
	}

	// A fixed release migrates the same file.
	fixed := fstest.MapFS{
		"migrations/0001_a.sql": good["migrations/0001_a.sql"],
		"migrations/0002_b.sql": {Data: []byte(`CREATE TABLE b (x INTEGER);`)},
	}
	if err := migrateOnly(t, path, fixed); err != nil {
		t.Fatalf("migrate with the fixed migration: %v", err)
	}
	if version, exists := schemaState(t, path, "b"); version != 2 || !exists {
		t.Errorf("got version %d and table b present %v, want version 2 and table b", version, exists)
	}
}

func TestMigrationOnAFullDisk(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "fills the SQLite file's disk")
	dir := smallfs.Mount(t, "8m")
	path := filepath.Join(dir, "a.db")
	if err := migrateOnly(t, path, embeddedMigrations(t, "0001")); err != nil {
		t.Fatal(err)
	}
	// Room for the shared-memory index and a few pages, not for the
	// migrations: they fail midway.
	free := smallfs.Fill(t, dir, 40<<10)
	_, err := openTestDB(t, context.Background(), Options{Path: path})
	if err == nil {
		t.Fatal("got no error migrating on a full disk")
	}
	t.Logf("open: %v", err)
	for _, want := range []string{"stays at schema version 1", "full"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("got error %q, want it to contain %q", err, want)
		}
	}
	free()
	if version, exists := schemaState(t, path, "event_ids"); version != 1 || exists {
		t.Errorf("got version %d and table event_ids present %v, want version 1 and no event_ids", version, exists)
	}
	db, err := openTestDB(t, context.Background(), Options{Path: path})
	if err != nil {
		t.Fatalf("open once space is back: %v", err)
	}
	db.Close()
	if version, exists := schemaState(t, path, "event_ids"); version < 2 || !exists {
		t.Errorf("got version %d and table event_ids present %v after space came back, want both", version, exists)
	}
}

func TestReadOnlyDatabaseIsUnavailable(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "makes the SQLite file read-only")
	// A read-only file system cannot be made at run time under an open
	// database (remount answers EBUSY), so the writer's connection is made
	// read-only instead: SQLite refuses its writes with SQLITE_READONLY,
	// the code a read-only file gives.
	var logs lockedLog // written by the writer's goroutine
	db, err := openTestDB(t, context.Background(), Options{Path: filepath.Join(t.TempDir(), "a.db"), Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	holdFor(db, 0) // the hold after a refusal is TestHealthHoldsARefusal's
	ws := withSites(t, db, "s1")
	ctx := context.Background()
	ev := func(id string) IngestEvent {
		return IngestEvent{ID: id, SiteID: "s1", Type: "pageview", AnonID: "v1", TS: db.now(), Raw: []byte(`{}`)}
	}
	if _, err := db.Ingest(ctx, []IngestEvent{ev("e1")}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.write.Exec(`PRAGMA query_only = 1`); err != nil {
		t.Fatal(err)
	}

	_, err = db.Ingest(ctx, []IngestEvent{ev("e2")}, nil, nil)
	if e := fault.As(err); e == nil || e.Code != fault.Unavailable || e.RetryAfter <= 0 || !strings.Contains(e.Message, "read-only") {
		t.Fatalf("got ingest error %v, want unavailable, read-only, with Retry-After", err)
	}
	if _, err := db.CreateSite(ctx, Actor{Kind: ActorSystem}, ws, "s2", "s2"); fault.Code(err) != fault.Unavailable {
		t.Fatalf("got create-site error %v, want unavailable", err)
	}
	if _, ok := db.Site("s2"); ok {
		t.Error("the site cache holds a site whose commit failed")
	}
	if got := db.MonthlyAccepted("s1"); got != 1 {
		t.Errorf("got %d accepted in the quota book, want 1", got)
	}
	if err := db.WriteHealth(ctx); fault.Code(err) != fault.Unavailable {
		t.Errorf("got write health %v, want unavailable", err)
	}

	if _, err := db.write.Exec(`PRAGMA query_only = 0`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Ingest(ctx, []IngestEvent{ev("e2")}, nil, nil); err != nil {
		t.Fatalf("ingest once writable again: %v", err)
	}
	if err := db.WriteHealth(ctx); err != nil {
		t.Errorf("got write health %v once writable again, want nil", err)
	}
	var n int
	if err := db.read.QueryRow(`SELECT COUNT(*) FROM events WHERE site_id = 's1'`).Scan(&n); err != nil || n != 2 {
		t.Errorf("got %d events (%v), want 2", n, err)
	}
	if got := db.MonthlyAccepted("s1"); got != 2 {
		t.Errorf("got %d accepted in the quota book, want 2", got)
	}
	// One line when writes start failing, one when they work again.
	if got := strings.Count(logs.String(), "database writes are failing"); got != 1 {
		t.Errorf("got %d failing lines in %s, want 1", got, logs.String())
	}
	if got := strings.Count(logs.String(), "database writes work again"); got != 1 {
		t.Errorf("got %d recovery lines in %s, want 1", got, logs.String())
	}
}
