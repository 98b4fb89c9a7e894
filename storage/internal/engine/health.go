package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/tally-analytics/tally/fault"
)

// UnwritableRetryAfter is the Retry-After, in seconds, of a write refused
// because the database cannot be written: long enough that clients do not
// hammer a full disk, short enough that they resume soon after it is freed.
const UnwritableRetryAfter = 5

// Errors of a write the database could not take. Nothing of such a write
// was committed, and the writer recovers by itself once the cause is gone.
var (
	ErrDiskFull = &fault.Error{Code: fault.Unavailable, RetryAfter: UnwritableRetryAfter,
		Message: "the database's disk is full; nothing was stored, retry later"}
	ErrReadOnly = &fault.Error{Code: fault.Unavailable, RetryAfter: UnwritableRetryAfter,
		Message: "the database is read-only; nothing was stored, retry later"}
	ErrDiskIO = &fault.Error{Code: fault.Unavailable, RetryAfter: UnwritableRetryAfter,
		Message: "the database's disk failed a write; nothing was stored, retry later"}
	// ErrWriteStalled is the health check's answer when a probe write did
	// not commit within probeTimeout.
	ErrWriteStalled = &fault.Error{Code: fault.Unavailable, RetryAfter: UnwritableRetryAfter,
		Message: "the database did not complete a write in time"}
)

// ErrUnreachable is the error of a write the database server did not
// take because it cannot be reached, or is shutting down (PostgreSQL).
var ErrUnreachable = &fault.Error{Code: fault.Unavailable, RetryAfter: UnwritableRetryAfter,
	Message: "the database cannot be reached; nothing was stored, retry later"}

// Unwritable returns the error a client gets when err means that the
// database cannot be written (disk full, read-only file, file system or
// standby, I/O error, server unreachable), as d classifies it, or nil for
// any other error.
func Unwritable(d Dialect, err error) *fault.Error {
	switch d.Classify(err) {
	case ClassFull:
		return ErrDiskFull
	case ClassReadOnly:
		return ErrReadOnly
	case ClassIO:
		return ErrDiskIO
	case ClassUnavailable:
		return ErrUnreachable
	}
	return nil
}

// Health check timing and room.
const (
	// healthFresh is how recent a committed write must be for the health
	// check to trust it instead of writing a probe.
	healthFresh = 2 * time.Second
	// probeEvery caps probe writes: health checks within it share one.
	probeEvery = time.Second
	// probeTimeout is how long the health check waits for its probe.
	probeTimeout = 2 * time.Second
	// refusalHold is how long a write refused because the database cannot
	// be written keeps the health check unavailable, whatever commits in
	// between: as long as the refused client was told to wait. On a disk
	// nearly full, small commits (a probe, a single event) still fit
	// where intake's batches do not, and a health check that trusted them
	// kept a load balancer sending traffic that was refused.
	refusalHold = UnwritableRetryAfter * time.Second
	// healthMinFree is the room (SQLite) under which the health check
	// reports the disk full even when no write failed yet: the largest
	// intake request (a 1 MiB body of 500 events with 1.8 KB of random
	// properties each) appends about 1 MB to the WAL (910 to 985 KB
	// measured), and the next checkpoint copies as much into the database
	// file. So an idle instance, which a load balancer sends nothing,
	// does not come back healthy on a probe that fits where intake does
	// not.
	healthMinFree = 2 << 20
)

// health is the outcome of the writer's latest commit that wrote
// something, its latest refusal, and the health check's latest probe.
type health struct {
	log  *slog.Logger  // nil: no log
	hold time.Duration // refusalHold; tests shorten it

	mu        sync.Mutex
	refusal   *fault.Error // the latest write refused as unwritable
	refusedAt time.Time
	failing   bool // since a refusal, until a commit after the hold
	lastOK    time.Time

	probeMu  sync.Mutex // one probe at a time; waiting checks share it
	probedAt time.Time
	probeErr error
}

