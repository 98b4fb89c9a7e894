package storage

import (
	"context"
	"testing"

	"github.com/tally-analytics/tally/internal/dbtest"
)

// TestMain runs the package's tests on SQLite and, when TEST_DATABASE_URL
// is set, again on PostgreSQL (docs/development.md#both-backends).
func TestMain(m *testing.M) { dbtest.Main(m) }

// testOptions is opts for a test's storage: on PostgreSQL a fresh
// database per test and per opts.Path (dbtest.DatabaseFor), on SQLite
// a new file a copy of a migrated template (dbtest.SQLiteFile).
func testOptions(t testing.TB, opts Options) Options {
	t.Helper()
	if url := dbtest.DatabaseFor(t, opts.Path, migrateTemplate); url != "" {
		opts.DatabaseURL = url
		return opts
	}
	if opts.migrations == nil { // a test's own migrations start from nothing
		dbtest.SQLiteFile(t, opts.Path, migrateSQLiteTemplate)
	}
	return opts
}

// openTestDB is Open for a test, on the backend the test run is on.
func openTestDB(t testing.TB, ctx context.Context, opts Options) (*DB, error) {
	t.Helper()
	return Open(ctx, testOptions(t, opts))
}

// openSQLite opens the SQLite file at path whatever the backend of the
// test run, for the tests that compare SQLite with a PostgreSQL server of
// their own.
func openSQLite(t *testing.T, path string) *DB {
	t.Helper()
	db, err := Open(context.Background(), Options{Path: path})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// migrateTemplate migrates the template database the PostgreSQL tests'
// databases are copied from.
func migrateTemplate(url string) error {
	db, err := Open(context.Background(), Options{DatabaseURL: url})
	if err != nil {
		return err
	}
	return db.Close()
}

// onlySQLite skips a test about SQLite itself on PostgreSQL.
func onlySQLite(t testing.TB, why string) {
	t.Helper()
	dbtest.OnlySQLite(t, why)
}

// onlyPostgres skips a test about PostgreSQL on SQLite.
func onlyPostgres(t testing.TB, why string) {
	t.Helper()
	dbtest.OnlyPostgres(t, why)
}

func TestPostgresPendingListIsTrue(t *testing.T) { dbtest.CheckPending(t) }

// migrateSQLiteTemplate migrates the SQLite template file the tests' new
// files are copied from.
func migrateSQLiteTemplate(path string) error {
	db, err := Open(context.Background(), Options{Path: path})
	if err != nil {
		return err
	}
	return db.Close()
}
