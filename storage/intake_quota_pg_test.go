package storage

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// quotaInstances opens two instances (two DBs) on one PostgreSQL database
// with site "s", both on clk.
func quotaInstances(t *testing.T, clk *testClock) (a, b *DB, opts Options) {
	t.Helper()
	ctx := context.Background()
	opts = testOptions(t, Options{Path: ":memory:", Now: clk.Now})
	a, err := Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	withSites(t, a, "s")
	b, err = Open(ctx, opts) // after the site, which b loads at Open
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return a, b, opts
}

// offer runs one event through what intake does with the quota: reserve,
// store, release. It reports whether the event was accepted.
func offer(t *testing.T, db *DB, id string, limit int) bool {
	ctx := context.Background()
	ok, err := db.ReserveQuota(ctx, "s", 1, limit)
	if err != nil {
		t.Error(err)
		return false
	}
	if !ok {
		return false
	}
	defer db.ReleaseQuota("s", 1)
	ts := db.now()
	res, err := db.Ingest(ctx, []IngestEvent{{ID: id, SiteID: "s", Type: "pageview", AnonID: "v" + id[len(id)-2:], TS: ts, Raw: []byte(`{}`)}}, nil, nil)
	if err != nil {
		t.Error(err)
		return false
	}
	return res.Accepted == 1
}

