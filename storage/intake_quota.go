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

// quotaShare is where an instance's share of the quota comes from: on
// SQLite, the one instance, the whole quota (the book alone: bookShare);
// on PostgreSQL, leases the instances take from the database
// (intake_quota_pg.go).
type quotaShare interface {
	// reserve is ReserveQuota.
	reserve(ctx context.Context, site string, n, limit int) (bool, error)
	// spend records, in tx, the events of works accepted, and registers
	// the commit hook that counts them in the book.
	spend(tx *writeTx, works []*ingestWork) error
	// accepted is MonthlyAccepted.
	accepted(site string) int
	// close gives back what the instance holds; the writer has stopped.
	close()
}

// share is the DB's quotaShare: bookShare unless Open set another.
func (db *DB) share() quotaShare {
	if db.pg.qs == nil {
		return bookShare{db}
	}
	return db.pg.qs
}

// ReserveQuota reserves n events of site's monthly quota limit. It reports
// false, reserving nothing, when the site's accepted plus reserved events
// would exceed limit; an error (PostgreSQL only: the database did not
// answer) reserves nothing either. Every successful reservation must be
// followed by ReleaseQuota(site, n) once the events are committed or
// refused.
func (db *DB) ReserveQuota(ctx context.Context, site string, n, limit int) (bool, error) {
	return db.share().reserve(ctx, site, n, limit)
}

// bookShare is SQLite's quotaShare: the book counts every accepted event,
// since this instance is the only one.
type bookShare struct{ db *DB }

func (b bookShare) reserve(_ context.Context, site string, n, limit int) (bool, error) {
	db := b.db
	q := &db.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	q.roll(db.now().UTC().Format(monthLayout))
	if q.used[site]+q.reserved[site]+n > limit {
		return false, nil
	}
	q.reserved[site] += n
	return true, nil
}

func (b bookShare) spend(tx *writeTx, works []*ingestWork) error {
	b.db.quota.spent(tx, works)
	return nil
}

func (b bookShare) accepted(site string) int { return b.db.quota.accepted(b.db.now(), site) }

func (bookShare) close() {}

// spent registers the commit hooks that count the works' accepted events.
func (q *quotaBook) spent(tx *writeTx, works []*ingestWork) {
	for _, w := range works {
		received, usage := w.received, w.usage
		tx.OnCommit(func() { q.commit(received, usage) })
	}
}

// ReleaseQuota ends a reservation made by ReserveQuota.
func (db *DB) ReleaseQuota(site string, n int) {
	q := &db.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	q.reserved[site] = max(q.reserved[site]-n, 0)
}

// MonthlyAccepted is site's accepted event count in the current UTC month.
func (db *DB) MonthlyAccepted(site string) int { return db.share().accepted(site) }

// accepted is the book's count of site's events in now's month.
func (q *quotaBook) accepted(now time.Time, site string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.roll(now.UTC().Format(monthLayout))
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
