package storage

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/tally-analytics/tally/fault"

	"github.com/tally-analytics/tally/storage/internal/engine"
)

// maxLeaseBlock bounds one lease
// (docs/postgresql.md#several-instances-on-one-database, quota): an instance
// that stops uncleanly keeps at most this many events of a site's quota from
// the others until its lease is reclaimed.
const maxLeaseBlock = 1000

// leaseReclaimEvery is how often one instance (Leader) reclaims the
// leases of instances that are gone.
const leaseReclaimEvery = 30 * time.Second

// errLeaseLost refuses a commit that would spend a lease the database no
// longer holds for this instance: one reclaimed while this instance's slot
// connection was lost. Nothing is stored; the next request takes a lease
// again.
var errLeaseLost = &fault.Error{Code: fault.Unavailable, RetryAfter: 1,
	Message: "this instance's share of the monthly quota was reclaimed; nothing was stored, retry"}

// errLeaseUnavailable answers a request whose quota could not be checked:
// the database did not answer the lease.
var errLeaseUnavailable = &fault.Error{Code: fault.Unavailable, RetryAfter: 1,
	Message: "the monthly quota could not be checked; nothing was stored, retry"}

// pgQuota is PostgreSQL's quotaShare (docs/postgresql.md#on-postgresql):
// the instances together never accept more than the quota. Each takes
// blocks of what remains (a lease, in quota_leases under its rollup slot)
// in a short transaction under the site's advisory lock, and spends them
// locally as the book spends its reservations on SQLite. An intake
// transaction turns the lease it spends into accepted events (site_usage)
// in one commit, so at every commit the site's accepted events plus every
// instance's lease are at most the quota.
type pgQuota struct {
	db *DB
	// leased is the lease this instance holds per (site, month), guarded
	// by db.quota.mu. A key present with 0 is a site whose events must
	// spend a lease (see spend).
	leased map[[2]string]int
	// take makes one block request at a time per instance.
	take   sync.Mutex
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}
}

// startPGQuota sets db's quota share: it first drops the leases a gone
// instance left under this instance's slot; startReclaim then reclaims
// those of every gone instance every leaseReclaimEvery, when it is the
// leader.
func startPGQuota(ctx context.Context, db *DB, log *slog.Logger) error {
	if db.pg.slotHold != nil {
		// Only while this session holds the slot's lock: with every slot
		// taken (claimSlot), slot 0 is shared with its live owner.
		if _, err := db.pg.slotHold.ExecContext(ctx, `DELETE FROM quota_leases WHERE slot = ?1 AND EXISTS (SELECT 1 FROM pg_locks
			WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND classid::bigint = ?2 AND objid::bigint = ?1 AND objsubid = 2)`,
			db.pg.slot, slotLockClass); err != nil {
			return fmt.Errorf("drop leftover quota leases: %w", err)
		}
	}
	db.pg.qs = &pgQuota{db: db, leased: map[[2]string]int{}, log: log}
	return nil
}

// startReclaim starts the reclaim loop; Open calls it once db's coord is
// set, which the loop's Leader reads.
func (p *pgQuota) startReclaim() {
	loop, cancel := context.WithCancel(context.Background())
	p.cancel, p.done = cancel, make(chan struct{})
	go p.reclaimLoop(loop)
}

func (p *pgQuota) reclaimLoop(ctx context.Context) {
	defer close(p.done)
	t := time.NewTicker(leaseReclaimEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := p.db.Leader(ctx, "quota leases", func() error { return p.reclaim(ctx) }); err != nil && ctx.Err() == nil && p.log != nil {
			p.log.Warn("reclaiming quota leases failed", "err", err)
		}
	}
}

// reclaim deletes the leases of slots no instance holds (an instance that
// stopped without giving its lease back) and of past months. Each slot's
// lock is taken for the transaction, so no instance claims the slot, and
// leases under it, before the delete commits.
func (p *pgQuota) reclaim(ctx context.Context) error {
	_, err := p.db.read.ExecContext(ctx, `DELETE FROM quota_leases WHERE month < ?1 OR slot IN
		(SELECT s FROM (SELECT DISTINCT slot AS s FROM quota_leases WHERE month >= ?1) d WHERE pg_try_advisory_xact_lock(?2::int, s))`,
		p.db.now().UTC().Format(monthLayout), slotLockClass)
	return err
}

// reserve takes n of what this instance's lease holds beyond its other
// reservations and, when that is not enough, the rest from a new block.
func (p *pgQuota) reserve(ctx context.Context, site string, n, limit int) (bool, error) {
	q := &p.db.quota
	q.mu.Lock()
	month := p.db.now().UTC().Format(monthLayout)
	q.roll(month)
	key := [2]string{site, month}
	// What is on hand is reserved at once, so that requests meanwhile
	// do not count it too.
	part := min(max(p.leased[key]-q.reserved[site], 0), n)
	q.reserved[site] += part
	q.mu.Unlock()
	if part == n {
		return true, nil
	}
	p.take.Lock()
	defer p.take.Unlock()
	// Another request may have taken a block while this one waited.
	q.mu.Lock()
	more := min(max(p.leased[key]-q.reserved[site], 0), n-part)
	q.reserved[site] += more
	part += more
	q.mu.Unlock()
	if part == n {
		return true, nil
	}
	got, err := p.takeBlock(ctx, site, month, n-part, limit)
	q.mu.Lock()
	defer q.mu.Unlock()
	if err != nil || got == 0 {
		q.reserved[site] = max(q.reserved[site]-part, 0)
		if err != nil {
			if p.log != nil {
				p.log.Warn("taking a quota lease failed", "err", err)
			}
			return false, errLeaseUnavailable
		}
		return false, nil
	}
	p.leased[key] += got
	q.reserved[site] += n - part
	return true, nil
}

