package storage

import (
	"context"
	"fmt"
)

// resetTables are emptied by ResetData.
var resetTables = []string{"events", "sessions", "dlq", "identity_links", "user_profiles",
	"event_ids", "daily_events", "daily_sessions", "site_usage", "daily_dimensions"}

// ResetData empties every table of collected data in one transaction and
// forgets the quota counts; tenants, keys and the audit log stay. It is for
// dev mode and tests.
func (db *DB) ResetData(ctx context.Context) (map[string]int64, error) {
	deleted := map[string]int64{}
	err := db.writer.do(ctx, func(tx *writeTx) error {
		for _, table := range resetTables {
			res, err := tx.Exec(`DELETE FROM ` + table)
			if err != nil {
				return fmt.Errorf("reset %s: %w", table, err)
			}
			deleted[table], _ = res.RowsAffected()
		}
		tx.onCommit(db.intake.forget)
		tx.onCommit(func() {
			db.quota.mu.Lock()
			db.quota.used, db.quota.reserved = map[string]int{}, map[string]int{}
			db.quota.mu.Unlock()
		})
		return nil
	})
	return deleted, err
}
