package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tally-analytics/tally/fault"
)

// ErrQueueFull is returned by Submit when the writer's queue is full; the
// caller should answer 503 with Retry-After rather than wait without bound.
var ErrQueueFull = &fault.Error{Code: fault.Unavailable, Message: "the write queue is full, retry shortly", RetryAfter: 1}

// ErrClosed is returned for jobs submitted after Close.
var ErrClosed = &fault.Error{Code: fault.Unavailable, Message: "the server is shutting down", RetryAfter: 1}

// maxBatchWeight caps how many rows one group transaction holds, so a very
// long queue still commits (and acknowledges) in steps.
const maxBatchWeight = 5000

// Tx is the transaction a job runs in. Jobs that ran together share it, and
// one job's failure undoes only that job: each runs inside its own
// savepoint, except in a transaction of intake jobs only, which is rolled
// back whole and retried job by job when it fails (see Writer.commit).
type Tx struct {
	*sql.Tx
	onCommit []func()
}

// OnCommit registers f to run on the writer goroutine after the transaction
// commits (and not at all if the job fails). In-memory caches are updated
// here, in commit order.
func (tx *Tx) OnCommit(f func()) { tx.onCommit = append(tx.onCommit, f) }

type job struct {
	fn     func(*Tx) error
	weight int
	done   chan error
	// stats, when set, receives how long the group commit took.
	stats func(commit time.Duration)
	// work marks an Ingest job, which has no fn: consecutive ones run
	// merged through Writer.ingest (see commit).
	work *ingestWork
	// probe marks the health check's probe write (see probeWrite).
	probe bool
}

// Writer owns the write connection. One goroutine takes whatever jobs are
// queued, runs them in one transaction and commits; only then does each
// job's caller get its answer. There is no timer: a lone job commits at once,
// and under load the queue that builds up during one commit is the next
// batch (group commit).
type Writer struct {
	db    *sql.DB
	queue chan *job
	// ingest runs several Ingest works as one unit. whole is set when that
	// unit is the entire transaction: nothing else in it wrote before.
	ingest func(tx *Tx, works []*ingestWork, whole bool) error
	// mixed is called after a transaction that was not one whole ingest
	// unit commits; the ingest side drops what it caches of the database.
	mixed func()

	// checkpointWanted is set by checkpointLoop when the WAL has grown long:
	// the writer then checkpoints between two batches so that the WAL can
	// start over.
	checkpointWanted atomic.Bool

	// health is the outcome of the latest commit that wrote something.
	health writeHealth

	mu     sync.RWMutex // guards closed against sends on a closed queue
	closed bool
	exited chan struct{}
}

func newWriter(db *sql.DB, size int, ingest func(*Tx, []*ingestWork, bool) error, mixed func(), log *slog.Logger) *Writer {
	w := &Writer{db: db, queue: make(chan *job, size), exited: make(chan struct{}), ingest: ingest, mixed: mixed,
		health: writeHealth{log: log}}
	go w.loop()
	return w
}

// Submit queues fn without waiting for room: a full queue gives ErrQueueFull
// at once. It then waits for the commit. weight is the number of rows the
// job writes (at least 1), used to size batches. If ctx ends first, Submit
// returns ctx.Err(), but the job still runs: it may be committed.
func (w *Writer) Submit(ctx context.Context, weight int, fn func(*Tx) error) error {
	return w.submit(ctx, weight, fn, false)
}

// Do queues fn, waiting for room if the queue is full, then waits for the
// commit. It is for rare administrative writes that must not be refused.
func (w *Writer) Do(ctx context.Context, fn func(*Tx) error) error {
	return w.submit(ctx, 1, fn, true)
}

func (w *Writer) submit(ctx context.Context, weight int, fn func(*Tx) error, wait bool) error {
	return w.enqueue(ctx, &job{fn: fn, weight: max(weight, 1), done: make(chan error, 1)}, wait)
}