// takeBlock leases at least need events of site's month to this instance's
// slot, and reports how many; 0 when fewer than need remain. A block is a
// share of what remains, split between the live instances with room to
// spare, so that blocks shrink to 1 near the limit:
// clamp(remaining / (2 × live instances), 1, maxLeaseBlock).
func (p *pgQuota) takeBlock(ctx context.Context, site, month string, need, limit int) (int, error) {
	tx, err := p.db.read.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("quota lease: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, engine.LockKey("quota:"+site)); err != nil {
		return 0, fmt.Errorf("quota lease: %w", err)
	}
	// One statement, one snapshot: an intake commit moves events from a
	// lease to site_usage at once, and two statements could count them
	// in neither.
	var used, leased, live int
	err = tx.QueryRowContext(ctx, `SELECT
		(SELECT COALESCE(SUM(accepted), 0) FROM site_usage_slots WHERE site_id = ?1 AND month = ?2),
		(SELECT COALESCE(SUM(leased), 0) FROM quota_leases WHERE site_id = ?1 AND month = ?2),
		(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid::bigint = ?3 AND objsubid = 2 AND granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))`,
		site, month, slotLockClass).Scan(&used, &leased, &live)
	if err != nil {
		return 0, fmt.Errorf("quota lease: %w", err)
	}
	remaining := limit - used - leased
	if remaining < need {
		return 0, nil
	}
	block := min(max(remaining/(2*max(live, 1)), 1, need), maxLeaseBlock, remaining)
	block = max(block, need)
	if _, err := tx.ExecContext(ctx, `INSERT INTO quota_leases(site_id, month, slot, leased) VALUES (?, ?, ?, ?)
		ON CONFLICT (site_id, month, slot) DO UPDATE SET leased = quota_leases.leased + excluded.leased`,
		site, month, p.db.pg.slot, block); err != nil {
		return 0, fmt.Errorf("quota lease: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("quota lease: %w", err)
	}
	return block, nil
}

// spend moves the works' accepted events of every site this instance
// leases from its lease row, in tx: the lease must hold them (reserve
// made sure of it), or the lease was reclaimed and the commit is refused.
// Sites without a lease here (INGEST_QUOTA unset) spend nothing.
func (p *pgQuota) spend(tx *writeTx, works []*ingestWork) error {
	q := &p.db.quota
	spent := map[[2]string]int{}
	q.mu.Lock()
	for _, w := range works {
		month := w.received.UTC().Format(monthLayout)
		for site, n := range w.usage {
			if _, ok := p.leased[[2]string{site, month}]; ok && n > 0 {
				spent[[2]string{site, month}] += n
			}
		}
	}
	q.mu.Unlock()
	keys := make([][2]string, 0, len(spent))
	for k := range spent {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	for _, k := range keys {
		r, err := tx.Exec(`UPDATE quota_leases SET leased = leased - ?1 WHERE site_id = ?2 AND month = ?3 AND slot = ?4 AND leased >= ?1`,
			spent[k], k[0], k[1], p.db.pg.slot)
		if err != nil {
			return fmt.Errorf("spend quota lease: %w", err)
		}
		if n, err := r.RowsAffected(); err != nil || n == 0 {
			q.mu.Lock()
			p.leased[k] = 0
			q.mu.Unlock()
			return errLeaseLost
		}
	}
	q.spent(tx, works)
	tx.OnCommit(func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		for k, n := range spent {
			if _, ok := p.leased[k]; ok {
				p.leased[k] = max(p.leased[k]-n, 0)
			}
		}
	})
	return nil
}

// accepted reads the site's month from the database: every instance's
// events.
func (p *pgQuota) accepted(site string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var n int
	err := p.db.read.QueryRowContext(ctx, `SELECT COALESCE(SUM(accepted), 0) FROM site_usage_slots WHERE site_id = ? AND month = ?`,
		site, p.db.now().UTC().Format(monthLayout)).Scan(&n)
	if err != nil {
		return p.db.quota.accepted(p.db.now(), site)
	}
	return n
}

// close gives back what this instance still leases; a lease it cannot
// give back (the database is gone) the leader reclaims.
func (p *pgQuota) close() {
	if p.done != nil {
		p.cancel()
		<-p.done
	}
	q := &p.db.quota
	q.mu.Lock()
	held := map[[2]string]int{}
	for k, n := range p.leased {
		if n > 0 {
			held[k] = n
		}
		delete(p.leased, k)
	}
	q.mu.Unlock()
	if len(held) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := func() error {
		tx, err := p.db.read.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		for k, n := range held {
			if _, err := tx.ExecContext(ctx, `UPDATE quota_leases SET leased = leased - ? WHERE site_id = ? AND month = ? AND slot = ?`,
				n, k[0], k[1], p.db.pg.slot); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM quota_leases WHERE slot = ? AND leased <= 0`, p.db.pg.slot); err != nil {
			return err
		}
		return tx.Commit()
	}()
	if err != nil && !errors.Is(err, sql.ErrConnDone) && p.log != nil {
		p.log.Warn("giving back quota leases failed; another instance reclaims them", "err", err)
	}
}
