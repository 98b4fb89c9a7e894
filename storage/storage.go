// Package storage keeps the service's state: events and what intake derives
// from them (sessions and visits, identity links, profiles, rollups), the
// tenancy (workspaces, sites, keys), the query API's model and its reads,
// GDPR erasure and export, retention, backups and imports
// (docs/storage.md, docs/architecture.md#storages-files).
//
// It runs over either backend: one SQLite file in WAL mode, or one
// PostgreSQL database shared by several instances
// (docs/postgresql.md#on-postgresql), what differs kept behind the dialect
// and in _pg.go files. One goroutine owns the only write connection (the
// single writer, db_writer.go): every mutation is a job handed to it, and
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
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationPGFiles are PostgreSQL's migrations, numbered on their own
// (db_open_pg.go).
//
//go:embed migrations_pg/*.sql
var migrationPGFiles embed.FS

// timeLayout is the one timestamp format of the service: UTC, exactly three
// fraction digits. It is fixed width, so stored text sorts in time order.
const timeLayout = "2006-01-02T15:04:05.000Z"

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
}

// DB is the service's storage: a writer goroutine, a read pool, and
// in-memory copies of the small tenancy tables used on every request.
type DB struct {
	path string
	// d is the backend's SQL fragments and error classes (db_dialect.go).
	d dialect
	// co coordinates instances on one database (db_coord.go); nil on SQLite.
	co     coord
	write  *sql.DB
	read   *sql.DB
	writer *writer
	now    func() time.Time
	ingest *ingestStmts
	// slot is the rollup slot this instance writes on PostgreSQL
	// (docs/postgresql.md#on-postgresql); 0 on SQLite.
	slot int
	// slotHold is the connection whose advisory lock claims slot, held
	// until Close (intake_slots_pg.go); nil on SQLite.
	slotHold *sql.DB
	// unroll are the erasure's rollup subtractions (gdpr_erase.go).
	unroll unrollStmts
	// pgSize measures the database on PostgreSQL (db_diskusage_pg.go); nil
	// on SQLite.
	pgSize *pgDiskUsage
	// ckpt runs WAL checkpoints; nil for :memory:, which has no WAL.
	ckpt *sql.DB
	// ckptLoop is the checkpoint loop; conv the background conversions
	// (convert_runner.go). Close ends both.
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
	// qs is where the quota book's share comes from (intake_quota.go); nil is
	// SQLite's, the whole quota.
	qs quotaShare
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
		opts.walRestartFrames = walRestartFrames
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
	writeDSN, readDSN, err := dsns(opts.Path, opts.Durability)
	if err != nil {
		return nil, err
	}
	write, err := sql.Open("sqlite", writeDSN)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	// The writer goroutine is the only user of this pool; one connection
	// means SQLite never sees two writers of ours contend for the lock.
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)

	if err := migrate(ctx, write, opts.migrations, opts.Now); err != nil {
		write.Close()
		if unwritable(sqliteDialect{}, err) != nil {
			// SQLite's own words can be as vague as "disk I/O error".
			err = fmt.Errorf("%w (is the disk full, or the file or its folder read-only?)", err)
		}
		return nil, err
	}

	read, err := sql.Open("sqlite", readDSN)
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("open database: %w", err)
	}
	read.SetMaxOpenConns(opts.ReadConns)
	read.SetMaxIdleConns(opts.ReadConns)
	read.SetConnMaxIdleTime(0)

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
			db.writer.close()
			read.Close()
			write.Close()
			return nil, err
		}
		db.ckpt.SetMaxOpenConns(1)
		stop, done := make(chan struct{}), make(chan struct{})
		db.ckptLoop = background{stop: func() { close(stop) }, done: done}
		go checkpointLoop(db.ckpt, db.writer, opts.CheckpointEvery, opts.walRestartFrames, opts.Logger, stop, done)
	}
	db.startConversions(opts.Logger, db.linkMove(opts.linkMoveChunk), db.rawConversion(opts.rawConvertChunk), db.visitBackfill(opts.visitBackfillChunk),
		db.sessionTimesConversion(opts.sessionTimesChunk), db.eventColumnsConversion(opts.eventColumnsChunk),
		db.eventPagesBackfill(opts.eventPagesChunk))
	return db, nil
}

