package server

import (
	"context"
	"testing"

	"github.com/tally-analytics/tally/internal/dbtest"
	"github.com/tally-analytics/tally/storage"
)

// TestMain runs the package's tests on SQLite and, when TEST_DATABASE_URL
// is set, again on PostgreSQL (docs/development.md#both-backends).
func TestMain(m *testing.M) { dbtest.Main(m) }

// pgTestDriver is the database/sql driver a test's second connection to a
// PostgreSQL database uses (harness.sqlDB).
const pgTestDriver = "tally-postgres"

// testOptions is opts for a test's storage: on PostgreSQL a fresh
// database per test and per opts.Path (dbtest.DatabaseFor), on SQLite
// a new file a copy of a migrated template (dbtest.SQLiteFile).
func testOptions(t testing.TB, opts storage.Options) storage.Options {
	t.Helper()
	if url := dbtest.DatabaseFor(t, opts.Path, migrateTemplate); url != "" {
		opts.DatabaseURL = url
		return opts
	}
	dbtest.SQLiteFile(t, opts.Path, migrateSQLiteTemplate)
	return opts
}

// openTestDB is storage.Open for a test, on the backend the test run is on.
func openTestDB(t testing.TB, ctx context.Context, opts storage.Options) (*storage.DB, error) {
	t.Helper()
	return storage.Open(ctx, testOptions(t, opts))
}

// migrateTemplate migrates the template database the PostgreSQL tests'
// databases are copied from.
func migrateTemplate(url string) error {
	db, err := storage.Open(context.Background(), storage.Options{DatabaseURL: url})
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

func TestPostgresPendingListIsTrue(t *testing.T) { dbtest.CheckPending(t) }

// migrateSQLiteTemplate migrates the SQLite template file the tests' new
// files are copied from.
func migrateSQLiteTemplate(path string) error {
	db, err := storage.Open(context.Background(), storage.Options{Path: path})
	if err != nil {
		return err
	}
	return db.Close()
}
