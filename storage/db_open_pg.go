package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"time"
)

// migrateLockKey is the advisory lock every instance takes, inside each
// migration's transaction, before it looks at schema_migrations: two
// instances started together apply each migration once, one after the
// other, and the second finds it recorded. The value is "tallymig".
const migrateLockKey int64 = 0x74616c6c796d6967

// minPostgres is the oldest server_version_num served (docs/storage.md).
const minPostgres = 150000

// IsPostgresURL reports whether s is a DATABASE_URL this service takes:
// postgres:// or postgresql://.
func IsPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// DescribeDatabaseURL is the part of a DATABASE_URL that may be logged or
// printed: "postgres host:port/database", never the user or password. A
// socket folder given as ?host= stands for the host; with no host at all,
// the driver's default.
func DescribeDatabaseURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || !IsPostgresURL(s) {
		return "postgres (unparsable URL)"
	}
	host := u.Host
	if host == "" {
		q := u.Query()
		host = q.Get("host")
		if host == "" {
			host = "(default host)"
		}
		if port := q.Get("port"); port != "" {
			host += ":" + port
		}
	}
	return "postgres " + host + "/" + strings.TrimPrefix(u.Path, "/")
}

// pgURLs are the URLs of the write connection and of the read pool: the
// operator's, with the settings of each session added (pgx sends unknown
// URL parameters as run-time parameters at connect).
func pgURLs(database string, durability Durability) (write, read string, err error) {
	if !IsPostgresURL(database) {
		return "", "", errors.New("DATABASE_URL must start with postgres:// or postgresql://")
	}
	u, err := url.Parse(database)
	if err != nil {
		// url's message would repeat the URL, password included.
		return "", "", errors.New("DATABASE_URL is not a valid URL")
	}
	commit, err := durability.synchronousCommit()
	if err != nil {
		return "", "", err
	}
	q := u.Query()
	if !q.Has("application_name") {
		q.Set("application_name", "tally")
	}
	u.RawQuery = q.Encode()
	read = u.String()
	// synchronous_commit follows DURABILITY, for the writer only: reads
	// commit nothing.
	q.Set("synchronous_commit", commit)
	u.RawQuery = q.Encode()
	return u.String(), read, nil
}

// PostgresInfo is what the startup checks learnt of the server.
type PostgresInfo struct {
	// Version is the server's server_version ("15.14 (Debian ...)").
	Version string
	// Schema is the newest migration recorded, 0 for an empty database;
	// Known is the newest this binary has.
	Schema, Known int
}

// CheckPostgres connects to the database at databaseURL, runs Open's
// startup checks and reads the schema version, changing nothing: `tally
// check-config` and `tally version`.
func CheckPostgres(ctx context.Context, databaseURL string) (PostgresInfo, error) {
	_, read, err := pgURLs(databaseURL, DurabilityPower)
	if err != nil {
		return PostgresInfo{}, err
	}
	db, err := sql.Open(pgDriverName, read)
	if err != nil {
		return PostgresInfo{}, err
	}
	defer db.Close()
	info, err := checkPostgres(ctx, db)
	if err != nil {
		return info, err
	}
	info.Known, err = newestMigration(migrationPGFiles, pgMigrationsGlob)
	if err != nil {
		return info, err
	}
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil || !exists {
		return info, err
	}
	err = db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&info.Schema)
	return info, err
}

