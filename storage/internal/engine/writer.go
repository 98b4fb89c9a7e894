package engine

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

// ErrQueueFull is returned by a write when the writer's queue is full; the
// caller should answer 503 with Retry-After rather than wait without bound.
var ErrQueueFull = &fault.Error{Code: fault.Unavailable, Message: "the write queue is full, retry shortly", RetryAfter: 1}

// ErrClosed is returned for writes submitted after Close.
var ErrClosed = &fault.Error{Code: fault.Unavailable, Message: "the server is shutting down", RetryAfter: 1}

// maxBatchWeight caps how many rows one group transaction holds, so a very
// long queue still commits (and acknowledges) in steps.
const maxBatchWeight = 5000

// Tx is the transaction a job runs in. Jobs that ran together share
// the SQL transaction, and one job's failure undoes only that job (see
// Writer.commit).
type Tx struct {
	*sql.Tx
	// Seq numbers the writer's transactions: each one begun, committed or
	// not, gets the next number. A job that keeps a copy of what it wrote
	// can tell from it whether any other transaction ran since its own.
	Seq   uint64
	hooks []func()
	wrote bool
}

// OnCommit registers f to run on the writer goroutine after the transaction
// commits (and not at all if the job fails). In-memory caches are updated
// here, in commit order.
func (tx *Tx) OnCommit(f func()) { tx.hooks = append(tx.hooks, f) }

// MarkWritten tells the writer that the job surely dirtied a page, so that
// its commit proves the database file writable (see Writer.answer).
func (tx *Tx) MarkWritten() { tx.wrote = true }

// MergeGroup is a kind of job whose consecutive queued jobs run merged: one
// call writes the parts of them all, so that what they share is written
// once per transaction instead of once per job. The writer knows nothing
// of what the parts are; the group's owner holds the rules of merging
// them.
//
// What a group learns of the transactions is generic: whether its unit is
// the whole transaction (alone), the transaction's number (Tx.Seq, so
// that it can tell whether another transaction ran since one of its own),
// and its commit, through the hooks it registers.
type MergeGroup interface {
	// RunMerged writes parts in tx as one unit, failing as a whole. alone
	// says that the unit is the transaction's whole content, run without
	// a savepoint: nothing else in it wrote before, nothing will after.
	// Otherwise it runs in a savepoint, among other jobs. A unit that
	// fails alone, or merged from several parts, is run again one part at
	// a time (parts of length 1, alone false), each in a savepoint of its
	// own, so that one bad part cannot fail the others.
	RunMerged(tx *Tx, parts []any, alone bool) error
}

// PreLocker is a MergeGroup whose units lock rows in one global order
// before they write (on PostgreSQL, with several instances). In a
// transaction of several units (a mixed batch, or a unit run again one
// part at a time) each would lock its own rows after the previous ones
// wrote theirs, out of that order, and could deadlock with another
// instance; LockAll takes the locks of all the transaction's parts at
// once, first. It is the writer's pre-commit hook: the one call a group
// gets on a transaction before any job of it runs.
type PreLocker interface {
	LockAll(tx *Tx, parts []any) error
}

// Job is one unit of work handed to the writer: either fn, or a part of
// group that runs merged with the group's consecutive jobs.
type Job struct {
	fn    func(*Tx) error
	group MergeGroup
	part  any
	// outside, when set, runs alone on the connection between two
	// transactions: an online backup's step fails inside one.
	outside func(*sql.Conn) error
	// own runs fn in a transaction of its own, without a savepoint (see
	// commitOwn).
	own bool

	weight int
	done   chan error
	// Stats, when set, receives how long the group commit took.
	Stats func(commit time.Duration)
}

// NewJob returns a job running fn that writes about weight rows.
func NewJob(weight int, fn func(*Tx) error) *Job {
	return &Job{fn: fn, weight: max(weight, 1), done: make(chan error, 1)}
}

// NewPart returns a job that is part of group g, run merged with the
// group's consecutive queued jobs, writing about weight rows.
func NewPart(g MergeGroup, part any, weight int) *Job {
	return &Job{group: g, part: part, weight: max(weight, 1), done: make(chan error, 1)}
}

