package storage

import (
	"context"
	"testing"
)

// PruneLoop's round goes through Leader: while another instance holds the
// prune job, a round deletes nothing; once it is done, the round prunes.
func TestPruneRoundGoesThroughLeader(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	ctx := context.Background()
	if _, err := a.write.ExecContext(ctx, `INSERT INTO event_ids(site_id, id, received_ms) VALUES ('s', 'old', 0)`); err != nil {
		t.Fatal(err)
	}
	left := func() int { return countRows(t, a, `SELECT COUNT(*) FROM event_ids WHERE id = 'old'`) }
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := b.Leader(ctx, "prune", func() error {
			close(inside)
			<-release
			return nil
		})
		done <- err
	}()
	<-inside
	if err := a.pruneRound(ctx); err != nil {
		t.Fatal(err)
	}
	if n := left(); n != 1 {
		t.Errorf("got %d expired ids after a round while the other instance held the job, want 1 (skipped)", n)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := a.pruneRound(ctx); err != nil {
		t.Fatal(err)
	}
	if n := left(); n != 0 {
		t.Errorf("got %d expired ids after the round, want 0", n)
	}
}