// leases is the sum of quota_leases' rows of month.
func leases(t *testing.T, db *DB, month string) int {
	t.Helper()
	var n int
	if err := db.read.QueryRow(`SELECT COALESCE(SUM(leased), 0) FROM quota_leases WHERE month = ?`, month).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Two instances share one quota exactly (docs/postgresql.md#on-postgresql):
// 3000 events offered at once across both against a quota of 1000 give exactly
// 1000 accepted and stored, the rest refused.
func TestQuotaExactAcrossInstances(t *testing.T) {
	t.Parallel()
	onlyPostgres(t, "two instances on one database")
	clk := &testClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	a, b, opts := quotaInstances(t, clk)
	const limit, offered, senders = 1000, 3000, 8
	var accepted, refused atomic.Int64
	var wg sync.WaitGroup
	for s := range senders {
		db := []*DB{a, b}[s%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := s; i < offered; i += senders {
				if offer(t, db, fmt.Sprintf("e-%05d", i), limit) {
					accepted.Add(1)
				} else {
					refused.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	var stored, usage int
	if err := a.read.QueryRow(`SELECT count(*) FROM events`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if err := a.read.QueryRow(`SELECT accepted FROM site_usage WHERE site_id = 's'`).Scan(&usage); err != nil {
		t.Fatal(err)
	}
	if accepted.Load() != limit || stored != limit || usage != limit || refused.Load() != offered-limit {
		t.Fatalf("got %d accepted, %d stored, %d in site_usage, %d refused, want %d, %d, %d, %d",
			accepted.Load(), stored, usage, refused.Load(), limit, limit, limit, offered-limit)
	}
	for _, db := range []*DB{a, b} {
		if got := db.MonthlyAccepted("s"); got != limit {
			t.Errorf("slot %d: got MonthlyAccepted %d, want %d (every instance's events)", db.pg.slot, got, limit)
		}
	}
	// Closed instances give their leases back.
	a.Close()
	b.Close()
	db := openAnother(t, opts)
	if n := leases(t, db, "2026-03"); n != 0 {
		t.Errorf("got %d events leased after both instances closed, want 0", n)
	}
}

// openAnother opens one more instance with opts.
func openAnother(t *testing.T, opts Options) *DB {
	t.Helper()
	db, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// An instance that stops without giving its lease back (its slot
// connection ends, as at a crash) holds that share only until the leader
// reclaims it; an instance that takes the gone one's slot drops it at
// start.
func TestQuotaLeaseOfAGoneInstanceIsReclaimed(t *testing.T) {
	t.Parallel()
	onlyPostgres(t, "two instances on one database")
	clk := &testClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	a, b, opts := quotaInstances(t, clk)
	const limit = 100
	if !offer(t, a, "a-00", limit) {
		t.Fatal("got the first event refused, want it accepted")
	}
	held := leases(t, b, "2026-03")
	if held < 1 || held >= limit-1 {
		t.Fatalf("got %d leased after one event of %d, want a share of the rest", held, limit)
	}
	// a "crashes": its slot's session ends, its lease stays. Advisory
	// locks are the cluster's: only this database's slot holder is ended,
	// not another test database's holder of the same slot number.
	if _, err := b.read.Exec(`SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND classid::bigint = ? AND objid = ? AND objsubid = 2 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
		slotLockClass, a.pg.slot); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool {
		var n int
		b.read.QueryRow(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid::bigint = ? AND objid = ? AND objsubid = 2 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`, slotLockClass, a.pg.slot).Scan(&n)
		return n == 0
	})
	n := 0
	for i := range limit {
		if offer(t, b, fmt.Sprintf("b-%02d", i), limit) {
			n++
		}
	}
	if want := limit - 1 - held; n != want {
		t.Fatalf("before the reclaim: got %d accepted on the live instance, want %d (the gone one's lease of %d held)", n, want, held)
	}
	if err := b.pg.qs.(*pgQuota).reclaim(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range limit {
		if offer(t, b, fmt.Sprintf("c-%02d", i), limit) {
			n++
		}
	}
	if n != limit-1 || b.MonthlyAccepted("s") != limit {
		t.Fatalf("after the reclaim: got %d accepted on the live instance, %d in the month, want %d and %d", n, b.MonthlyAccepted("s"), limit-1, limit)
	}
	// A lease left under a slot is dropped by the next instance that
	// claims the slot.
	if _, err := b.read.Exec(`INSERT INTO quota_leases(site_id, month, slot, leased) VALUES ('s', '2026-03', ?, 7)`, a.pg.slot); err != nil {
		t.Fatal(err)
	}
	c := openAnother(t, opts)
	if c.pg.slot != a.pg.slot {
		t.Fatalf("got slot %d for the new instance, want the gone one's %d", c.pg.slot, a.pg.slot)
	}
	var left int
	if err := c.read.QueryRow(`SELECT count(*) FROM quota_leases WHERE slot = ?`, c.pg.slot).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("got %d lease rows under the claimed slot, want 0", left)
	}
}

// A new month starts a new quota: the last month's accepted events and
// leases count for nothing in it, and the leader drops last month's
// leases.
func TestQuotaLeasesRollOverTheMonth(t *testing.T) {
	t.Parallel()
	onlyPostgres(t, "two instances on one database")
	clk := &testClock{t: time.Date(2026, 3, 31, 23, 0, 0, 0, time.UTC)}
	a, b, _ := quotaInstances(t, clk)
	const limit = 10
	for _, db := range []*DB{a, b} {
		for i := range limit {
			offer(t, db, fmt.Sprintf("m%d-%02d", db.pg.slot, i), limit)
		}
	}
	if got := a.MonthlyAccepted("s"); got != limit {
		t.Fatalf("got %d accepted in March, want %d", got, limit)
	}
	if offer(t, b, "m-late", limit) {
		t.Fatal("got an event past the quota accepted, want it refused")
	}
	clk.Set(time.Date(2026, 4, 1, 0, 0, 1, 0, time.UTC))
	n := 0
	for _, db := range []*DB{b, a} {
		for i := range limit {
			if offer(t, db, fmt.Sprintf("a%d-%02d", db.pg.slot, i), limit) {
				n++
			}
		}
	}
	if n != limit || a.MonthlyAccepted("s") != limit {
		t.Fatalf("got %d accepted in April (%d counted), want %d", n, a.MonthlyAccepted("s"), limit)
	}
	if err := a.pg.qs.(*pgQuota).reclaim(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := leases(t, a, "2026-03"); n != 0 {
		t.Fatalf("got %d events of March still leased after the reclaim, want 0", n)
	}
}

// waitUntil polls cond until it holds, failing the test after a minute.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition never held")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
