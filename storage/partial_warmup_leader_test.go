package storage

import (
	"context"
	"testing"
	"time"
)

// The warm-up's round goes through Leader: while another instance warms
// the site, a round computes nothing; once it is done, the round warms.
func TestWarmupRoundGoesThroughLeader(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	ctx := context.Background()
	withSites(t, a, "s")
	now := a.now()
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := b.Leader(ctx, "partials-warmup:s", func() error {
			close(inside)
			<-release
			return nil
		})
		done <- err
	}()
	<-inside
	if err := a.warmRound(ctx, "s", time.UTC, now); err != nil {
		t.Fatal(err)
	}
	if n := a.partialDaysComputed(); n != 0 {
		t.Errorf("got %d day partials computed while the other instance held the warm-up, want 0 (skipped)", n)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := a.warmRound(ctx, "s", time.UTC, now); err != nil {
		t.Fatal(err)
	}
	if n := a.partialDaysComputed(); n == 0 {
		t.Error("got no day partials computed by the round after the other instance's, want the site warmed")
	}
}
