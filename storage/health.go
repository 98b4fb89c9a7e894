package storage

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/tally-analytics/tally/fault"
)

// unwritableRetryAfter is the Retry-After, in seconds, of a write refused
// because the database cannot be written: long enough that clients do not
// hammer a full disk, short enough that they resume soon after it is freed.
const unwritableRetryAfter = 5

// Errors of a write the database could not take. Nothing of such a write
// was committed, and the writer recovers by itself once the cause is gone.
var (
	errDiskFull = &fault.Error{Code: fault.Unavailable, RetryAfter: unwritableRetryAfter,
		Message: "the database's disk is full; nothing was stored, retry later"}
	errReadOnly = &fault.Error{Code: fault.Unavailable, RetryAfter: unwritableRetryAfter,
		Message: "the database is read-only; nothing was stored, retry later"}
	errDiskIO = &fault.Error{Code: fault.Unavailable, RetryAfter: unwritableRetryAfter,
		Message: "the database's disk failed a write; nothing was stored, retry later"}
	// errWriteStalled is the health check's answer when a probe write did
	// not commit within probeTimeout.
	errWriteStalled = &fault.Error{Code: fault.Unavailable, RetryAfter: unwritableRetryAfter,
		Message: "the database did not complete a write in time"}
)

// errUnreachable is the error of a write the database server did not
// take because it cannot be reached, or is shutting down (PostgreSQL).
var errUnreachable = &fault.Error{Code: fault.Unavailable, RetryAfter: unwritableRetryAfter,
	Message: "the database cannot be reached; nothing was stored, retry later"}

// unwritable returns the error a client gets when err means that the
// database cannot be written (disk full, read-only file, file system or
// standby, I/O error, server unreachable), as d classifies it, or nil for
// any other error.
func unwritable(d dialect, err error) *fault.Error {
	switch d.classify(err) {
	case errFull:
		return errDiskFull
	case errReadOnlyDB:
		return errReadOnly
	case errIO:
		return errDiskIO
	case errUnavailable:
		return errUnreachable
	}
	return nil
}

// Health check timing.
const (
	// healthFresh is how recent a committed write must be for the health
	// check to trust it instead of writing a probe.
	healthFresh = 2 * time.Second
	// probeEvery caps probe writes: health checks within it share one.
	probeEvery = time.Second
	// probeTimeout is how long the health check waits for its probe.
	probeTimeout = 2 * time.Second
)

// writeHealth is the outcome of the writer's latest commit that wrote
// something, and of the health check's latest probe.
type writeHealth struct {
	log *slog.Logger // nil: no log

	mu      sync.Mutex
	failure *fault.Error // nil while the latest write committed
	lastOK  time.Time

	probeMu  sync.Mutex // one probe at a time; waiting checks share it
	probedAt time.Time
	probeErr error
}

// failed records a write that the database refused with cause.
func (h *writeHealth) failed(f *fault.Error, cause error) {
	h.mu.Lock()
	was := h.failure
	h.failure = f
	h.mu.Unlock()
	if was == nil && h.log != nil {
		// SQLite's message names the condition, never a value written.
		h.log.Error("database writes are failing; intake answers 503 until they work again", "err", cause.Error())
	}
}

// committed records a commit that wrote to the database.
func (h *writeHealth) committed() {
	h.mu.Lock()
	was := h.failure
	h.failure, h.lastOK = nil, time.Now()
	h.mu.Unlock()
	if was != nil && h.log != nil {
		h.log.Info("database writes work again")
	}
}

func (h *writeHealth) state() (failure *fault.Error, lastOK time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failure, h.lastOK
}

// probeWrite writes and deletes a row in one transaction: the table is
// unchanged, but its page is dirtied, so the commit appends a WAL frame
// (and fsyncs it in DurabilityPower), as an event would. An UPDATE that
// changes nothing would not do: SQLite leaves an unchanged page clean.
// schema_migrations is the one table every release has and no reader
// counts; version 0 never names a migration.
func probeWrite(tx *writeTx) error {
	if _, err := tx.Exec(`INSERT INTO schema_migrations(version, name, applied_at) VALUES (0, 'write probe', '')`); err != nil {
		return err
	}
	if _, err := tx.Exec(`DELETE FROM schema_migrations WHERE version = 0`); err != nil {
		return err
	}
	tx.markWritten()
	return nil
}

// WriteHealth reports whether writes reach the database file: nil, or an
// *fault.Error with code unavailable. It trusts a commit of the last
// healthFresh; otherwise (idle, or failing) it writes a probe, at most one
// a probeEvery, waiting at most probeTimeout for it.
func (db *DB) WriteHealth(ctx context.Context) error {
	h := &db.writer.health
	if failure, lastOK := h.state(); failure == nil && time.Since(lastOK) < healthFresh {
		return nil
	}
	h.probeMu.Lock()
	defer h.probeMu.Unlock()
	if !h.probedAt.IsZero() && time.Since(h.probedAt) < probeEvery {
		return h.probeErr
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	err := db.writer.submit(pctx, 1, probeWrite)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return ctx.Err() // the caller left: nothing learnt
	case errors.Is(err, context.DeadlineExceeded):
		err = errWriteStalled
	case fault.As(err) == nil:
		err = errDiskIO
	}
	h.probedAt, h.probeErr = time.Now(), err
	return err
}