// failed records a write that the database refused with cause.
func (h *health) failed(f *fault.Error, cause error) {
	h.mu.Lock()
	was := h.failing
	h.refusal, h.refusedAt, h.failing = f, time.Now(), true
	h.mu.Unlock()
	if !was && h.log != nil {
		// SQLite's message names the condition, never a value written.
		h.log.Error("database writes are failing; writes are answered 503 until they work again", "err", cause.Error())
	}
}

// committed records a commit that wrote to the database. It ends a
// failure only once the hold since the latest refusal is over: while
// commits and refusals alternate, writes are still failing.
func (h *health) committed() {
	h.mu.Lock()
	now := time.Now()
	h.lastOK = now
	recovered := h.failing && now.Sub(h.refusedAt) >= h.hold
	if recovered {
		h.failing = false
	}
	h.mu.Unlock()
	if recovered && h.log != nil {
		h.log.Info("database writes work again")
	}
}

// state returns the refusal of the last hold (nil if none), whether
// writes are failing (refused, and nothing committed after the hold), and
// the time of the latest commit that wrote.
func (h *health) state() (held *fault.Error, failing bool, lastOK time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refusal != nil && time.Since(h.refusedAt) < h.hold {
		held = h.refusal
	}
	return held, h.failing, h.lastOK
}

// probeWrite writes and deletes a row in one transaction: the table is
// unchanged, but its page is dirtied, so the commit appends a WAL frame
// (and fsyncs it in DurabilityPower), as any write would. An UPDATE that
// changes nothing would not do: SQLite leaves an unchanged page clean.
// schema_migrations is the one table every release has and no reader
// counts; version 0 never names a migration.
func probeWrite(tx *Tx) error {
	if _, err := tx.Exec(`INSERT INTO schema_migrations(version, name, applied_at) VALUES (0, 'write probe', '')`); err != nil {
		return err
	}
	if _, err := tx.Exec(`DELETE FROM schema_migrations WHERE version = 0`); err != nil {
		return err
	}
	tx.MarkWritten()
	return nil
}

// Health reports whether writes reach the database, as the writer's jobs
// meet them: nil, or an *fault.Error with code unavailable. It is
// unavailable for refusalHold after a write was
// refused, whatever committed since. Otherwise it trusts a commit of the
// last healthFresh unless writes are failing, or else (idle, or failing)
// writes a probe, at most one
// a probeEvery, waiting at most probeTimeout for it.
func (w *Writer) Health(ctx context.Context) error {
	h := &w.health
	held, failing, lastOK := h.state()
	if held != nil {
		return held
	}
	if !failing && time.Since(lastOK) < healthFresh {
		return nil
	}
	h.probeMu.Lock()
	defer h.probeMu.Unlock()
	if !h.probedAt.IsZero() && time.Since(h.probedAt) < probeEvery {
		return h.probeErr
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	err := w.Submit(pctx, 1, probeWrite)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return ctx.Err() // the caller left: nothing learnt
	case errors.Is(err, context.DeadlineExceeded):
		err = ErrWriteStalled
	case fault.As(err) == nil:
		err = ErrDiskIO
	}
	h.probedAt, h.probeErr = time.Now(), err
	return err
}

// RoomHealth is unavailable when the file system of the SQLite file at
// path has less than healthMinFree left; nil in memory, and where the free
// space cannot be read.
func RoomHealth(path string) error {
	if path == "" || path == ":memory:" {
		return nil
	}
	free, ok := FreeBytes(filepath.Dir(path))
	if !ok || free >= healthMinFree {
		return nil
	}
	return &fault.Error{Code: fault.Unavailable, RetryAfter: UnwritableRetryAfter,
		Message: fmt.Sprintf("the database's disk is full: %d KiB left, under the %d MiB the largest write may need", free>>10, healthMinFree>>20)}
}

// HoldRefusalsFor sets how long a write refused as unwritable keeps Health
// unavailable (refusalHold); tests shorten it to see the hold end.
func (w *Writer) HoldRefusalsFor(d time.Duration) {
	w.health.mu.Lock()
	w.health.hold = d
	w.health.mu.Unlock()
}

// LastWrite is the time of the latest commit that wrote (zero before the
// first).
func (w *Writer) LastWrite() time.Time {
	_, _, lastOK := w.health.state()
	return lastOK
}
