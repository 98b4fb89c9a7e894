package storage

import (
	"context"
	"testing"
	"time"

	"github.com/tally-analytics/tally/fault"
)

// A replay's claim holds across instances until released, and a claim
// its instance never released (a crash) expires after replayClaim.
func TestReplayClaimAcrossInstances(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	ctx := context.Background()
	if err := a.writer.do(ctx, func(tx *writeTx) error {
		_, err := tx.Exec(`INSERT INTO dlq(id, site_id, payload, error, received_at) VALUES ('e1', 'web', '{}', '[]', '2026-01-01T00:00:00.000Z')`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	e, err := a.DLQEntry(ctx, "web", "e1")
	if err != nil {
		t.Fatal(err)
	}
	claim := func(db *DB, want string) func() {
		t.Helper()
		release, err := db.ClaimReplay(ctx, "web", e)
		if fault.Code(err) != want && !(want == "" && err == nil) {
			t.Fatalf("got %v, want %q", err, want)
		}
		return release
	}
	release := claim(a, "")
	claim(b, fault.ReplayInProgress)
	claim(a, fault.ReplayInProgress)
	release()
	claim(b, "")() // released: the other instance claims it
	claim(a, "")   // never released, as by a crash
	claim(b, fault.ReplayInProgress)
	now := time.Now()
	b.now = func() time.Time { return now.Add(replayClaim + time.Second) }
	claim(b, "")
}
