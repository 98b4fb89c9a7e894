package storage

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/tally-analytics/tally/storage/internal/engine"
)

// slotLockClass is the first key of the advisory locks that claim rollup
// slots ('tall'); the second is the slot.
const slotLockClass = 0x74616c6c

// maxSlots bounds the slots an instance tries to claim; past them it
// shares slot 0, which costs waits on row locks, never a wrong sum.
const maxSlots = 1024

// claimSlot picks the rollup slot this instance writes on PostgreSQL
// (docs/postgresql.md#on-postgresql): the lowest one whose advisory lock
// it gets, on a connection of its own held until Close, so that two live
// instances do not update the same rollup rows. The sums are exact
// whatever the slot (every write is an increment), so a slot held by a
// gone instance's leftover session, or shared when all are taken, costs
// only lock waits.
func claimSlot(ctx context.Context, url string) (*sql.DB, int, error) {
	hold, err := sql.Open(engine.PGDriverName, url)
	if err != nil {
		return nil, 0, fmt.Errorf("open database: %w", err)
	}
	hold.SetMaxOpenConns(1)
	hold.SetMaxIdleConns(1)
	hold.SetConnMaxLifetime(0)
	hold.SetConnMaxIdleTime(0)
	var slot int
	err = hold.QueryRowContext(ctx, `SELECT coalesce((SELECT s FROM generate_series(0, ?2::int) s
		WHERE pg_try_advisory_lock(?1::int, s) LIMIT 1), -1)`, slotLockClass, maxSlots-1).Scan(&slot)
	if err != nil {
		hold.Close()
		return nil, 0, fmt.Errorf("claim a rollup slot: %w", err)
	}
	return hold, max(slot, 0), nil
}
