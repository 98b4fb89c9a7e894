package storage

import (
	"context"
	"database/sql"
	"log/slog"

	"github.com/tally-analytics/tally/storage/internal/engine"
)

// ErrQueueFull is returned by a write when the writer's queue is full; the
// caller should answer 503 with Retry-After rather than wait without bound.
var ErrQueueFull = engine.ErrQueueFull

// ErrClosed is returned for writes submitted after Close.
var ErrClosed = engine.ErrClosed

// writeTx is the transaction a storage job runs in: the engine's (its SQL
// transaction, number and commit hooks) with the partial generations that
// every write to the inputs of day partials bumps (partial_days.go). The
// engine's writer knows nothing of partials; storage hands them to each of
// its jobs here.
type writeTx struct {
	*engine.Tx
	gens *partialGens
}

// job is a unit of work of the writer (engine.Job).
type job = engine.Job

// writer is the engine's single writer (engine.Writer: a queue, group
// commit, per-job isolation, merged runs of one kind of job) as storage
// uses it: its jobs take a writeTx.
type writer struct {
	*engine.Writer
	// gens is the database's count of day partial changes (partial_days.go).
	gens *partialGens
	log  *slog.Logger // nil: no log
}

// newWriter starts the single writer of the write connection db.
func newWriter(db *sql.DB, d dialect, size int, log *slog.Logger) *writer {
	return &writer{Writer: engine.NewWriter(db, d, size, log), gens: &partialGens{}, log: log}
}

// tx is the writeTx of the engine's tx.
func (w *writer) tx(tx *engine.Tx) *writeTx { return &writeTx{Tx: tx, gens: w.gens} }

// fn is f as the engine runs it.
func (w *writer) fn(f func(*writeTx) error) func(*engine.Tx) error {
	return func(tx *engine.Tx) error { return f(w.tx(tx)) }
}

// newJob returns a job running fn that writes about weight rows.
func (w *writer) newJob(weight int, fn func(*writeTx) error) *job {
	return engine.NewJob(weight, w.fn(fn))
}

// submit queues fn without waiting for room (a full queue gives
// ErrQueueFull at once), then waits for the commit (engine.Writer.Submit).
func (w *writer) submit(ctx context.Context, weight int, fn func(*writeTx) error) error {
	return w.Submit(ctx, weight, w.fn(fn))
}

// do queues fn, waiting for room if the queue is full, then waits for the
// commit: for rare administrative writes that must not be refused.
func (w *writer) do(ctx context.Context, fn func(*writeTx) error) error {
	return w.Do(ctx, w.fn(fn))
}

// doOwn is do for a job that runs in a transaction of its own, without a
// savepoint (engine.Writer.DoOwn): an erasure's.
func (w *writer) doOwn(ctx context.Context, fn func(*writeTx) error) error {
	return w.DoOwn(ctx, w.fn(fn))
}

// RunMerged runs intake's works in tx (engine.MergeGroup).
func (in *intake) RunMerged(tx *engine.Tx, parts []any, alone bool) error {
	return in.runMerged(in.db.writer.tx(tx), parts, alone)
}

// LockAll locks the rows of intake's works before any job of tx writes
// (engine.PreLocker).
func (in *intake) LockAll(tx *engine.Tx, parts []any) error {
	return in.lockAll(in.db.writer.tx(tx), parts)
}

// WriterRetries is how many merged write transactions ran again whole
// after losing a deadlock or a serialization conflict since Open
// (docs/operations.md#metrics); always 0 on SQLite, where the writer is the
// only one.
func (db *DB) WriterRetries() int64 { return db.writer.Retries() }
