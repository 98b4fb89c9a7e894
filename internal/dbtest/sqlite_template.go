package dbtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// sqliteTemplate is this process's migrated SQLite file, made once and
// copied for every test that opens a new file (SQLiteFile).
var sqliteTemplate struct {
	once  sync.Once
	dir   string
	bytes []byte
	err   error
}

// SQLiteFile prepares the SQLite file at path for a test on SQLite: when
// no file is there yet, it writes a copy of a template that migrate
// (opening and closing storage on the path it is given) prepared once per
// process, so a test pays for a copy of about 300 KB (about 10 ms), not
// for every migration (100-400 ms on a 2-core machine): the same trade
// Fresh makes on PostgreSQL (docs/development.md#both-backends). A path
// that exists (a test's own old layout, or a file it reopens), ":memory:"
// "" and URIs are left alone. On PostgreSQL it does nothing.
func SQLiteFile(t testing.TB, path string, migrate func(path string) error) {
	t.Helper()
	if Postgres() || path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		return
	}
	sqliteTemplate.once.Do(func() {
		sqliteTemplate.err = func() error {
			dir, err := os.MkdirTemp("", "tally-sqlite-template-")
			if err != nil {
				return err
			}
			sqliteTemplate.dir = dir
			file := filepath.Join(dir, "template.db")
			if err := migrate(file); err != nil {
				return fmt.Errorf("migrating it: %v", err)
			}
			// A clean close checkpointed the WAL into the file: the file
			// alone is the database.
			for _, side := range []string{"-wal", "-shm"} {
				if _, err := os.Stat(file + side); err == nil {
					return fmt.Errorf("%s%s is left after close", file, side)
				}
			}
			b, err := os.ReadFile(file)
			sqliteTemplate.bytes = b
			return err
		}()
	})
	if sqliteTemplate.err != nil {
		t.Fatalf("dbtest: SQLite template: %v", sqliteTemplate.err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	if err := os.WriteFile(path, sqliteTemplate.bytes, 0o644); err != nil {
		t.Fatalf("dbtest: copying the SQLite template: %v", err)
	}
}

// removeSQLiteTemplate removes the template's folder at the end of the
// test binary.
func removeSQLiteTemplate() {
	if sqliteTemplate.dir != "" {
		os.RemoveAll(sqliteTemplate.dir)
	}
}
