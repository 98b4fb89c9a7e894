package storage

import (
	"context"
	"database/sql"
	"io/fs"
	"time"

	"github.com/tally-analytics/tally/storage/internal/engine"
)

// sqliteMigrationsGlob names SQLite's migrations (migrations/) in their FS;
// pgMigrationsGlob PostgreSQL's (migrations_pg/), numbered on their own.
const (
	sqliteMigrationsGlob = "migrations/*.sql"
	pgMigrationsGlob     = "migrations_pg/*.sql"
)

// migrateLockKey is the advisory lock every instance takes, inside each
// migration's transaction, before it looks at schema_migrations: two
// instances started together apply each migration once, one after the
// other, and the second finds it recorded. The value is "tallymig".
const migrateLockKey int64 = 0x74616c6c796d6967

// migrate applies SQLite's migrations of files (Open), through the
// engine's one runner of both backends.
func migrate(ctx context.Context, db *sql.DB, files fs.FS, now func() time.Time) error {
	return engine.Migrations{Files: files, Glob: sqliteMigrationsGlob}.Run(ctx, db, now)
}

// migratePG applies PostgreSQL's migrations of files, each under
// migrateLockKey.
func migratePG(ctx context.Context, db *sql.DB, files fs.FS, now func() time.Time) error {
	return engine.Migrations{Files: files, Glob: pgMigrationsGlob, LockKey: migrateLockKey}.Run(ctx, db, now)
}

// newestPGMigration is the highest version of PostgreSQL's migrations.
func newestPGMigration() (int, error) {
	return engine.Migrations{Files: migrationPGFiles, Glob: pgMigrationsGlob}.Newest()
}
