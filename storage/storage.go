// Package storage keeps the service's state: events and what intake derives
// from them (sessions and visits, identity links, profiles, rollups), the
// tenancy (workspaces, sites, keys), the query API's model and its reads,
// GDPR erasure and export, retention, backups and imports
// (docs/storage.md, docs/architecture.md#storages-files).
//
// It runs over either backend: one SQLite file in WAL mode, or one
// PostgreSQL database shared by several instances
// (docs/postgresql.md#on-postgresql), what differs kept behind the dialect
// and in _pg.go files. The database mechanism (opening either backend, the
// single writer, migrations, coordination, conversions) is the engine's,
// storage/internal/engine. One goroutine owns the only write connection
// (the single writer, db_writer.go): every mutation is a job handed to it, and
// jobs queued together commit in one transaction. Reads use a pool of their
// own; the query API answers most reports of closed days from day partials
// (partial_ files) and the report cache rather than a scan
// (docs/query-api.md#how-reports-stay-fast). Files of one concern share a
// prefix (db_, intake_, query_, report_, partial_, gdpr, lifecycle_,
// tenancy_, import_, convert_, copy_). The package imports nothing from
// HTTP.
package storage

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"io/fs"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver

	"github.com/tally-analytics/tally/storage/internal/engine"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationPGFiles are PostgreSQL's migrations, numbered on their own
// (db_migrate.go).
//
//go:embed migrations_pg/*.sql
var migrationPGFiles embed.FS

// timeLayout is the one timestamp format of the service: UTC, exactly three
// fraction digits. It is fixed width, so stored text sorts in time order.
const timeLayout = engine.TimeLayout

// FormatTime renders t in timeLayout.
func FormatTime(t time.Time) string {
	return t.UTC().Format(timeLayout)
}

// Options configures Open.
type Options struct {
	// Path is the SQLite file; its folder is created if missing. ":memory:"
	// gives a throw-away database shared by the writer and the readers.
	Path string
	// DatabaseURL, when set (postgres:// or postgresql://), is the
	// PostgreSQL database to use instead of Path (db_open_pg.go).
	DatabaseURL string
	// Now is the clock; nil means time.Now. Tests inject a fixed clock.
	Now func() time.Time
	// QueueSize bounds the writer's queue of pending jobs (default 4096).
	QueueSize int
	// ReadConns is the size of the read pool (default 4).
	ReadConns int
	// CheckpointEvery is how often the WAL is copied into the database
	// file (default 250 ms). Tests shorten it.
	CheckpointEvery time.Duration
	// Logger receives the writer's changes of health (writes failing,
	// working again) and failing WAL checkpoints; nil means none.
	Logger *slog.Logger
	// Durability is what an acknowledged commit survives; "" means
	// DurabilityPower.
	Durability Durability
	// walRestartFrames overrides walRestartFrames in tests.
	walRestartFrames int
	// migrations overrides the embedded migrations in tests, so that a
	// broken one can be injected.
	migrations fs.FS
	// rawConvertChunk overrides rawConvertChunk in tests; below 0, the
	// raw conversion is not started, so a test can run it step by step.
	rawConvertChunk int
	// visitBackfillChunk overrides visitBackfillChunk in the same way.
	visitBackfillChunk int
	// sessionTimesChunk overrides sessionTimesChunk in the same way.
	sessionTimesChunk int
	// linkMoveChunk overrides linkMoveChunk in the same way.
	linkMoveChunk int
	// eventColumnsChunk overrides eventColumnsChunk in the same way.
	eventColumnsChunk int
	// eventPagesChunk overrides eventPagesChunk in the same way.
	eventPagesChunk int
	// sourceNamesChunk overrides sourceNamesChunk in the same way.
	sourceNamesChunk int
}

// DB is the service's storage: a writer goroutine, a read pool, and
// in-memory copies of the small tenancy tables used on every request.
type DB struct {
	path string
	// d is the backend's SQL fragments and error classes (db_dialect.go).
	d dialect
	// pg is the state only PostgreSQL has; its zero value on SQLite.
	pg     pgState
	write  *sql.DB
	read   *sql.DB
	writer *writer
	now    func() time.Time
	ingest *ingestStmts
	// unroll are the erasure's rollup subtractions (gdpr_erase.go).
	unroll unrollStmts
	// ckpt runs WAL checkpoints; nil for :memory:, which has no WAL.
	ckpt *sql.DB
	// ckptLoop is the checkpoint loop; conv the background conversions
	// (convert_runner.go, the engine's runner). Close ends both.
	ckptLoop, conv background
	// eventPagesReady: event_pages holds every event's row, so reports
	// read it (report_event_pages.go); set at Open and when its backfill ends.
	eventPagesReady atomic.Bool
	// wideReads: reports read the wide events rows even when event_pages
	// is complete (ReadWideEvents).
	wideReads atomic.Bool
	// oldLinks is whether links of before migration 0017 may remain in
	// the old table (intake_links.go).
	oldLinks atomic.Bool
	quota    quotaBook
	// replays are the DLQ entries this process is replaying (ClaimReplay).
	replays replayClaims
	// intake merges the writer's intake jobs and keeps their memo of
	// sessions (intake_job.go).
	intake intake
	salts  saltCache
	// reports keeps merged answers of closed days (report_cache.go).
	reports reportCache
	tenants
	// hooks are the test-only counters, funcs and knobs (test_hooks.go).
	hooks testHooks
	// splitReads is held by the one event read in two halves at a time
	// (report_event_parts.go); readConns is the read pool's size.
	splitReads sync.Mutex
	readConns  int

	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating if needed) the database at opts.Path, applies pending
