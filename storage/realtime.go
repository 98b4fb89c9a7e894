package storage

import (
	"context"
	"database/sql"
	"time"
)

// RealtimeMaxRows bounds the rows a realtime count reads (README
// "Realtime"): the service's newest events, whatever their site.
const RealtimeMaxRows = 500_000

// RealtimeVisitors counts the distinct anon ids of site's events received
// at or after since. Events have no index by time, but events is in
// arrival order by seq, so it reads the newest rows backwards, of every
// site, and stops at the first one received before since, or after
// maxRows rows: the count then covers the newest maxRows rows only.
func (db *DB) RealtimeVisitors(ctx context.Context, site string, since time.Time, maxRows int) (int, error) {
	cut := FormatTime(since)
	// Only the site's rows carry their anon id: the others are read for
	// their received_at alone.
	rows, err := db.read.QueryContext(ctx, `SELECT CASE WHEN site_id = ? THEN anon_id END, received_at
		FROM events ORDER BY seq DESC LIMIT ?`, site, maxRows)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	seen := map[string]struct{}{}
	for rows.Next() {
		var anon sql.NullString
		var received string
		if err := rows.Scan(&anon, &received); err != nil {
			return 0, err
		}
		if received < cut {
			break
		}
		if anon.Valid {
			seen[anon.String] = struct{}{}
		}
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	return len(seen), nil
}