// enqueue queues j (waiting for room when wait is set) and waits for its
// commit.
func (w *Writer) enqueue(ctx context.Context, j *job, wait bool) error {
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		return ErrClosed
	}
	if wait {
		select {
		case w.queue <- j:
		case <-ctx.Done():
			w.mu.RUnlock()
			return ctx.Err()
		}
	} else {
		select {
		case w.queue <- j:
		default:
			w.mu.RUnlock()
			return ErrQueueFull
		}
	}
	w.mu.RUnlock()
	select {
	case err := <-j.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// QueueLen reports how many jobs wait for the writer.
func (w *Writer) QueueLen() int { return len(w.queue) }

// Close refuses new jobs, commits every queued one and waits for the writer
// goroutine to stop.
func (w *Writer) Close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
	<-w.exited
}

func (w *Writer) loop() {
	defer close(w.exited)
	var carry *job
	for {
		first := carry
		carry = nil
		if first == nil {
			j, ok := <-w.queue
			if !ok {
				return
			}
			first = j
		}
		batch := []*job{first}
		weight := first.weight
	drain:
		for weight < maxBatchWeight {
			select {
			case j, ok := <-w.queue:
				if !ok {
					break drain
				}
				if weight+j.weight > maxBatchWeight {
					carry = j
					break drain
				}
				batch = append(batch, j)
				weight += j.weight
			default:
				break drain
			}
		}
		w.commit(batch)
		if w.checkpointWanted.Swap(false) {
			// Only the frames committed since the checkpoint loop's last
			// pass are left to copy, so this is short; afterwards the next
			// transaction restarts the WAL (see checkpointLoop).
			w.db.Exec(`PRAGMA wal_checkpoint(PASSIVE)`)
		}
	}
}

