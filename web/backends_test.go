package web_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/tally-analytics/tally/internal/dbtest"
	"github.com/tally-analytics/tally/server/servertest"
	"github.com/tally-analytics/tally/storage"
)

// onBothBackends runs a browser test of what accounts, settings and
// shared links keep in the database on SQLite and, when TEST_DATABASE_URL
// names a PostgreSQL server, again on a fresh database there (subtests
// "sqlite" and "postgres"; docs/development.md#both-backends). The other
// browser tests read what the server answers, the same on either backend,
// and run once.
func onBothBackends(t *testing.T, test func(t *testing.T, newServer func(opts ...servertest.Option) *servertest.Server)) {
	t.Run("sqlite", func(t *testing.T) {
		test(t, func(opts ...servertest.Option) *servertest.Server { return servertest.New(t, opts...) })
	})
	if os.Getenv(dbtest.URLEnv) == "" {
		return
	}
	t.Run("postgres", func(t *testing.T) {
		test(t, func(opts ...servertest.Option) *servertest.Server {
			url := dbtest.Fresh(t, "", migrateTemplate)
			return servertest.New(t, append(opts, servertest.WithDatabaseURL(url))...)
		})
	})
}

// migrateTemplate migrates the template database the PostgreSQL runs'
// databases are copied from.
func migrateTemplate(url string) error {
	db, err := storage.Open(context.Background(), storage.Options{DatabaseURL: url})
	if err != nil {
		return err
	}
	return db.Close()
}

// dropTemplate ends the test binary's PostgreSQL template, if any.
func dropTemplate() {
	if err := dbtest.DropTemplate(); err != nil {
		fmt.Fprintln(os.Stderr, "web: dropping the PostgreSQL template:", err)
	}
}
