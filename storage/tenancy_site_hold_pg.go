package storage

import (
	"fmt"

	"github.com/tally-analytics/tally/storage/internal/engine"
)

// siteLock is the advisory lock of site id that a write naming the site
// holds shared and a site delete's first transaction (hideSite) takes
// exclusive.
func siteLock(id string) int64 { return engine.LockKey("site:" + id) }

// holdSite takes the site's lock shared, then, in a snapshot taken after
// it, checks that the row is still the one site describes and is not
// being deleted (docs/postgresql.md#several-instances-on-one-database, site
// deletion). A delete's first transaction takes the lock exclusive, so it waits
// for every write that passed here to commit, and its chunks then delete what
// they wrote; a write that starts later finds deleting_since set and gets
// ErrSiteGone, as one refused by checkSite does.
func (c *pgCoord) holdSite(tx *writeTx, site *Site) error {
	if _, err := tx.Exec(`SELECT pg_advisory_xact_lock_shared(?)`, siteLock(site.ID)); err != nil {
		return fmt.Errorf("hold the site: %w", err)
	}
	var n int
	if err := tx.QueryRow(`SELECT count(*) FROM sites WHERE id = ? AND workspace_id = ? AND created_at = ? AND deleting_since IS NULL`,
		site.ID, site.WorkspaceID, site.CreatedAt).Scan(&n); err != nil {
		return fmt.Errorf("hold the site: %w", err)
	}
	if n == 0 {
		return ErrSiteGone
	}
	return nil
}
