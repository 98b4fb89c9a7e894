package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// purgeChunk is how many rows one writer job of a purge deletes, as many
// as a job of a site deletion (siteDeleteChunk) and for the same reason:
// each row also leaves a secondary index, so 250 of them hold the writer,
// and the intake committed with them, for a few milliseconds.
const purgeChunk = 250

// purgeScan is how many rows of events or sessions one read of a purge
// looks at. The events table has no index by time (docs/storage.md), so
// the purge walks it in rowid order on a read connection, which never
// holds up the writer, and hands the writer only the rows to delete.
const purgeScan = 5000

// PurgeCuts says, for each site whose raw rows a purge removes, the first
// UTC day (YYYY-MM-DD) it keeps.
type PurgeCuts map[string]string

// PurgeResult is what one purge did.
type PurgeResult struct {
	// Day is the UTC day (YYYY-MM-DD) the purge ran for.
	Day string
	// Cuts are the sites purged and the first day each keeps.
	Cuts PurgeCuts
	// Deleted counts the rows removed from each table.
	Deleted map[string]int64
}

// RetentionCuts returns the cut of every site whose retention is not
// "keep everything": its own retention_days, or defaultDays when it has
// none. A site keeps the raw rows of today and the days-1 days before it.
func (db *DB) RetentionCuts(defaultDays int) PurgeCuts {
	today := db.now().UTC().Truncate(24 * time.Hour)
	cuts := PurgeCuts{}
	db.tenants.mu.RLock()
	defer db.tenants.mu.RUnlock()
	for id, s := range db.sites {
		days := defaultDays
		if s.RetentionDays != nil {
			days = *s.RetentionDays
		}
		if days > 0 {
			cuts[id] = today.AddDate(0, 0, -(days - 1)).Format(dayLayout)
		}
	}
	return cuts
}

// PurgeDue reports whether today's purge has not run to its end yet: a
// server started after a missed day (or a crash midway) runs one at once.
func (db *DB) PurgeDue(ctx context.Context) (bool, error) {
	var last sql.NullString
	err := db.read.QueryRowContext(ctx, `SELECT MAX(day) FROM retention_runs`).Scan(&last)
	if err != nil {
		return false, err
	}
	return !last.Valid || last.String < db.now().UTC().Format(dayLayout), nil
}

// Purge deletes the raw rows older than each site's retention (see
// RetentionCuts): events by their ts, sessions that ended before the cut,
// dedup ids, and DLQ rows by when they arrived. The per-day rollups stay,
// and so do identity links and profiles (docs/storage.md#retention). Each
// writer job deletes at most purgeChunk rows, so intake runs between them.
// First each site's purged_before moves to its cut, so a reader is told about
// the days that may be going; last the day is recorded as done. A purge
// stopped midway (ctx, a crash) leaves the day not done, and the next one
// finishes the work.
func (db *DB) Purge(ctx context.Context, defaultDays int) (PurgeResult, error) {
	res := PurgeResult{Day: db.now().UTC().Format(dayLayout), Cuts: db.RetentionCuts(defaultDays), Deleted: map[string]int64{}}
	if len(res.Cuts) > 0 {
		if err := db.markPurged(ctx, res.Cuts); err != nil {
			return res, err
		}
		cutTS := map[string]string{}
		for site, day := range res.Cuts {
			cutTS[site] = day + "T00:00:00.000Z"
		}
		for _, t := range []struct{ table, time string }{{"events", "ts"}, {"sessions", "ended_at"}} {
			n, err := db.purgeScanned(ctx, t.table, t.time, cutTS)
			res.Deleted[t.table] += n
			if err != nil {
				return res, err
			}
		}
		h := db.d.RowHandle()
		for site, ts := range cutTS {
			cutMS, _ := time.Parse(timeLayout, ts)
			for _, q := range []struct{ table, sql string }{
				{"event_ids", `DELETE FROM event_ids WHERE (site_id, id) IN
					(SELECT site_id, id FROM event_ids WHERE site_id = ?1 AND received_ms < ?2 LIMIT ?3)`},
				{"dlq", `DELETE FROM dlq WHERE ` + h + ` IN
					(SELECT ` + h + ` FROM dlq WHERE site_id = ?1 AND received_at < ?2 LIMIT ?3)`},
			} {
				cut := any(ts)
				if q.table == "event_ids" {
					cut = cutMS.UnixMilli()
				}
				for {
					var n int64
					var took time.Duration
					err := db.writer.do(ctx, func(tx *writeTx) error {
						start := time.Now()
						defer func() { took = time.Since(start) }()
						r, err := tx.Exec(q.sql, site, cut, purgeChunk)
						if err != nil {
							return fmt.Errorf("purge %s: %w", q.table, err)
						}
						n, err = r.RowsAffected()
						return err
					})
					if err != nil {
						return res, err
					}
					res.Deleted[q.table] += n
					db.notePurgeJob(q.table, n, took)
					if n < purgeChunk {
						break
					}
				}
			}
		}
	}
	err := db.writer.do(ctx, func(tx *writeTx) error {
		if _, err := tx.Exec(`DELETE FROM retention_runs`); err != nil {
			return err
		}
		_, err := tx.Exec(`INSERT INTO retention_runs(day) VALUES (?)`, res.Day)
		return err
	})
	return res, err
}

