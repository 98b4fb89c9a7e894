package storage

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rawDB is a WAL database of about 2 MiB, opened without the service.
func rawDB(t *testing.T) (*sql.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "src.db")
	db, err := sql.Open("sqlite", FileURI(path)+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	for _, stmt := range []string{
		`CREATE TABLE t(x BLOB)`,
		`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM s WHERE i < 5000) INSERT INTO t SELECT randomblob(400) FROM s`,
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	return db, path
}

// Without a server, BackupFile copies the file; should something write to
// it all along, the copy restarts at each write and BackupFile gives up
// instead of copying forever.
func TestBackupFile(t *testing.T) {
	// Not parallel: it sets backupAfterStep, which every backup would run.
	onlySQLite(t, "the backup copies SQLite's pages")
	db, src := rawDB(t)
	dst := filepath.Join(t.TempDir(), "copy.db")
	stats, err := BackupFile(context.Background(), src, dst, false)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	cp, _ := sql.Open("sqlite", FileURI(dst))
	defer cp.Close()
	if err := cp.QueryRow(`SELECT COUNT(*) FROM t`).Scan(&n); err != nil || n != 5000 || stats.Restarts != 0 {
		t.Fatalf("got %d rows (%v), %d restarts, want 5000 and none", n, err, stats.Restarts)
	}
	if _, err := BackupFile(context.Background(), src, dst, false); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("again without force: got %v, want already exists", err)
	}

	backupAfterStep = func() { db.Exec(`INSERT INTO t VALUES (1)`) }
	defer func() { backupAfterStep = nil }()
	_, err = BackupFile(context.Background(), src, filepath.Join(t.TempDir(), "busy.db"), false)
	if err == nil || !strings.Contains(err.Error(), "changed during the copy") {
		t.Fatalf("under steady writes: got %v, want BackupFile to give up", err)
	}
	if _, err := BackupFile(context.Background(), filepath.Join(t.TempDir(), "none.db"), dst+"2", false); err == nil {
		t.Fatal("missing source: got no error, want one")
	}
}

// A backup that stops midway (here its context ends after the first step)
// leaves neither PATH nor its temporary file.
func TestBackupStoppedLeavesNothing(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "the backup copies SQLite's pages")
	_, src := rawDB(t)
	dir := t.TempDir()
	dst := filepath.Join(dir, "copy.db")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	stats, err := BackupFile(ctx, src, dst, false)
	if !errors.Is(err, context.Canceled) || stats.Steps != 1 {
		t.Fatalf("got %v after %d steps, want context.Canceled after 1", err, stats.Steps)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("got %d files left (%s ...), want none", len(left), left[0].Name())
	}
}

// Dev mode's in-memory database is copied through the writer as a file's.
func TestBackupOfMemoryDatabase(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "the backup copies SQLite's pages")
	db, err := openTestDB(t, context.Background(), Options{Path: ":memory:"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.CreateWorkspace(context.Background(), Actor{Kind: ActorSystem}, "Dev", "dev"); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "copy.db")
	if _, err := db.Backup(context.Background(), dst, false); err != nil {
		t.Fatal(err)
	}
	cp, _ := sql.Open("sqlite", FileURI(dst))
	defer cp.Close()
	var n int
	if err := cp.QueryRow(`SELECT COUNT(*) FROM workspaces WHERE slug = 'dev'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("got %d workspaces named dev (%v), want 1", n, err)
	}
}
