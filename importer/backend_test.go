package importer_test

import (
	"context"
	"testing"

	"github.com/tally-analytics/tally/internal/dbtest"
	"github.com/tally-analytics/tally/storage"
)

// TestMain runs the package's tests on SQLite and, when TEST_DATABASE_URL
// is set, again on PostgreSQL (docs/development.md#both-backends).
func TestMain(m *testing.M) { dbtest.Main(m) }

// testOptions is opts for a test's storage: on PostgreSQL, a fresh
// database per test and per opts.Path; on SQLite, opts unchanged.
func testOptions(t testing.TB, opts storage.Options) storage.Options {
	t.Helper()
	if dbtest.Postgres() {
		opts.DatabaseURL = dbtest.Fresh(t, opts.Path, migrateTemplate)
	}
	return opts
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

func TestPostgresPendingListIsTrue(t *testing.T) { dbtest.CheckPending(t) }
