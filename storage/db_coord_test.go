package storage

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tally-analytics/tally/internal/dbtest"
)

// twoInstances opens two DBs on one PostgreSQL database, as two
// instances of the service: the PostgreSQL run's fresh database, or, in
// a run without TEST_DATABASE_URL, a database of the test's own on the
// test binary's shared cluster.
func twoInstances(t *testing.T) (a, b *DB) {
	t.Helper()
	var url string
	switch {
	case dbtest.Postgres():
		url = dbtest.Fresh(t, "", migrateTemplate)
	case os.Getenv(dbtest.URLEnv) != "":
		t.Skip("runs in the PostgreSQL run")
	default:
		url = dbtest.SharedDatabase(t, "")
	}
	open := func() *DB {
		db, err := Open(context.Background(), Options{DatabaseURL: url, ReadConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	return open(), open()
}

// within waits up to a second for cond, the promise made for changes
// reaching the other instances (docs/postgresql.md#on-postgresql).
func within(t *testing.T, what string, cond func() bool) {
	t.Helper()
	// The notification arrives within milliseconds on a quiet machine; the
	// wait is long so that a busy one (tests run 4 at once, both backends'
	// packages side by side) does not fail it: how fast is a benchmark's
	// question, not a test's.
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not seen by the other instance within 10 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

var system = Actor{Kind: ActorSystem}

func TestRevocationAcrossInstances(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	ctx := context.Background()
	ws, err := a.CreateWorkspace(ctx, system, "W", "w")
	if err != nil {
		t.Fatal(err)
	}
	revoked := func(id, plaintext string) {
		t.Helper()
		within(t, "key created", func() bool { _, ok, _ := b.Authenticate(plaintext); return ok })
		if err := a.RevokeKey(ctx, system, ws, id); err != nil {
			t.Fatal(err)
		}
		within(t, "revocation", func() bool { _, ok, _ := b.Authenticate(plaintext); return !ok })
	}
	newKey := func() (string, string) {
		t.Helper()
		k, plaintext, err := a.CreateKey(ctx, system, ws, "k", []string{ScopeAdmin})
		if err != nil {
			t.Fatal(err)
		}
		return k.ID, plaintext
	}

	t.Run("listening", func(t *testing.T) {
		revoked(newKey())
	})
	t.Run("listener killed", func(t *testing.T) {
		id, plaintext := newKey()
		within(t, "key created", func() bool { _, ok, _ := b.Authenticate(plaintext); return ok })
		pid := b.pg.co.(*pgCoord).l.PID()
		var ended bool
		if err := a.read.QueryRowContext(ctx, `SELECT pg_terminate_backend(?)`, int64(pid)).Scan(&ended); err != nil || !ended {
			t.Fatalf("pg_terminate_backend: got %v, %v, want true", ended, err)
		}
		if err := a.RevokeKey(ctx, system, ws, id); err != nil {
			t.Fatal(err)
		}
		within(t, "revocation", func() bool { _, ok, _ := b.Authenticate(plaintext); return !ok })
		within(t, "listener back", func() bool { return b.pg.co.(*pgCoord).l.Up() })
		revoked(newKey())
	})
	t.Run("listener stopped", func(t *testing.T) {
		// Never back: only the fallback to the database can refuse it.
		id, plaintext := newKey()
		within(t, "key created", func() bool { _, ok, _ := b.Authenticate(plaintext); return ok })
		b.pg.co.close()
		if _, ok, _ := b.Authenticate(plaintext); !ok {
			t.Fatalf("with the listener down: got the active key refused, want accepted")
		}
		if err := a.RevokeKey(ctx, system, ws, id); err != nil {
			t.Fatal(err)
		}
		within(t, "revocation", func() bool { _, ok, _ := b.Authenticate(plaintext); return !ok })
		_, other := newKey()
		if k, ok, _ := b.Authenticate(other); !ok || k.WorkspaceID != ws.ID {
			t.Fatalf("a key created while the listener is down: got %v, %v, want accepted from the database", k, ok)
		}
	})
}

func TestTenantChangesAcrossInstances(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	ctx := context.Background()
	ws, err := a.CreateWorkspace(ctx, system, "W", "w")
	if err != nil {
		t.Fatal(err)
	}
	within(t, "workspace created", func() bool { _, ok := b.Workspace("w"); return ok })
	if _, err := a.UpdateWorkspace(ctx, system, ws, "Renamed"); err != nil {
		t.Fatal(err)
	}
	within(t, "workspace renamed", func() bool { w, _ := b.Workspace("w"); return w.Name == "Renamed" })

	site, err := a.CreateSite(ctx, system, ws, "shop", "Shop")
	if err != nil {
		t.Fatal(err)
	}
	within(t, "site created", func() bool { _, ok := b.Site("shop"); return ok })
	name, zone := "Boutique", "Europe/Paris"
	if site, err = a.UpdateSite(ctx, system, site, SiteChange{Name: &name, TimeZone: &zone}); err != nil {
		t.Fatal(err)
	}
	within(t, "site renamed and moved", func() bool {
		s, _ := b.Site("shop")
		return s.Name == name && s.TimeZone == zone
	})
	if _, err := a.SetSiteAliases(ctx, system, site, []string{"shop.example"}); err != nil {
		t.Fatal(err)
	}
	within(t, "alias", func() bool { s, ok := b.SiteNamed("shop.example"); return ok && s.ID == "shop" })

	_, plaintext, err := a.CreateKeyForSites(ctx, system, ws, "k", []string{ScopeAdmin}, []string{"shop"})
	if err != nil {
		t.Fatal(err)
	}
	within(t, "key restricted to a site", func() bool {
		k, ok, _ := b.Authenticate(plaintext)
		return ok && len(k.Sites) == 1 && k.Sites[0] == "shop"
	})
	if err := a.DeleteSite(ctx, system, ws, "shop"); err != nil {
		t.Fatal(err)
	}
	within(t, "site deleted", func() bool {
		_, site := b.Site("shop")
		_, alias := b.SiteNamed("shop.example")
		k, _, _ := b.Authenticate(plaintext)
		return !site && !alias && k != nil && len(k.Sites) == 0
	})
}

func TestAuditTsUniqueAcrossInstances(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	ctx := context.Background()
	// Both instances' clocks stand still: every entry would get the same
	// ts but for the lock.
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	a.now = func() time.Time { return now }
	b.now = a.now
	ws, err := a.CreateWorkspace(ctx, system, "W", "w")
	if err != nil {
		t.Fatal(err)
	}
	const each = 20
	var wg sync.WaitGroup
	for _, db := range []*DB{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, _, err := db.CreateKey(ctx, system, ws, "k", []string{ScopeAdmin}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var entries, distinct int
	if err := a.read.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(DISTINCT ts) FROM audit_log WHERE workspace_id = ?`, ws.ID).Scan(&entries, &distinct); err != nil {
		t.Fatal(err)
	}
	if want := 2*each + 1; entries != want || distinct != want {
		t.Errorf("got %d entries with %d distinct ts, want %d and %d", entries, distinct, want, want)
	}
}

func TestDailyJobsRunOnceAcrossInstances(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	ctx := context.Background()
	// a holds the job until b has tried it.
	var runs atomic.Int32
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan bool)
	go func() {
		ran, err := a.Leader(ctx, "retention", func() error {
			runs.Add(1)
			close(inside)
			<-release
			return nil
		})
		if err != nil {
			t.Error(err)
		}
		done <- ran
	}()
	<-inside
	ran, err := b.Leader(ctx, "retention", func() error { runs.Add(1); return nil })
	if err != nil || ran {
		t.Errorf("b while a runs it: got ran %v, %v, want false", ran, err)
	}
	ran, err = b.Leader(ctx, "prune", func() error { return nil })
	if err != nil || !ran {
		t.Errorf("another job meanwhile: got ran %v, %v, want true", ran, err)
	}
	close(release)
	if !<-done {
		t.Error("a: got ran false, want true")
	}
	if got := runs.Load(); got != 1 {
		t.Errorf("got %d runs, want 1", got)
	}
	ran, err = b.Leader(ctx, "retention", func() error { return nil })
	if err != nil || !ran {
		t.Errorf("b after a finished: got ran %v, %v, want true", ran, err)
	}
}

func TestSiteDeleteTwiceAtOnce(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	ctx := context.Background()
	ws, err := a.CreateWorkspace(ctx, system, "W", "w")
	if err != nil {
		t.Fatal(err)
	}
	site, err := a.CreateSite(ctx, system, ws, "shop", "Shop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetSiteAliases(ctx, system, site, []string{"shop.example"}); err != nil {
		t.Fatal(err)
	}
	// Rows of the site without intake: several chunks of rollups and of
	// a table deleted by row handle.
	if _, err := a.write.ExecContext(ctx, `INSERT INTO daily_events_slots(site_id, day, type, slot, count)
		SELECT 'shop', '2026-01-01', 'e' || i, 0, 1 FROM generate_series(1, 2500) AS i`); err != nil {
		t.Fatal(err)
	}
	if _, err := a.write.ExecContext(ctx, `INSERT INTO goals(site_id, name, event_name, created_at)
		SELECT 'shop', 'g' || i, 'e' || i, '2026-01-01T00:00:00.000Z' FROM generate_series(1, 600) AS i`); err != nil {
		t.Fatal(err)
	}
	within(t, "site created", func() bool { _, ok := b.Site("shop"); return ok })
	errs := make(chan error, 2)
	for _, db := range []*DB{a, b} {
		go func() { errs <- db.DeleteSite(ctx, system, ws, "shop") }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("DeleteSite: got %v, want nil from both (the second answers as the first)", err)
		}
	}
	for _, table := range []string{"sites", "daily_events_slots", "goals", "site_aliases"} {
		col := "site_id"
		if table == "sites" {
			col = "id"
		}
		var n int
		if err := a.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table+` WHERE `+col+` = 'shop'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%s: got %d rows of the site left, want 0", table, n)
		}
	}
	var audited int
	if err := a.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM audit_log WHERE action = 'site.delete'`).Scan(&audited); err != nil {
		t.Fatal(err)
	}
	if audited != 1 {
		t.Errorf("got %d site.delete entries, want 1", audited)
	}
	for _, db := range []*DB{a, b} {
		if _, ok := db.Site("shop"); ok {
			t.Error("got the site still in an instance's map, want gone")
		}
	}
}

func TestSiteHiddenWhileDeleting(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	ctx := context.Background()
	ws, err := a.CreateWorkspace(ctx, system, "W", "w")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateSite(ctx, system, ws, "shop", "Shop"); err != nil {
		t.Fatal(err)
	}
	within(t, "site created", func() bool { _, ok := b.Site("shop"); return ok })
	// A delete that stopped after its first transaction (a crash).
	if err := a.writer.do(ctx, func(tx *writeTx) error { return a.pg.co.hideSite(tx, "shop") }); err != nil {
		t.Fatal(err)
	}
	within(t, "site hidden", func() bool { _, ok := b.Site("shop"); return !ok })
	if err := b.DeleteSite(ctx, system, ws, "shop"); err != nil {
		t.Fatalf("deleting the hidden site again: got %v, want nil", err)
	}
	var n int
	if err := a.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM sites WHERE id = 'shop'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("got %d sites rows, %v, want 0", n, err)
	}
}
