package storage

import "context"

// UpsertSourcemap stores a sourcemap, replacing the one with the same
// (site, release, file): uploading the same map twice leaves one row. It
// returns ErrSiteGone if the site was deleted since the upload began.
func (db *DB) UpsertSourcemap(ctx context.Context, site, release, file string, data []byte) error {
	now := FormatTime(db.now())
	return db.writer.Do(ctx, func(tx *Tx) error {
		// The body of a large map takes a while to arrive; a site deleted
		// meanwhile must not get a row again (see checkSites).
		if _, ok := db.Site(site); !ok {
			return ErrSiteGone
		}
		_, err := tx.Exec(`INSERT INTO sourcemaps(site_id, release, file, map, size, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT(site_id, release, file) DO UPDATE SET map = excluded.map, size = excluded.size, updated_at = excluded.updated_at`,
			site, release, file, data, len(data), now, now)
		return err
	})
}
