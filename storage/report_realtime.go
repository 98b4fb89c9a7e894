package storage

import (
	"context"
	"database/sql"
	"time"
)

// RealtimeMaxRows bounds the rows a realtime count reads
// (docs/query-api.md#realtime): the service's newest events, whatever their
// site. It is five minutes of one site at the default rate limit, 1,000 events
// a second.
const RealtimeMaxRows = 300_000

// realtimeWindow is how far back the realtime report looks
// (docs/query-api.md#realtime).
const realtimeWindow = 5 * time.Minute

// Realtime is the realtime report of site at now: the distinct visitors
// with an event received in the last five minutes, counted over the
// newest RealtimeMaxRows rows at most.
func (db *DB) Realtime(ctx context.Context, site string, now time.Time) (int, error) {
	return db.RealtimeVisitors(ctx, site, now.Add(-realtimeWindow), RealtimeMaxRows)
}

// RealtimeVisitors counts the distinct anon ids of site's events received
// at or after since. Events have no index by time, but events is in
// arrival order by seq, so it reads the newest rows backwards, of every
// site, and stops at the first one received before since, or after
// maxRows rows: the count then covers the newest maxRows rows only.
func (db *DB) RealtimeVisitors(ctx context.Context, site string, since time.Time, maxRows int) (int, error) {
	tx, err := db.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var last int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events`).Scan(&last); err != nil {
		return 0, err
	}
	// The cut: the newest row received before since, or the bound. Both
	// statements walk seq inside SQLite, which is several times faster
	// than handing each row to Go.
	cut := max(last-int64(maxRows), 0)
	var older int64
	before, arg := db.d.receivedBefore(since)
	err = tx.QueryRowContext(ctx, `SELECT seq FROM events WHERE seq > ? AND `+before+` ORDER BY seq DESC LIMIT 1`,
		cut, arg).Scan(&older)
	switch {
	case err == nil:
		cut = older
	case err != sql.ErrNoRows:
		return 0, err
	}
	var n int
	// +site_id: the rows after the cut, not the site's index.
	err = tx.QueryRowContext(ctx, `SELECT COUNT(DISTINCT anon_id) FROM events WHERE seq > ? AND `+db.d.NoIndex("site_id")+` = ?`, cut, site).Scan(&n)
	return n, err
}
