package storage

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/tally-analytics/tally/storage/internal/engine"
)

// IsPostgresURL reports whether s is a DATABASE_URL this service takes:
// postgres:// or postgresql://.
func IsPostgresURL(s string) bool { return engine.IsPostgresURL(s) }

// DescribeDatabaseURL is the part of a DATABASE_URL that may be logged or
// printed: "postgres host:port/database", never the user or password.
func DescribeDatabaseURL(s string) string { return engine.DescribeDatabaseURL(s) }

// PostgresInfo is what the startup checks learnt of the server.
type PostgresInfo = engine.PostgresInfo

// CheckPostgres connects to the database at databaseURL, runs Open's
// startup checks and reads the schema version, changing nothing: `tally
// check-config` and `tally version`.
func CheckPostgres(ctx context.Context, databaseURL string) (PostgresInfo, error) {
	_, read, err := engine.PostgresURLs(databaseURL, DurabilityPower)
	if err != nil {
		return PostgresInfo{}, err
	}
	db, err := sql.Open(engine.PGDriverName, read)
	if err != nil {
		return PostgresInfo{}, err
	}
	defer db.Close()
	info, err := engine.CheckServer(ctx, db)
	if err != nil {
		return info, err
	}
	info.Known, err = newestPGMigration()
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

// pgState is what a DB holds only on PostgreSQL, where several instances
// share the database; every field is its zero value on SQLite.
type pgState struct {
	// co coordinates instances on one database (db_coord.go); nil on
	// SQLite, where db.coord() is noCoord.
	co coord
	// slot is the rollup slot this instance writes
	// (docs/postgresql.md#on-postgresql); 0 on SQLite.
	slot int
	// slotHold is the connection whose advisory lock claims slot, held
	// until Close (intake_slots_pg.go).
	slotHold *sql.DB
	// size measures the database on the server.
	size *engine.PGSize
	// qs is where the quota book's share comes from (intake_quota.go);
	// nil is SQLite's, the whole quota.
	qs quotaShare
}

// openPG is Open on PostgreSQL (docs/postgresql.md#on-postgresql): the
// writer's one connection, a read pool, the migrations of
// migrations_pg/, the tenancy caches. Nothing of SQLite's file keeping
// runs: no checkpoints, no pragmas, and of the conversions only the source
// names backfill (the schema starts at SQLite's layout after 0025; the
// names came with 0026).
func openPG(ctx context.Context, opts Options) (*DB, error) {
	if opts.migrations == nil {
		opts.migrations = migrationPGFiles
	}
	pools, err := engine.OpenPostgres(ctx, opts.DatabaseURL, engine.OpenOptions{ReadConns: opts.ReadConns, Durability: opts.Durability,
		Migrations: engine.Migrations{Files: opts.migrations, Glob: pgMigrationsGlob, LockKey: migrateLockKey}, Now: opts.Now})
	if err != nil {
		return nil, err
	}
	write, read, writeURL, readURL := pools.Write, pools.Read, pools.WriteDSN, pools.ReadDSN
	db := &DB{d: pgDialect{creds: &knownCredentials{}}, write: write, read: read, now: opts.Now, readConns: opts.ReadConns}
	db.hooks.exactVisitorsBelow = ExactVisitorsBelow
	db.pg.size = &engine.PGSize{DB: read, Now: time.Now} // the real clock: the cache saves real work
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
	if db.pg.slotHold, db.pg.slot, err = claimSlot(ctx, writeURL); err != nil {
		read.Close()
		write.Close()
		return nil, err
	}
	if err := startPGQuota(ctx, db, opts.Logger); err != nil {
		db.pg.slotHold.Close()
		read.Close()
		write.Close()
		return nil, err
	}
	if db.ingest, err = prepareIngest(ctx, write, db.d, db.pg.slot, false); err == nil {
		// pgx has no LastInsertId: new sessions' ids come back by RETURNING.
		err = db.ingest.prepareSessionReturning(ctx, write)
	}
	if err == nil {
		// A run's sessions a statement for all its visitors (intake_sessions_pg.go).
		err = db.ingest.prepareSessionSet(ctx, write)
	}
	if err != nil {
		db.pg.slotHold.Close()
		read.Close()
		write.Close()
		return nil, fmt.Errorf("prepare intake: %w", err)
	}
	db.intake.db = db
	db.writer = newWriter(write, db.d, opts.QueueSize, opts.Logger)
	db.writer.gens.stored = &pgChanges{read: read, slot: int64(db.pg.slot), now: db.now}
	startPGCoord(db, readURL, opts.Logger)
	db.pg.qs.(*pgQuota).startReclaim()
	db.startConversions(opts.Logger, db.sourceNamesBackfill(opts.sourceNamesChunk))
	return db, nil
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
