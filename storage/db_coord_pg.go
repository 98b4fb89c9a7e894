package storage

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"hash/fnv"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// notifyChannel is the channel of every instance's LISTEN.
const notifyChannel = "tally"

// pgCoord is PostgreSQL's coord (docs/postgresql.md#on-postgresql): a
// listener connection per instance that reloads the tenancy maps whenever
// another instance commits a change of them, and advisory locks.
type pgCoord struct {
	db  *DB
	url string
	log *slog.Logger
	// up is whether the listener is connected and has reloaded since;
	// downSince (unix ns) when it last stopped being so.
	up        atomic.Bool
	downSince atomic.Int64
	// pid is the listener's backend (tests end it to check the fallback).
	pid    atomic.Uint32
	cancel context.CancelFunc
	done   chan struct{}
}

// startPGCoord sets db's coord and starts its listener on the database at
// url. db.co is set before the listener starts: the listener's reloads
// run on the writer, which reads db.co.
func startPGCoord(db *DB, url string, log *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	c := &pgCoord{db: db, url: url, log: log, cancel: cancel, done: make(chan struct{})}
	c.downSince.Store(time.Now().UnixNano())
	db.co = c
	go c.listen(ctx)
}

// listen keeps one connection LISTENing, reconnecting with backoff. Each
// (re)connection reloads every map, since changes made while it was away
// were announced to nobody; each notification reloads them too (the
// tables are small: one reload reads what a full Open reads).
func (c *pgCoord) listen(ctx context.Context) {
	defer close(c.done)
	backoff := 10 * time.Millisecond
	for ctx.Err() == nil {
		err := c.session(ctx, func() { backoff = 10 * time.Millisecond })
		if c.up.Swap(false) {
			c.downSince.Store(time.Now().UnixNano())
		}
		if ctx.Err() != nil {
			return
		}
		if c.log != nil {
			c.log.Warn("PostgreSQL listener lost; API keys are checked in the database until it is back", "err", err)
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
func (c *pgCoord) session(ctx context.Context, connected func()) error {
	conn, err := pgx.Connect(ctx, c.url)
	if err != nil {
		return redactConnect(err) // logged by listen
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `LISTEN `+notifyChannel); err != nil {
		return err
	}
	c.pid.Store(conn.PgConn().PID())
	if err := c.db.reloadTenants(ctx); err != nil {
		return err
	}
	c.up.Store(true)
	connected()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		if err := c.db.reloadTenants(ctx); err != nil {
			return err
		}
	}
}

func (c *pgCoord) notify(tx *writeTx, kind, id string) error {
	_, err := tx.Exec(`SELECT pg_notify('`+notifyChannel+`', ?)`, kind+":"+id)
	return err
}

func (c *pgCoord) listening() bool {
	return c.up.Load() || time.Since(time.Unix(0, c.downSince.Load())) < listenerGrace
}

// leader takes the job's session advisory lock on a connection held for
// the run; an instance that finds it taken skips this round.
func (c *pgCoord) leader(ctx context.Context, job string, f func() error) (bool, error) {
	conn, err := c.db.read.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	key := lockKey("job:" + job)
	var got bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock(?)`, key).Scan(&got); err != nil || !got {
		return false, err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(?)`, key)
	return true, f()
}

func (c *pgCoord) lockWorkspace(tx *writeTx, workspaceID string) error {
	_, err := tx.Exec(`SELECT pg_advisory_xact_lock(?)`, lockKey("audit:"+workspaceID))
	return err
}

func (c *pgCoord) lockNames(tx *writeTx) error {
	_, err := tx.Exec(`SELECT pg_advisory_xact_lock(?)`, lockKey("names"))
	return err
}

func (c *pgCoord) close() {
	c.cancel()
	<-c.done
}

// lockKey is the advisory lock key of name.
func lockKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int64(h.Sum64())
}

// authenticateInDB is Authenticate while the listener is down: the key
// read from the database, so that a revocation made on another instance
// meanwhile is not missed. Any error refuses the key.
func (db *DB) authenticateInDB(sum []byte) (*APIKey, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := db.read.QueryContext(ctx, keyColumns+` WHERE key_hash = ? AND revoked_at IS NULL`, hex.EncodeToString(sum))
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, false, rows.Err()
	}
	k, hash, err := scanKey(rows)
	if err != nil {
		return nil, false, err
	}
	k.hash, _ = hex.DecodeString(hash)
	return k, true, nil
}

func (c *pgCoord) hideSite(tx *writeTx, id string) error {
	// Exclusive: writes that hold the site (holdSite) commit first.
	if _, err := tx.Exec(`SELECT pg_advisory_xact_lock(?)`, siteLock(id)); err != nil {
		return err
	}
	if _, err := tx.Exec(`UPDATE sites SET deleting_since = ? WHERE id = ? AND deleting_since IS NULL`,
		FormatTime(c.db.now()), id); err != nil {
		return err
	}
	return c.notify(tx, "site", id)
}

func (c *pgCoord) sitesShown() string { return ` WHERE deleting_since IS NULL` }

func (c *pgCoord) hiddenSite(ctx context.Context, wsID, id string) (*Site, error) {
	rows, err := c.db.read.QueryContext(ctx, siteColumns+` WHERE id = ? AND workspace_id = ? AND deleting_since IS NOT NULL`, id, wsID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, rows.Err()
	}
	s := &Site{}
	return s, s.scan(rows)
}

// exclusively holds a session advisory lock on a connection of its own
// for f's run.
func (c *pgCoord) exclusively(ctx context.Context, name string, f func() error) error {
	conn, err := c.db.read.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	key := lockKey(name)
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(?)`, key); err != nil {
		return err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(?)`, key)
	return f()
}

// claimReplay sets the entry's replay_until, in one statement, only where
// no unexpired claim is: of two instances at once, one updates the row and
// the other finds it claimed.
func (c *pgCoord) claimReplay(ctx context.Context, site, id, receivedAt string, now time.Time) (claimed bool, until string, err error) {
	until = FormatTime(now.Add(replayClaim))
	err = c.db.writer.do(ctx, func(tx *writeTx) error {
		claimed = false
		var got string
		err := tx.QueryRow(`UPDATE dlq SET replay_until = ? WHERE site_id = ? AND id = ? AND received_at = ?
			AND (replay_until IS NULL OR replay_until < ?) RETURNING id`,
			until, site, id, receivedAt, FormatTime(now)).Scan(&got)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		claimed = err == nil
		return err
	})
	return claimed, until, err
}

// releaseReplay clears the claim it made, and no later one (the row may
// have been quarantined again meanwhile, and claimed again after expiry).
func (c *pgCoord) releaseReplay(ctx context.Context, site, id, until string) error {
	return c.db.writer.do(ctx, func(tx *writeTx) error {
		_, err := tx.Exec(`UPDATE dlq SET replay_until = NULL WHERE site_id = ? AND id = ? AND replay_until = ?`, site, id, until)
		return err
	})
}