// notePurgeJob tells a test's hook what a purge job deleted, and how long
// its work inside the writer took.
func (db *DB) notePurgeJob(table string, rows int64, took time.Duration) {
	if db.hooks.purgeJob != nil {
		db.hooks.purgeJob(table, rows, took)
	}
}

// markPurged moves each site's purged_before forward to its cut (never
// back: a raised retention does not bring purged rows back).
func (db *DB) markPurged(ctx context.Context, cuts PurgeCuts) error {
	return db.writer.do(ctx, func(tx *writeTx) error {
		var changed []*Site
		for id, cut := range cuts {
			s, ok := db.Site(id)
			if !ok || s.PurgedBefore >= cut {
				continue
			}
			if _, err := tx.Exec(`UPDATE sites SET purged_before = ? WHERE id = ?`, cut, id); err != nil {
				return err
			}
			// The partials of the purged days, and of the day the cut falls
			// in (a local day starts up to a day before the UTC one).
			if t, err := time.Parse(dayLayout, cut); err == nil {
				if _, err := tx.Exec(`DELETE FROM day_partials WHERE site_id = ? AND day_start < ?`, id, t.UnixMilli()+dayMS); err != nil {
					return err
				}
			} else if _, err := tx.Exec(`DELETE FROM day_partials WHERE site_id = ?`, id); err != nil {
				return err
			}
			tx.partialsChanged(id)
			updated := *s
			updated.PurgedBefore = cut
			changed = append(changed, &updated)
		}
		tx.OnCommit(func() {
			for _, s := range changed {
				db.replaceSite(s)
			}
		})
		return nil
	})
}

// purgeScanned deletes the rows of table (events or sessions) whose column
// col is before their site's cut. It reads purgeScan rows at a time in
// rowid order from a read connection, and deletes those due by rowid in
// writer jobs of purgeChunk.
func (db *DB) purgeScanned(ctx context.Context, table, col string, cuts map[string]string) (int64, error) {
	key := map[string]string{"events": "seq", "sessions": "id"}[table]
	var deleted int64
	var after int64
	for {
		due, last, scanned, err := db.purgeCandidates(ctx, table, key, col, after, cuts)
		if err != nil {
			return deleted, err
		}
		for len(due) > 0 {
			n := min(len(due), purgeChunk)
			chunk := due[:n]
			due = due[n:]
			var rows int64
			var took time.Duration
			err := db.writer.do(ctx, func(tx *writeTx) error {
				start := time.Now()
				defer func() { took = time.Since(start) }()
				args := make([]any, len(chunk))
				for i, k := range chunk {
					args[i] = k
				}
				r, err := tx.Exec(`DELETE FROM `+table+` WHERE `+key+` IN (?`+strings.Repeat(", ?", len(chunk)-1)+`)`, args...)
				if err != nil {
					return fmt.Errorf("purge %s: %w", table, err)
				}
				if rows, err = r.RowsAffected(); err != nil {
					return err
				}
				if table == "sessions" && rows > 0 {
					// The memo may hold a session just deleted.
					tx.OnCommit(db.intake.forget)
				}
				return nil
			})
			if err != nil {
				return deleted, err
			}
			deleted += rows
			db.notePurgeJob(table, rows, took)
		}
		if scanned < purgeScan {
			return deleted, nil
		}
		after = last
	}
}

// purgeCandidates reads up to purgeScan rows of table after rowid after and
// returns the keys of those due, the last key read and how many were read.
func (db *DB) purgeCandidates(ctx context.Context, table, key, col string, after int64, cuts map[string]string) (due []int64, last int64, scanned int, err error) {
	rows, err := db.read.QueryContext(ctx, `SELECT `+key+`, site_id, `+col+` FROM `+table+
		` WHERE `+key+` > ? ORDER BY `+key+` LIMIT ?`, after, purgeScan)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("purge %s: %w", table, err)
	}
	defer rows.Close()
	var site, ts string
	for rows.Next() {
		if err := rows.Scan(&last, &site, &ts); err != nil {
			return nil, 0, 0, err
		}
		scanned++
		if cut, ok := cuts[site]; ok && ts < cut {
			due = append(due, last)
		}
	}
	if err := rows.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return nil, 0, 0, err
	}
	return due, last, scanned, ctx.Err()
}
