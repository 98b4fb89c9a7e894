package servertest

import (
	"context"
	"testing"

	"github.com/tally-analytics/tally/internal/dbtest"
	"github.com/tally-analytics/tally/storage"
)

// TestMain runs the package's tests on SQLite and, when TEST_DATABASE_URL
// is set, again on PostgreSQL (docs/development.md#both-backends).
func TestMain(m *testing.M) {
	if dbtest.Postgres() {
		testStorage = func(t testing.TB, o storage.Options) storage.Options {
			o.DatabaseURL = dbtest.Fresh(t, "", migrateTemplate)
			return o
		}
	}
	dbtest.Main(m)
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