// Wait waits for j's commit and returns its outcome. If ctx ends first it
// returns ctx.Err(), but the job still runs: it may be committed.
func (j *Job) Wait(ctx context.Context) error {
	select {
	case err := <-j.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Writer owns the write connection. One goroutine takes whatever jobs are
// queued, runs them in one transaction and commits; only then does each
// job's caller get its answer. There is no timer: a lone job commits at once,
// and under load the queue that builds up during one commit is the next
// batch (group commit). NewWriter starts the goroutine, Close stops it
// after the queue is drained.
type Writer struct {
	db    *sql.DB
	d     Dialect // classifies the errors of a failed commit
	queue chan *Job
	log   *slog.Logger // nil: no log

	// seq is the number of the latest transaction begun (Tx.Seq).
	// Only the writer goroutine uses it.
	seq uint64

	// checkpointWanted is set by checkpointLoop when the WAL has grown long:
	// the writer then checkpoints between two batches so that the WAL can
	// start over.
	checkpointWanted atomic.Bool

	// pending counts the jobs queued or running, less those answered.
	pending atomic.Int64
	// retries counts merged units run again whole after losing a deadlock
	// or a serialization conflict (PostgreSQL with several instances).
	retries atomic.Int64

	// health is the outcome of the latest commit that wrote something
	// and of the latest refused write.
	health health

	mu     sync.RWMutex // guards closed against sends on a closed queue
	closed bool
	exited chan struct{}
}

// NewWriter starts the single writer of db, the write connection: a pool
// of one, which only the writer uses. d classifies the errors of a failed
// commit; size bounds the queue; log, if set, receives the changes of
// health (writes failing, working again) and failing checkpoints.
func NewWriter(db *sql.DB, d Dialect, size int, log *slog.Logger) *Writer {
	w := &Writer{db: db, d: d, queue: make(chan *Job, size), exited: make(chan struct{}), log: log,
		health: health{log: log, hold: refusalHold}}
	go w.loop()
	return w
}

// Submit queues fn without waiting for room: a full queue gives
// ErrQueueFull at once. It then waits for the commit. weight is the number
// of rows the job writes (at least 1), used to size batches. If ctx ends
// first, submit returns ctx.Err(), but the job still runs: it may be
// committed.
func (w *Writer) Submit(ctx context.Context, weight int, fn func(*Tx) error) error {
	return w.Run(ctx, NewJob(weight, fn), false)
}

// Do queues fn, waiting for room if the queue is full, then waits for the
// commit. It is for rare administrative writes that must not be refused.
func (w *Writer) Do(ctx context.Context, fn func(*Tx) error) error {
	return w.Run(ctx, NewJob(1, fn), true)
}

// DoOwn is Do for a job that runs in a transaction of its own, without a
// savepoint: for a job that changes many pages, such as an erasure's
// (see commitOwn).
func (w *Writer) DoOwn(ctx context.Context, fn func(*Tx) error) error {
	j := NewJob(1, fn)
	j.own = true
	return w.Run(ctx, j, true)
}

// Outside queues fn to run on the write connection between two
// transactions, waiting for room if the queue is full, and waits for it to
// finish. It takes no context: once queued, fn has always run when Outside
// returns, so a caller keeping state on the connection (a backup) knows
// where it stands. After close it returns ErrClosed without running fn.
func (w *Writer) Outside(fn func(*sql.Conn) error) error {
	j := &Job{outside: fn, weight: 1, done: make(chan error, 1)}
	return w.Run(context.Background(), j, true)
}

// Run queues j (waiting for room when wait is set) and waits for its
// commit.
func (w *Writer) Run(ctx context.Context, j *Job, wait bool) error {
	if err := w.Enqueue(ctx, j, wait); err != nil {
		return err
	}
	return j.Wait(ctx)
}

// Enqueue queues j and returns once it is queued; j.wait gives its
// outcome. Without wait a full queue gives ErrQueueFull at once; with it,
// enqueue waits for room until ctx ends.
func (w *Writer) Enqueue(ctx context.Context, j *Job, wait bool) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return ErrClosed
	}
	if wait {
		w.pending.Add(1)
		select {
		case w.queue <- j:
			return nil
		case <-ctx.Done():
			w.pending.Add(-1)
			return ctx.Err()
		}
	}
	w.pending.Add(1)
	select {
	case w.queue <- j:
		return nil
	default:
		w.pending.Add(-1)
		return ErrQueueFull
	}
}

