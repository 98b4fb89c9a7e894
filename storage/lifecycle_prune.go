package storage

import (
	"context"
	"time"
)

// pruneEvery is how often the writer forgets expired dedup ids and salts:
// often, so that each run has little to delete.
const pruneEvery = time.Minute

// pruneChunk is how many expired dedup ids one writer job deletes. An id
// sits at a random place in the dedup table, so deleting one costs about
// 20 µs (a random page rewritten); a chunk of 250 holds the writer, and the
// intake jobs committed with it, for about 5 ms. In one transaction, the
// ids that a steady 2,000 events/s leaves every ten minutes would hold it
// for about 25 s. Intake jobs run between the chunks.
const pruneChunk = 250

// Prune deletes dedup ids older than dedupWindow, salts older than
// yesterday and sourcemap parts a crash left behind (see
// pruneSourcemapParts). The collector calls it periodically; it is cheap
// when there is little to delete.
func (db *DB) Prune(ctx context.Context) error {
	now := db.now().UTC()
	cutoff := now.Add(-dedupWindow).UnixMilli()
	for {
		var deleted int64
		err := db.writer.do(ctx, func(tx *writeTx) error {
			res, err := tx.Exec(`DELETE FROM event_ids WHERE (site_id, id) IN
				(SELECT site_id, id FROM event_ids WHERE received_ms < ? ORDER BY received_ms LIMIT ?)`, cutoff, pruneChunk)
			if err != nil {
				return err
			}
			deleted, err = res.RowsAffected()
			return err
		})
		if err != nil {
			return err
		}
		if deleted < pruneChunk {
			break
		}
	}
	if err := db.writer.do(ctx, func(tx *writeTx) error {
		_, err := tx.Exec(`DELETE FROM daily_salts WHERE day < ?`, now.Add(-24*time.Hour).Format(dayLayout))
		return err
	}); err != nil {
		return err
	}
	return db.pruneSourcemapParts(ctx)
}

// pruneRound is one round of PruneLoop: one instance at a time on
// PostgreSQL, the others skip it (docs/postgresql.md#on-postgresql).
func (db *DB) pruneRound(ctx context.Context) error {
	_, err := db.Leader(ctx, "prune", func() error { return db.Prune(ctx) })
	return err
}

// PruneLoop runs Prune every pruneEvery until ctx ends.
func (db *DB) PruneLoop(ctx context.Context, onError func(error)) {
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := db.pruneRound(ctx); err != nil && ctx.Err() == nil {
				onError(err)
			}
		}
	}
}