// checkPostgres refuses a server older than 15, and a database whose
// encoding is not UTF8: events are UTF-8 text, and another encoding would
// refuse or alter some of them.
func checkPostgres(ctx context.Context, db *sql.DB) (PostgresInfo, error) {
	var info PostgresInfo
	var num int
	var encoding string
	err := db.QueryRowContext(ctx, `SELECT current_setting('server_version'), current_setting('server_version_num')::int, current_setting('server_encoding')`).
		Scan(&info.Version, &num, &encoding)
	var ce *connectError
	switch {
	case errors.As(err, &ce):
		return info, err // says so already, without the user
	case err != nil:
		return info, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	if num < minPostgres {
		return info, fmt.Errorf("PostgreSQL %s is too old: Tally needs 15 or newer", info.Version)
	}
	if encoding != "UTF8" {
		return info, fmt.Errorf("the database's encoding is %s: Tally needs UTF8 (CREATE DATABASE ... ENCODING 'UTF8' TEMPLATE template0)", encoding)
	}
	return info, nil
}

// openPG is Open on PostgreSQL (docs/postgresql.md#on-postgresql): the
// writer's one connection, a read pool, the migrations of
// migrations_pg/, the tenancy caches. Nothing of SQLite's file keeping
// runs: no checkpoints, no conversions (the schema starts at SQLite's
// final layout), no pragmas.
func openPG(ctx context.Context, opts Options) (*DB, error) {
	if opts.migrations == nil {
		opts.migrations = migrationPGFiles
	}
	writeURL, readURL, err := pgURLs(opts.DatabaseURL, opts.Durability)
	if err != nil {
		return nil, err
	}
	write, err := sql.Open(pgDriverName, writeURL)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	// The writer is still the only writer of this instance: one
	// connection, its group commit, its transaction at a time.
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	if _, err := checkPostgres(ctx, write); err != nil {
		write.Close()
		return nil, err
	}
	if err := migratePG(ctx, write, opts.migrations, opts.Now); err != nil {
		write.Close()
		return nil, err
	}
	read, err := sql.Open(pgDriverName, readURL)
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("open database: %w", err)
	}
	read.SetMaxOpenConns(opts.ReadConns)
	read.SetMaxIdleConns(opts.ReadConns)
	read.SetConnMaxIdleTime(0)

	db := &DB{d: pgDialect{creds: &knownCredentials{}}, write: write, read: read, now: opts.Now, readConns: opts.ReadConns}
	db.hooks.exactVisitorsBelow = ExactVisitorsBelow
	db.pgSize = &pgDiskUsage{db: read, now: time.Now} // the real clock: the cache saves real work
	// Every event has its event_pages row from the start, and there never
	// was an old links table.
	db.eventPagesReady.Store(true)
	err = db.loadTenants(ctx)
	if err == nil {
		err = db.loadQuota(ctx)
	}
	if err != nil {
		read.Close()
		write.Close()
		return nil, err
	}
	if db.slotHold, db.slot, err = claimSlot(ctx, writeURL); err != nil {
		read.Close()
		write.Close()
		return nil, err
	}
	if err := startPGQuota(ctx, db, opts.Logger); err != nil {
		db.slotHold.Close()
		read.Close()
		write.Close()
		return nil, err
	}
	if db.ingest, err = prepareIngest(ctx, write, db.d, db.slot, false); err == nil {
		// pgx has no LastInsertId: new sessions' ids come back by RETURNING.
		err = db.ingest.prepareSessionReturning(ctx, write)
	}
	if err != nil {
		db.slotHold.Close()
		read.Close()
		write.Close()
		return nil, fmt.Errorf("prepare intake: %w", err)
	}
	db.intake.db = db
	db.writer = newWriter(write, db.d, opts.QueueSize, opts.Logger)
	db.writer.gens.stored = &pgChanges{read: read, slot: int64(db.slot), now: db.now}
	startPGCoord(db, readURL, opts.Logger)
	db.qs.(*pgQuota).startReclaim()
	return db, nil
}

// pgMigrationsGlob names the PostgreSQL migrations in their FS.
const pgMigrationsGlob = "migrations_pg/*.sql"

// pgMigrations are PostgreSQL's (migrations_pg/), each applied under
// migrateLockKey.
var pgMigrations = migrations{glob: pgMigrationsGlob, inTx: lockedTx}

// migratePG applies PostgreSQL's migrations of files, as migrate does
// SQLite's (db_migrate.go).
func migratePG(ctx context.Context, db *sql.DB, files fs.FS, now func() time.Time) error {
	return pgMigrations.run(ctx, db, files, now)
}

// lockedTx runs step in a transaction that first takes migrateLockKey,
// and commits it.
func lockedTx(ctx context.Context, db *sql.DB, step func(*sql.Tx) error) error {
	return plainTx(ctx, db, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, migrateLockKey); err != nil {
			return err
		}
		return step(tx)
	})
}

// PostgresVersion is the server_version of the database at databaseURL,
// for `tally version`: known even when the startup checks would refuse
// the server.
func PostgresVersion(ctx context.Context, databaseURL string) (string, error) {
	info, err := CheckPostgres(ctx, databaseURL)
	if info.Version != "" {
		return info.Version, nil
	}
	return "", err
}