// migrations, loads the tenancy caches and starts the writer goroutine.
func Open(ctx context.Context, opts Options) (*DB, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 4096
	}
	if opts.ReadConns <= 0 {
		opts.ReadConns = 4
	}
	if opts.CheckpointEvery <= 0 {
		opts.CheckpointEvery = 250 * time.Millisecond
	}
	if opts.walRestartFrames <= 0 {
		opts.walRestartFrames = engine.WALRestartFrames
	}
	if opts.Durability == "" {
		opts.Durability = DurabilityPower
	}
	if opts.DatabaseURL != "" {
		return openPG(ctx, opts)
	}
	if opts.migrations == nil {
		opts.migrations = migrationFiles
	}
	pools, err := engine.OpenSQLite(ctx, opts.Path, engine.OpenOptions{ReadConns: opts.ReadConns, Durability: opts.Durability,
		Migrations: engine.Migrations{Files: opts.migrations, Glob: sqliteMigrationsGlob}, Now: opts.Now})
	if err != nil {
		return nil, err
	}
	write, read, writeDSN := pools.Write, pools.Read, pools.WriteDSN
	db := &DB{d: sqliteDialect{}, write: write, read: read, now: opts.Now, path: opts.Path, readConns: opts.ReadConns}
	db.hooks.exactVisitorsBelow = ExactVisitorsBelow
	old, err := openLinks(ctx, write)
	db.oldLinks.Store(old)
	if err == nil {
		err = db.loadTenants(ctx)
	}
	if err == nil {
		err = db.loadQuota(ctx)
	}
	if err == nil {
		err = db.loadEventPagesReady(ctx)
	}
	if err == nil {
		db.ingest, err = prepareIngest(ctx, write, db.d, 0, old)
	}
	if err == nil {
		db.unroll, err = prepareUnroll(ctx, write)
	}
	if err != nil {
		read.Close()
		write.Close()
		return nil, err
	}
	db.intake.db = db
	db.writer = newWriter(write, db.d, opts.QueueSize, opts.Logger)
	if opts.Path != ":memory:" {
		if db.ckpt, err = sql.Open("sqlite", writeDSN); err != nil {
			db.writer.Close()
			read.Close()
			write.Close()
			return nil, err
		}
		db.ckpt.SetMaxOpenConns(1)
		stop, done := make(chan struct{}), make(chan struct{})
		db.ckptLoop = background{stop: func() { close(stop) }, done: done}
		go engine.CheckpointLoop(db.ckpt, db.writer.Writer, opts.CheckpointEvery, opts.walRestartFrames, opts.Logger, stop, done)
	}
	db.startConversions(opts.Logger, db.linkMove(opts.linkMoveChunk), db.rawConversion(opts.rawConvertChunk), db.visitBackfill(opts.visitBackfillChunk),
		db.sessionTimesConversion(opts.sessionTimesChunk), db.eventColumnsConversion(opts.eventColumnsChunk),
		db.eventPagesBackfill(opts.eventPagesChunk), db.sourceNamesBackfill(opts.sourceNamesChunk))
	return db, nil
}

// FileURI is the SQLite URI of the database file at path, for
// database/sql's "sqlite" driver (parameters may follow after a '?'):
// engine.FileURI.
func FileURI(path string) string { return engine.FileURI(path) }

// background is a goroutine of the DB that Close ends: stop asks it to
// end, done is closed when it has. The zero background was never started.
type background struct {
	stop func()
	done chan struct{}
}

// end stops b and waits for it; it does nothing for a zero background.
func (b background) end() {
	if b.stop != nil {
		b.stop()
		<-b.done
	}
}

// Close stops accepting writes, commits every queued job, and closes both
// pools. Everything acknowledged before Close is durable after it.
// A second Close does nothing and returns the first one's result.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.conv.end()
		db.coord().close()
		db.writer.Close()
		db.share().close()
		var cerr error
		db.ckptLoop.end()
		if db.ckpt != nil {
			cerr = db.ckpt.Close()
		}
		rerr := db.read.Close()
		werr := db.write.Close()
		if db.pg.slotHold != nil {
			cerr = errors.Join(cerr, db.pg.slotHold.Close())
		}
		db.closeErr = errors.Join(werr, rerr, cerr)
	})
	return db.closeErr
}

// Ping checks that a read connection answers.
func (db *DB) Ping(ctx context.Context) error {
	return db.read.PingContext(ctx)
}

// PoolStats reports the connection counts of both pools together, with
// the checkpointer's on SQLite and the slot's on PostgreSQL
// (docs/operations.md#metrics).
func (db *DB) PoolStats() (open, idle int) {
	w, r := db.write.Stats(), db.read.Stats()
	open, idle = w.OpenConnections+r.OpenConnections, w.Idle+r.Idle
	for _, other := range []*sql.DB{db.ckpt, db.pg.slotHold} {
		if other != nil {
			c := other.Stats()
			open, idle = open+c.OpenConnections, idle+c.Idle
		}
	}
	return open, idle
}
