package storage

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// monthLayout is the format of a quota month ("YYYY-MM", UTC), which
// sorts by time.
const monthLayout = "2006-01"

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
	db.quota.roll(db.now().UTC().Format(monthLayout))
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
	q.roll(db.now().UTC().Format(monthLayout))
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
	q.roll(db.now().UTC().Format(monthLayout))
	return q.used[site]
}

// commit records accepted events; it runs as a writer commit hook.
func (q *quotaBook) commit(received time.Time, accepted map[string]int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	month := received.UTC().Format(monthLayout)
	q.roll(month)
	if month != q.month {
		return // last month's events; the book already counts this month
	}
	for site, n := range accepted {
		q.used[site] += n
	}
}