// dsns returns the data source names of the write and read pools.
func dsns(path string, durability Durability) (write, read string, err error) {
	if path == "" {
		return "", "", errors.New("database path is empty")
	}
	synchronous, err := durability.synchronous()
	if err != nil {
		return "", "", err
	}
	common := "_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)"
	if path == ":memory:" {
		// The memdb VFS shares one in-memory database between all
		// connections that name it; a random name isolates each Open.
		name := "/tally-" + randomHex(8)
		base := "file:" + name + "?vfs=memdb&" + common
		return base + "&_txlock=immediate", base, nil
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", "", fmt.Errorf("create database folder: %w", err)
		}
	}
	// synchronous follows DURABILITY: see Durability for what each survives.
	base := FileURI(path) + "?" + common + "&_pragma=journal_mode(WAL)&_pragma=synchronous(" + synchronous + ")"
	// _txlock=immediate takes the write lock at BEGIN, so the writer never
	// upgrades a read transaction and hits SQLITE_BUSY mid-transaction.
	//
	// The writer never checkpoints (wal_autocheckpoint=0): copying the WAL
	// into the database and its fsync would stall every caller queued behind
	// that commit. checkpointLoop does it from its own connection instead.
	// temp_store=MEMORY keeps the per-job savepoints' sub-journals in RAM.
	// secure_delete overwrites deleted content, so GDPR-erased rows do not
	// linger in free pages of the file.
	return base + "&_pragma=cache_size(-65536)&_pragma=temp_store(2)&_pragma=secure_delete(1)&_pragma=wal_autocheckpoint(0)&_txlock=immediate",
		base + "&_pragma=query_only(1)", nil
}

// FileURI is the SQLite URI of the database file at path, for
// database/sql's "sqlite" driver (parameters may follow after a '?').
// SQLite reads the name as a URI, where '#' would end the path and '?'
// start the parameters: unescaped, a file named "a#b.db" would silently
// be "a".
func FileURI(path string) string {
	return "file:" + strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
}

// walRestartFrames is the WAL length (in frames of one 4 KiB page) past
// which the checkpoint loop has the WAL start over: 64 MiB.
const walRestartFrames = 16384

// checkpointLoop copies committed WAL frames into the database file from a
// connection of its own, without blocking the writer (PASSIVE), every
// interval until stop is closed; then it checkpoints once more and
// truncates the WAL.
//
// SQLite starts the WAL over from its beginning only when a write
// transaction begins with every frame already copied. Under steady load the
// writer commits while this loop copies, so that moment never comes: at
// 2,000 events/s the WAL file grew by about 85 MB a second, without bound.
// So once the WAL holds restartFrames frames, the loop copies twice more
// (each pass only what was committed during the previous one) and asks the
// writer to copy the last few frames itself, between two batches
// (writer.loop): its next transaction then overwrites the WAL from the
// start. No journal_size_limit is set: truncating a WAL file that a burst
// made long stalled the next commit for 30 ms, while a WAL that starts over
// at 64 MiB stays near that size. Failures are logged (checkpointFailures).
func checkpointLoop(db *sql.DB, w *writer, interval time.Duration, restartFrames int, log *slog.Logger, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(interval)
	defer t.Stop()
	failures := checkpointFailures{log: log}
	for {
		select {
		case <-stop:
			if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil && log != nil {
				log.Warn("final WAL checkpoint failed; the WAL file stays and is copied after the next start", "err", err.Error())
			}
			return
		case <-t.C:
			var busy, frames, copied int
			err := db.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied)
			failures.report(err)
			if err != nil || frames < restartFrames {
				continue
			}
			// Copy what was committed during that pass, then during this
			// one, so that the writer's share is a few frames.
			for range 2 {
				_, err := db.Exec(`PRAGMA wal_checkpoint(PASSIVE)`)
				failures.report(err)
			}
			w.checkpointWanted.Store(true)
		}
	}
}

// checkpointFailures logs the checkpoint loop's failures: one line when
// checkpoints start failing, one when they work again. The WAL grows until
// one succeeds, which the operator should know, but a pass every interval
// must not flood the log.
type checkpointFailures struct {
	log     *slog.Logger // nil: no log
	failing bool
}

// report records the outcome of one checkpoint.
func (c *checkpointFailures) report(err error) {
	switch {
	case c.log == nil:
	case err != nil && !c.failing:
		// SQLite's message names the condition, never a value.
		c.log.Warn("WAL checkpoints are failing; the WAL grows until one succeeds", "err", err.Error())
	case err == nil && c.failing:
		c.log.Info("WAL checkpoints work again")
	}
	c.failing = err != nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return hex.EncodeToString(b)
}

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
		db.writer.close()
		db.share().close()
		var cerr error
		db.ckptLoop.end()
		if db.ckpt != nil {
			cerr = db.ckpt.Close()
		}
		rerr := db.read.Close()
		werr := db.write.Close()
		if db.slotHold != nil {
			cerr = errors.Join(cerr, db.slotHold.Close())
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
	for _, other := range []*sql.DB{db.ckpt, db.slotHold} {
		if other != nil {
			c := other.Stats()
			open, idle = open+c.OpenConnections, idle+c.Idle
		}
	}
	return open, idle
}
