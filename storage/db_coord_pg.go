package storage

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"log/slog"
	"time"

	"github.com/tally-analytics/tally/storage/internal/engine"
)

// notifyChannel is the channel of every instance's LISTEN.
const notifyChannel = "tally"

// pgCoord is PostgreSQL's coord (docs/postgresql.md#on-postgresql): the
// engine's listener connection per instance, which reloads the tenancy
// maps whenever another instance commits a change of them, and advisory
// locks.
type pgCoord struct {
	db *DB
	l  *engine.Listener
}

// startPGCoord sets db's coord and starts its listener on the database at
// url. db.pg.co is set before the listener starts: the listener's reloads
// run on the writer, which reads db.pg.co.
func startPGCoord(db *DB, url string, log *slog.Logger) {
	c := &pgCoord{db: db, l: engine.NewListener(url, notifyChannel, log,
		"PostgreSQL listener lost; API keys are checked in the database until it is back", db.reloadTenants)}
	db.pg.co = c
	c.l.Start()
}

func (c *pgCoord) notify(tx *writeTx, kind, id string) error {
	return engine.Notify(tx, notifyChannel, kind+":"+id)
}

func (c *pgCoord) listening() bool { return c.l.Listening(listenerGrace) }

// leader takes the job's session advisory lock on a connection held for
// the run; an instance that finds it taken skips this round.
func (c *pgCoord) leader(ctx context.Context, job string, f func() error) (bool, error) {
	return engine.Leader(ctx, c.db.read, "job:"+job, f)
}

func (c *pgCoord) lockWorkspace(tx *writeTx, workspaceID string) error {
	return engine.XactLock(tx, "audit:"+workspaceID)
}

func (c *pgCoord) lockNames(tx *writeTx) error { return engine.XactLock(tx, "names") }

func (c *pgCoord) close() { c.l.Close() }

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
	return engine.Exclusively(ctx, c.db.read, name, f)
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
