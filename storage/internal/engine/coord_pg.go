package engine

import (
	"context"
	"database/sql"
	"hash/fnv"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Coordination of several instances on one PostgreSQL database: a
// listener connection per instance (LISTEN/NOTIFY) and advisory locks.
// SQLite has one writer and needs none of it; its owner makes each step a
// no-op there.

// Execer is what runs a statement: a transaction or a connection pool.
type Execer interface {
	Exec(query string, args ...any) (sql.Result, error)
}

// LockKey is the advisory lock key of name.
func LockKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int64(h.Sum64())
}

// XactLock takes the transaction-scoped advisory lock of name in tx: held
// until tx ends.
func XactLock(tx Execer, name string) error {
	_, err := tx.Exec(`SELECT pg_advisory_xact_lock(?)`, LockKey(name))
	return err
}

// Notify announces payload on channel to every listener, once tx commits.
func Notify(tx Execer, channel, payload string) error {
	_, err := tx.Exec(`SELECT pg_notify('`+channel+`', ?)`, payload)
	return err
}

// Leader runs f only where this instance takes name's session advisory
// lock, on a connection of pool held for the run; an instance that finds
// it taken skips f and reports false.
func Leader(ctx context.Context, pool *sql.DB, name string, f func() error) (bool, error) {
	conn, err := pool.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	key := LockKey(name)
	var got bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock(?)`, key).Scan(&got); err != nil || !got {
		return false, err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(?)`, key)
	return true, f()
}

// Exclusively holds name's session advisory lock on a connection of pool
// of its own for f's run, waiting for it.
func Exclusively(ctx context.Context, pool *sql.DB, name string, f func() error) error {
	conn, err := pool.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	key := LockKey(name)
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(?)`, key); err != nil {
		return err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(?)`, key)
	return f()
}

// Listener keeps one connection LISTENing on a channel, reconnecting with
// backoff. Each (re)connection runs reload, since changes made while it
// was away were announced to nobody, and so does each notification.
type Listener struct {
	url, channel string
	reload       func(context.Context) error
	log          *slog.Logger // nil: no log
	lost         string       // the log line of a lost connection
	// up is whether the listener is connected and has reloaded since;
	// downSince (unix ns) when it last stopped being so.
	up        atomic.Bool
	downSince atomic.Int64
	// pid is the listener's backend (tests end it to check the fallback).
	pid    atomic.Uint32
	cancel context.CancelFunc
	done   chan struct{}
}

// NewListener returns the listener of channel on the database at url, not
// yet started. lost is the line logged, with the error, when its
// connection is lost.
func NewListener(url, channel string, log *slog.Logger, lost string, reload func(context.Context) error) *Listener {
	l := &Listener{url: url, channel: channel, reload: reload, log: log, lost: lost, done: make(chan struct{})}
	l.downSince.Store(time.Now().UnixNano())
	return l
}

// Start starts l's connection; Close stops it.
func (l *Listener) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go l.listen(ctx)
}

// listen runs sessions until ctx ends.
func (l *Listener) listen(ctx context.Context) {
	defer close(l.done)
	backoff := 10 * time.Millisecond
	for ctx.Err() == nil {
		err := l.session(ctx, func() { backoff = 10 * time.Millisecond })
		if l.up.Swap(false) {
			l.downSince.Store(time.Now().UnixNano())
		}
		if ctx.Err() != nil {
			return
		}
		if l.log != nil {
			l.log.Warn(l.lost, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// session runs one listener connection until it fails or ctx ends.
func (l *Listener) session(ctx context.Context, connected func()) error {
	conn, err := pgx.Connect(ctx, l.url)
	if err != nil {
		return RedactConnect(err) // logged by listen
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `LISTEN `+l.channel); err != nil {
		return err
	}
	l.pid.Store(conn.PgConn().PID())
	if err := l.reload(ctx); err != nil {
		return err
	}
	l.up.Store(true)
	connected()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		if err := l.reload(ctx); err != nil {
			return err
		}
	}
}

// Listening reports whether the listener is connected, or was within
// grace: changes announced meanwhile are seen at most grace late.
func (l *Listener) Listening(grace time.Duration) bool {
	return l.up.Load() || time.Since(time.Unix(0, l.downSince.Load())) < grace
}

// Up reports whether the listener is connected and has reloaded since.
func (l *Listener) Up() bool { return l.up.Load() }

// PID is the listener connection's backend process id (0 before the
// first).
func (l *Listener) PID() uint32 { return l.pid.Load() }

// Close stops the listener and waits for it.
func (l *Listener) Close() {
	l.cancel()
	<-l.done
}
