package storage

import (
	"context"
	"database/sql"
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

	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				db.Exec(`INSERT INTO t VALUES (1)`)
			}
		}
	}()
	_, err = BackupFile(context.Background(), src, filepath.Join(t.TempDir(), "busy.db"), false)
	close(stop)
	<-done
	if err == nil || !strings.Contains(err.Error(), "changed during the copy") {
		t.Fatalf("under steady writes: got %v, want BackupFile to give up", err)
	}
	if _, err := BackupFile(context.Background(), filepath.Join(t.TempDir(), "none.db"), dst+"2", false); err == nil {
		t.Fatal("missing source: got no error, want one")
	}
}