// Waiting reports whether jobs are queued behind the running batch. Called
// from a job, it tells whether anyone waits for the writer right now: the
// writer takes them as its next batch once this one commits.
func (w *Writer) Waiting() bool { return len(w.queue) > 0 }

// Busy reports whether any job is queued or running. Called after a job
// was answered, it tells whether others wait for the writer or use it
// (those that arrived during its commit, say), which Waiting, once the
// writer has taken them, no longer sees.
func (w *Writer) Busy() bool { return w.pending.Load() > 0 }

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
	var carry *Job
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
		if first.outside != nil {
			err := w.runOutside(first.outside)
			w.pending.Add(-1)
			first.done <- err
			continue
		}
		if first.own {
			w.commitOwn(first)
			w.checkpointIfWanted()
			continue
		}
		batch := []*Job{first}
		weight := first.weight
	drain:
		for weight < maxBatchWeight {
			select {
			case j, ok := <-w.queue:
				if !ok {
					break drain
				}
				if j.outside != nil || j.own || weight+j.weight > maxBatchWeight {
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
		w.checkpointIfWanted()
	}
}

// checkpointIfWanted checkpoints between two batches when checkpointLoop
// asked for it.
func (w *Writer) checkpointIfWanted() {
	if w.checkpointWanted.Swap(false) {
		// Only the frames committed since the checkpoint loop's last
		// pass are left to copy, so this is short; afterwards the next
		// transaction restarts the WAL (see checkpointLoop).
		if _, err := w.db.Exec(`PRAGMA wal_checkpoint(PASSIVE)`); err != nil && w.log != nil {
			// The WAL then grows on until a later pass restarts it.
			w.log.Warn("WAL checkpoint between two commits failed", "err", err.Error())
		}
	}
}

// runOutside runs fn on the write connection, outside any transaction.
func (w *Writer) runOutside(fn func(*sql.Conn) error) error {
	c, err := w.db.Conn(context.Background())
	if err != nil {
		return err
	}
	defer c.Close() // back to the pool of one: the same connection next time
	return recovered(func() error { return fn(c) })
}

// begin starts the next transaction and numbers it.
func (w *Writer) begin() (*sql.Tx, uint64, error) {
	w.seq++
	sqlTx, err := w.db.BeginTx(context.Background(), nil)
	return sqlTx, w.seq, err
}

// commit runs batch in one transaction and answers every job after the
// commit. A batch of one group's jobs only (the usual one: intake) first
// runs as one merged unit straight in the transaction (commitAlone);
// anything else, or such a unit that failed (and was rolled back whole),
// runs with each plain job, and each run of consecutive jobs of one group,
// in a savepoint of its own.
func (w *Writer) commit(batch []*Job) {
	start := time.Now()
	one := oneGroup(batch)
	if one && w.commitAlone(batch, start) {
		return
	}
	errs := make([]error, len(batch))
	txs := make([]*Tx, len(batch))
	sqlTx, seq, err := w.begin()
	if err != nil {
		for i := range errs {
			errs[i] = fmt.Errorf("begin write transaction: %w", err)
		}
		w.answer(batch, errs, txs, start)
		return
	}
	if err := lockAll(sqlTx, seq, batch); err != nil {
		sqlTx.Rollback()
		for i := range errs {
			errs[i] = err
		}
		w.answer(batch, errs, txs, start)
		return
	}
	for i := 0; i < len(batch); {
		g := batch[i].group
		if g == nil {
			txs[i], errs[i] = runJob(sqlTx, seq, batch[i].fn)
			i++
			continue
		}
		k := i + 1
		for k < len(batch) && batch[k].group == g {
			k++
		}
		runMerged(sqlTx, seq, g, batch[i:k], errs[i:k], txs[i:k], !one)
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
	w.answer(batch, errs, txs, start)
}

// lockAll has each PreLocker group of batch lock its parts' rows, before
// any job of the transaction writes (see PreLocker).
func lockAll(sqlTx *sql.Tx, seq uint64, batch []*Job) error {
	parts := map[MergeGroup][]any{}
	var groups []MergeGroup
	for _, j := range batch {
		if _, ok := j.group.(PreLocker); !ok {
			continue
		}
		if _, ok := parts[j.group]; !ok {
			groups = append(groups, j.group)
		}
		parts[j.group] = append(parts[j.group], j.part)
	}
	tx := &Tx{Tx: sqlTx, Seq: seq}
	for _, g := range groups {
		if err := g.(PreLocker).LockAll(tx, parts[g]); err != nil {
			return fmt.Errorf("lock the batch's rows: %w", err)
		}
	}
	return nil
}

// commitOwn runs j alone in a transaction, without the savepoint every
// plain job of a batch gets: inside one, SQLite copies each page the job
// first changes into an in-memory journal, and at the end of each
// statement walks that journal from its start to truncate it, so a job of
// many statements and pages slows down as it goes (half of an erasure's
// rollup subtractions, docs/gdpr.md). A failing job is rolled back whole,
// which undoes only its own work.
func (w *Writer) commitOwn(j *Job) {
	start := time.Now()
	batch, errs, txs := []*Job{j}, []error{nil}, []*Tx{nil}
	sqlTx, seq, err := w.begin()
	if err != nil {
		errs[0] = fmt.Errorf("begin write transaction: %w", err)
		w.answer(batch, errs, txs, start)
		return
	}
	tx := &Tx{Tx: sqlTx, Seq: seq}
	if err := recovered(func() error { return j.fn(tx) }); err != nil {
		sqlTx.Rollback()
		errs[0] = err
	} else if err := sqlTx.Commit(); err != nil {
		errs[0] = fmt.Errorf("commit: %w", err)
	} else {
		txs[0] = tx
	}
	w.answer(batch, errs, txs, start)
}

// oneGroup reports whether every job of batch belongs to one merge group.
func oneGroup(batch []*Job) bool {
	g := batch[0].group
	if g == nil {
		return false
	}
	for _, j := range batch[1:] {
		if j.group != g {
			return false
		}
	}
	return true
}

// commitAlone runs batch, jobs of one group only, as one merged unit that
// is the whole transaction. Without a savepoint SQLite copies no page into
// the savepoint's in-memory journal, which was about a fifth of the
// writer's work in long batched runs. It reports false, having rolled the
// transaction back, if the unit failed: commit then runs the jobs one by
// one.
func (w *Writer) commitAlone(batch []*Job, start time.Time) bool {
	var sqlTx *sql.Tx
	var tx *Tx
	for attempt := 0; ; attempt++ {
		var seq uint64
		var err error
		sqlTx, seq, err = w.begin()
		if err != nil {
			return false // commit tries again and reports the error
		}
		tx = &Tx{Tx: sqlTx, Seq: seq}
		err = recovered(func() error { return batch[0].group.RunMerged(tx, parts(batch), true) })
		if err == nil {
			break
		}
		sqlTx.Rollback()
		// A lost deadlock or serialization conflict says nothing of the
		// jobs: the whole unit runs again before they run one by one.
		if attempt >= maxUnitRetries || w.d.Classify(err) != ClassRetry {
			return false
		}
		w.retries.Add(1)
	}
	errs := make([]error, len(batch))
	txs := make([]*Tx, len(batch))
	txs[0] = tx // the unit's hooks run once, with its first job's
	if err := sqlTx.Commit(); err != nil {
		err = fmt.Errorf("commit: %w", err)
		for i := range errs {
			errs[i] = err
		}
	}
	w.answer(batch, errs, txs, start)
	return true
}

// maxUnitRetries is how many times commitAlone runs a merged unit again
// after a deadlock or serialization failure.
const maxUnitRetries = 3

// parts returns the parts of jobs, which belong to one merge group.
func parts(jobs []*Job) []any {
	p := make([]any, len(jobs))
	for i, j := range jobs {
		p[i] = j.part
	}
	return p
}

// runMerged runs jobs, consecutive ones of group g, as one merged unit in
// a savepoint; when merged is false, or should the unit fail, each job runs
// alone in a savepoint, so one bad job cannot fail the others. A unit's
// transaction is recorded at its first job.
func runMerged(sqlTx *sql.Tx, seq uint64, g MergeGroup, jobs []*Job, errs []error, txs []*Tx, merged bool) {
	p := parts(jobs)
	if merged {
		tx, err := runJob(sqlTx, seq, func(tx *Tx) error { return g.RunMerged(tx, p, false) })
		if err == nil {
			txs[0] = tx
			return
		}
		if len(jobs) == 1 {
			errs[0] = err
			return
		}
	}
	for i := range jobs {
		txs[i], errs[i] = runJob(sqlTx, seq, func(tx *Tx) error { return g.RunMerged(tx, p[i:i+1], false) })
	}
}

// answer runs the commit hooks of the jobs that succeeded, in commit order,
// then answers every job. A job refused because the database cannot be
// written (disk full, read-only) gets an unavailable error with
// Retry-After, and the batch's outcome is recorded for the health check:
// a failure, or a success if a committed job surely wrote pages (a commit
// of jobs that changed nothing succeeds even on a full disk).
func (w *Writer) answer(batch []*Job, errs []error, txs []*Tx, start time.Time) {
	elapsed := time.Since(start)
	var failure *fault.Error
	var cause error
	wrote := false
	for i := range batch {
		if errs[i] == nil {
			if tx := txs[i]; tx != nil {
				for _, h := range tx.hooks {
					h()
				}
				wrote = wrote || tx.wrote
			}
			continue
		}
		if f := Unwritable(w.d, errs[i]); f != nil {
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
	for i, j := range batch {
		if j.Stats != nil {
			j.Stats(elapsed)
		}
		w.pending.Add(-1)
		j.done <- errs[i]
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

// runJob runs fn inside a savepoint of sqlTx, transaction number seq. It
// returns the Tx fn ran in, which holds its commit hooks, or the error
// that undid it.
func runJob(sqlTx *sql.Tx, seq uint64, fn func(*Tx) error) (*Tx, error) {
	if _, err := sqlTx.Exec(`SAVEPOINT job`); err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	tx := &Tx{Tx: sqlTx, Seq: seq}
	if err := recovered(func() error { return fn(tx) }); err != nil {
		if _, rerr := sqlTx.Exec(`ROLLBACK TO job`); rerr != nil {
			err = errors.Join(err, fmt.Errorf("rollback to savepoint: %w", rerr))
		}
		sqlTx.Exec(`RELEASE job`)
		return nil, err
	}
	if _, err := sqlTx.Exec(`RELEASE job`); err != nil {
		return nil, fmt.Errorf("release savepoint: %w", err)
	}
	return tx, nil
}

// Retries is how many merged write transactions ran again whole after
// losing a deadlock or a serialization conflict; always 0 on SQLite, where
// the writer is the only one.
func (w *Writer) Retries() int64 { return w.retries.Load() }

// RequestCheckpoint asks the writer to checkpoint the WAL between two
// batches (SQLite; see CheckpointLoop).
func (w *Writer) RequestCheckpoint() { w.checkpointWanted.Store(true) }

// Seq is the number of the latest transaction begun, for tests that
// count them; read it only while the writer is idle.
func (w *Writer) Seq() uint64 { return w.seq }

// Queued is how many jobs wait in the queue, not yet taken by the writer.
func (w *Writer) Queued() int { return len(w.queue) }

// CommitNow runs batch in one transaction on the calling goroutine, as the
// writer does with what it took from its queue: for tests, which call it
// only while the writer goroutine is idle.
func (w *Writer) CommitNow(batch []*Job) { w.commit(batch) }