// commit runs batch in one transaction and answers every job after the
// commit. A batch of intake jobs only (the usual one) first runs as one
// merged unit straight in the transaction; anything else, or such a run
// that failed (and was rolled back whole), runs with each job or run of
// intake jobs in a savepoint of its own.
func (w *Writer) commit(batch []*job) {
	start := time.Now()
	allIngest := true
	for _, j := range batch {
		allIngest = allIngest && j.work != nil
	}
	if allIngest && w.commitWhole(batch, start) {
		return
	}
	errs := make([]error, len(batch))
	hooks := make([][]func(), len(batch))
	sqlTx, err := w.db.BeginTx(context.Background(), nil)
	if err != nil {
		for i := range errs {
			errs[i] = fmt.Errorf("begin write transaction: %w", err)
		}
		w.answer(batch, errs, hooks, false, start)
		return
	}
	for i := 0; i < len(batch); {
		if batch[i].work == nil {
			errs[i], hooks[i] = runJob(sqlTx, batch[i])
			i++
			continue
		}
		k := i + 1
		for k < len(batch) && batch[k].work != nil {
			k++
		}
		w.runIngest(sqlTx, batch[i:k], errs[i:k], hooks[i:k], !allIngest)
		i = k
	}
	if err := sqlTx.Commit(); err != nil {
		err = fmt.Errorf("commit: %w", err)
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	w.answer(batch, errs, hooks, false, start)
}

// commitWhole runs batch, intake jobs only, as one merged unit that is the
// whole transaction. Without a savepoint SQLite copies no page into the
// savepoint's in-memory journal, which was about a fifth of the writer's
// work in long batched runs. It reports false, having rolled the transaction back, if the
// run failed: commit then runs the jobs one by one.
func (w *Writer) commitWhole(batch []*job, start time.Time) bool {
	sqlTx, err := w.db.BeginTx(context.Background(), nil)
	if err != nil {
		return false // commit tries again and reports the error
	}
	works := make([]*ingestWork, len(batch))
	for i, j := range batch {
		works[i] = j.work
	}
	tx := &Tx{Tx: sqlTx}
	if err := recovered(func() error { return w.ingest(tx, works, true) }); err != nil {
		sqlTx.Rollback()
		return false
	}
	errs := make([]error, len(batch))
	hooks := make([][]func(), len(batch))
	hooks[0] = tx.onCommit
	if err := sqlTx.Commit(); err != nil {
		err = fmt.Errorf("commit: %w", err)
		for i := range errs {
			errs[i] = err
		}
	}
	w.answer(batch, errs, hooks, true, start)
	return true
}

// answer runs the commit hooks of the jobs that succeeded, then answers
// every job. whole tells that the transaction was one merged intake unit;
// after any other, the intake side's memo of the database is dropped.
// A job refused because the database cannot be written (disk full,
// read-only) gets an unavailable error with Retry-After, and the batch's
// outcome is recorded for the health check.
func (w *Writer) answer(batch []*job, errs []error, hooks [][]func(), whole bool, start time.Time) {
	elapsed := time.Since(start)
	var failure *fault.Error
	var cause error
	wrote := false
	for i, j := range batch {
		if errs[i] == nil {
			for _, h := range hooks[i] {
				h()
			}
			// Only these surely wrote pages: a commit of a job that
			// changed nothing succeeds even on a full disk.
			wrote = wrote || j.probe || (j.work != nil && (j.work.accepted > 0 || len(j.work.dlq) > 0))
			continue
		}
		if f := unwritable(errs[i]); f != nil {
			if failure == nil {
				failure, cause = f, errs[i]
			}
			errs[i] = f
		}
	}
	switch {
	case failure != nil:
		w.health.failed(failure, cause)
	case wrote:
		w.health.committed()
	}
	if !whole && w.mixed != nil {
		w.mixed()
	}
	for i, j := range batch {
		if j.stats != nil {
			j.stats(elapsed)
		}
		j.done <- errs[i]
	}
}

// runIngest runs consecutive Ingest jobs as one merged job in a savepoint,
// so their sessions and rollups are written once; when merged is false, or
// should the merged job fail, each job runs alone, so one bad request
// cannot fail the others.
func (w *Writer) runIngest(sqlTx *sql.Tx, jobs []*job, errs []error, hooks [][]func(), merged bool) {
	if merged {
		works := make([]*ingestWork, len(jobs))
		for i, j := range jobs {
			works[i] = j.work
		}
		err, h := runJob(sqlTx, &job{fn: func(tx *Tx) error { return w.ingest(tx, works, false) }})
		if err == nil {
			hooks[0] = h
			return
		}
		if len(jobs) == 1 {
			errs[0] = err
			return
		}
	}
	for i, j := range jobs {
		errs[i], hooks[i] = runJob(sqlTx, &job{fn: func(tx *Tx) error { return w.ingest(tx, []*ingestWork{j.work}, false) }})
	}
}

// recovered calls fn, turning a panic into an error so that one bad job
// cannot take the writer (and every queued event) down.
func recovered(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("write job panicked: %v", r)
		}
	}()
	return fn()
}

// runJob runs one job inside a savepoint of tx.
func runJob(sqlTx *sql.Tx, j *job) (err error, hooks []func()) {
	if _, err := sqlTx.Exec(`SAVEPOINT job`); err != nil {
		return fmt.Errorf("savepoint: %w", err), nil
	}
	tx := &Tx{Tx: sqlTx}
	if err = recovered(func() error { return j.fn(tx) }); err != nil {
		if _, rerr := sqlTx.Exec(`ROLLBACK TO job`); rerr != nil {
			err = errors.Join(err, fmt.Errorf("rollback to savepoint: %w", rerr))
		}
		sqlTx.Exec(`RELEASE job`)
		return err, nil
	}
	if _, err := sqlTx.Exec(`RELEASE job`); err != nil {
		return fmt.Errorf("release savepoint: %w", err), nil
	}
	return nil, tx.onCommit
}
