package storage

import (
	"context"
	"fmt"
	"slices"
)

// resetTables are emptied by ResetData.
var resetTables = []string{"events", "sessions", "dlq", "identity_links", "user_profiles",
	"event_ids", "daily_events", "daily_sessions", "site_usage", "daily_dimensions", "imported_ids"}

// ResetData empties every table of collected data in one transaction and
// forgets the quota counts; tenants, keys and the audit log stay. It is for
// dev mode and tests.
func (db *DB) ResetData(ctx context.Context) (map[string]int64, error) {
	deleted := map[string]int64{}
	err := db.writer.do(ctx, func(tx *writeTx) error {
		for _, table := range resetTables {
			// On PostgreSQL the rollups are views over their slot rows.
			res, err := tx.Exec(`DELETE FROM ` + db.d.stored(table))
			if err != nil {
				return fmt.Errorf("reset %s: %w", table, err)
			}
			deleted[table], _ = res.RowsAffected()
		}
		// Links of before migration 0017 not yet moved (intake_links.go).
		if db.links().old {
			res, err := tx.Exec(`DELETE FROM ` + oldLinksTable)
			if err != nil {
				return fmt.Errorf("reset %s: %w", oldLinksTable, err)
			}
			n, _ := res.RowsAffected()
			deleted["identity_links"] += n
		}
		// The query API's cache of those (docs/query-api.md), not counted.
		if _, err := tx.Exec(`DELETE FROM day_partials`); err != nil {
			return fmt.Errorf("reset day_partials: %w", err)
		}
		tx.OnCommit(db.intake.forget)
		tx.partialsChanged("")
		tx.OnCommit(func() {
			db.quota.mu.Lock()
			db.quota.used, db.quota.reserved = map[string]int{}, map[string]int{}
			db.quota.mu.Unlock()
		})
		return nil
	})
	return deleted, err
}

// ResetSiteData deletes site's collected data (the tables of ResetData)
// and forgets its quota count; the site, its keys, its webhook secrets and
// sourcemaps, and every other site's data stay. Like a site deletion it
// goes in writer jobs of a chunk each (lifecycle_site_delete.go), so a big site does
// not hold up other sites' intake. Events the site sends meanwhile may
// outlive the reset. It is for dev mode and tests.
func (db *DB) ResetSiteData(ctx context.Context, site string) (map[string]int64, error) {
	deleted := map[string]int64{}
	for _, t := range siteDataTables {
		if !slices.Contains(resetTables, t.table) {
			continue
		}
		for {
			var n int64
			err := db.writer.do(ctx, func(tx *writeTx) error {
				var err error
				if n, err = t.deleteChunk(tx, db, site); err != nil {
					return err
				}
				tx.OnCommit(db.intake.forget)
				if t.table == "site_usage" {
					tx.OnCommit(func() {
						db.quota.mu.Lock()
						delete(db.quota.used, site)
						db.quota.mu.Unlock()
					})
				}
				return nil
			})
			if err != nil {
				return deleted, err
			}
			deleted[t.table] += n
			if db.hooks.siteDeleteJob != nil {
				db.hooks.siteDeleteJob(t.table, n, false)
			}
			if n < int64(t.chunk) {
				break
			}
		}
	}
	// The query API's cache of the data (docs/query-api.md), not counted:
	// a day's rows of it are a few, so all of them go in one job.
	err := db.writer.do(ctx, func(tx *writeTx) error {
		tx.partialsChanged(site)
		_, err := tx.Exec(`DELETE FROM day_partials WHERE site_id = ?`, site)
		return err
	})
	return deleted, err
}
