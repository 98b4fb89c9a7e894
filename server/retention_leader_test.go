package server

import (
	"context"
	"testing"
	"time"

	"github.com/tally-analytics/tally/internal/dbtest"
)

// The retention purge goes through Leader: while another instance of the
// database runs it, this one skips the round and deletes nothing; once
// that instance is done, this one purges
// (docs/postgresql.md#several-instances-on-one-database).
func TestRetentionPurgeGoesThroughLeader(t *testing.T) {
	t.Parallel()
	if !dbtest.Postgres() {
		t.Skip("one instance on SQLite: Leader always runs the job")
	}
	a := newHarness(t, func(c *Config) { c.RetentionDays = 10 })
	a.setupTenant("acme", "web")
	a.clock.Advance(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC).Sub(a.clock.Now()))
	a.sendAt("web", 1, "phone", "pageview", day(1, 10, 0), nil)
	a.clock.Advance(time.Date(2026, 1, 20, 15, 0, 0, 0, time.UTC).Sub(a.clock.Now()))
	b := newHarnessAt(t, a.path)
	stored := func() int { return a.count(`SELECT COUNT(*) FROM events WHERE site_id = 'web'`) }
	if n := stored(); n != 1 {
		t.Fatalf("got %d events before the purge, want 1", n)
	}
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := b.db.Leader(context.Background(), "retention", func() error {
			close(inside)
			<-release
			return nil
		})
		done <- err
	}()
	<-inside
	if err := a.srv.purge(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := stored(); n != 1 {
		t.Errorf("got %d events after a purge while the other instance held the job, want 1 (skipped)", n)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := a.srv.purge(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := stored(); n != 0 {
		t.Errorf("got %d events after the purge, want 0", n)
	}
}
