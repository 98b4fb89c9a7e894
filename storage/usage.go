package storage

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"sync"
	"time"
)

// quotaBook counts accepted events per site in the current UTC month: what
// is committed (loaded from site_usage at start, then kept by the writer's
// commit hooks) plus what requests in flight have reserved.
type quotaBook struct {
	mu       sync.Mutex
	month    string
	used     map[string]int
	reserved map[string]int
}

// roll moves the book to month if that is later than its own ("YYYY-MM"
// sorts by time). It never moves back: a commit of events received just
// before midnight may land after a request of the new month rolled the
// book, and must not wipe the new month's counts.
func (q *quotaBook) roll(month string) {
	if month > q.month {
		q.month, q.used, q.reserved = month, map[string]int{}, map[string]int{}
	}
}

func (db *DB) loadQuota(ctx context.Context) error {
	db.quota.roll(db.now().UTC().Format("2006-01"))
	rows, err := db.read.QueryContext(ctx, `SELECT site_id, accepted FROM site_usage WHERE month = ?`, db.quota.month)
	if err != nil {
		return fmt.Errorf("load usage: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var site string
		var n int
		if err := rows.Scan(&site, &n); err != nil {
			return err
		}
		db.quota.used[site] = n
	}
	return rows.Err()
}

// ReserveQuota reserves n events of site's monthly quota limit. It reports
// false, reserving nothing, when the site's accepted plus reserved events
// would exceed limit. Every successful reservation must be followed by
// ReleaseQuota(site, n) once the events are committed or refused.
func (db *DB) ReserveQuota(site string, n, limit int) bool {
	q := &db.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	q.roll(db.now().UTC().Format("2006-01"))
	if q.used[site]+q.reserved[site]+n > limit {
		return false
	}
	q.reserved[site] += n
	return true
}

// ReleaseQuota ends a reservation made by ReserveQuota.
func (db *DB) ReleaseQuota(site string, n int) {
	q := &db.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	q.reserved[site] = max(q.reserved[site]-n, 0)
}

// MonthlyAccepted is site's accepted event count in the current UTC month.
func (db *DB) MonthlyAccepted(site string) int {
	q := &db.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	q.roll(db.now().UTC().Format("2006-01"))
	return q.used[site]
}

// commit records accepted events; it runs as a writer commit hook.
func (q *quotaBook) commit(received time.Time, accepted map[string]int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	month := received.UTC().Format("2006-01")
	q.roll(month)
	if month != q.month {
		return // last month's events; the book already counts this month
	}
	for site, n := range accepted {
		q.used[site] += n
	}
}

// saltCache holds the cookieless salts of recent days.
type saltCache struct {
	mu    sync.Mutex
	salts map[string][]byte
}

// DailySalt returns the secret salt of day's UTC date, creating it on first
// use. Salts older than yesterday are deleted by the dedup pruning, after
// which cookieless ids of those days cannot be recomputed.
func (db *DB) DailySalt(ctx context.Context, day time.Time) ([]byte, error) {
	key := day.UTC().Format("2006-01-02")
	db.salts.mu.Lock()
	s, ok := db.salts.salts[key]
	db.salts.mu.Unlock()
	if ok {
		return s, nil
	}
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	var salt []byte
	err := db.writer.Do(ctx, func(tx *Tx) error {
		if _, err := tx.Exec(`INSERT INTO daily_salts(day, salt) VALUES (?, ?) ON CONFLICT DO NOTHING`, key, fresh); err != nil {
			return err
		}
		return tx.QueryRow(`SELECT salt FROM daily_salts WHERE day = ?`, key).Scan(&salt)
	})
	if err != nil {
		return nil, fmt.Errorf("daily salt: %w", err)
	}
	db.salts.mu.Lock()
	if db.salts.salts == nil || len(db.salts.salts) > 4 {
		db.salts.salts = map[string][]byte{}
	}
	db.salts.salts[key] = salt
	db.salts.mu.Unlock()
	return salt, nil
}

// pruneEvery is how often the writer forgets expired dedup ids and salts:
// often, so that each run has little to delete.
const pruneEvery = time.Minute

// pruneChunk is how many expired dedup ids one writer job deletes. An id
// sits at a random place in the dedup table, so deleting one costs about
// 20 µs (a random page rewritten); a chunk of 250 holds the writer, and the
// intake jobs committed with it, for about 5 ms. In one transaction, the
// ids that a steady 2,000 events/s leaves every ten minutes would hold it
// for about 25 s. Intake jobs run between the chunks.
const pruneChunk = 250

// Prune deletes dedup ids older than DedupWindow, salts older than
// yesterday and sourcemap parts a crash left behind (see
// pruneSourcemapParts). The collector calls it periodically; it is cheap
// when there is little to delete.
func (db *DB) Prune(ctx context.Context) error {
	now := db.now().UTC()
	cutoff := now.Add(-DedupWindow).UnixMilli()
	for {
		var deleted int64
		err := db.writer.Do(ctx, func(tx *Tx) error {
			res, err := tx.Exec(`DELETE FROM event_ids WHERE (site_id, id) IN
				(SELECT site_id, id FROM event_ids WHERE received_ms < ? ORDER BY received_ms LIMIT ?)`, cutoff, pruneChunk)
			if err != nil {
				return err
			}
			deleted, err = res.RowsAffected()
			return err
		})
		if err != nil {
			return err
		}
		if deleted < pruneChunk {
			break
		}
	}
	if err := db.writer.Do(ctx, func(tx *Tx) error {
		_, err := tx.Exec(`DELETE FROM daily_salts WHERE day < ?`, now.Add(-24*time.Hour).Format("2006-01-02"))
		return err
	}); err != nil {
		return err
	}
	return db.pruneSourcemapParts(ctx)
}

// PruneLoop runs Prune every pruneEvery until ctx ends.
func (db *DB) PruneLoop(ctx context.Context, onError func(error)) {
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := db.Prune(ctx); err != nil && ctx.Err() == nil {
				onError(err)
			}
		}
	}
}

// DLQSize counts the rows of the dead-letter queue.
func (db *DB) DLQSize(ctx context.Context) (int, error) {
	var n int
	err := db.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM dlq`).Scan(&n)
	if err == sql.ErrNoRows {
		return 0, nil
	}
	return n, err
}

// resetTables are emptied by ResetData.
var resetTables = []string{"events", "sessions", "dlq", "identity_links", "user_profiles",
	"event_ids", "daily_events", "daily_sessions", "site_usage", "daily_dimensions"}

// ResetData empties every table of collected data in one transaction and
// forgets the quota counts; tenants, keys and the audit log stay. It is for
// dev mode and tests.
func (db *DB) ResetData(ctx context.Context) (map[string]int64, error) {
	deleted := map[string]int64{}
	err := db.writer.Do(ctx, func(tx *Tx) error {
		for _, table := range resetTables {
			res, err := tx.Exec(`DELETE FROM ` + table)
			if err != nil {
				return fmt.Errorf("reset %s: %w", table, err)
			}
			deleted[table], _ = res.RowsAffected()
		}
		tx.OnCommit(func() {
			db.quota.mu.Lock()
			db.quota.used, db.quota.reserved = map[string]int{}, map[string]int{}
			db.quota.mu.Unlock()
		})
		return nil
	})
	return deleted, err
}
