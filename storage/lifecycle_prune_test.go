package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// Prune forgets expired dedup ids in chunks, so a long backlog is deleted
// whole while intake jobs can run between the chunks; fresh ids stay.
func TestPruneDeletesExpiredIdsInChunks(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	db, err := openTestDB(t, context.Background(), Options{Path: filepath.Join(t.TempDir(), "a.db"), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	expired, fresh := 2*pruneChunk+17, 300
	err = db.writer.do(ctx, func(tx *writeTx) error {
		for i := range expired + fresh {
			at := now.Add(-dedupWindow - time.Minute).Add(time.Duration(i) * time.Millisecond)
			if i >= expired {
				at = now.Add(-dedupWindow + time.Minute)
			}
			if _, err := tx.Exec(`INSERT INTO event_ids(site_id, id, received_ms) VALUES ('s', ?, ?)`, fmt.Sprint(i), at.UnixMilli()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	var left, oldest int
	if err := db.read.QueryRow(`SELECT COUNT(*), MIN(CAST(id AS INTEGER)) FROM event_ids`).Scan(&left, &oldest); err != nil {
		t.Fatal(err)
	}
	if left != fresh || oldest != expired {
		t.Fatalf("got %d ids left from id %d, want %d from id %d", left, oldest, fresh, expired)
	}
}
