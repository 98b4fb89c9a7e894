package storage

import (
	"context"
	"fmt"

	"github.com/tally-analytics/tally/fault"
)

// SourcemapLimits caps what one site may store in sourcemaps; a zero field
// means no cap.
type SourcemapLimits struct {
	// Files is the most (release, file) pairs a site may hold.
	Files int
	// Bytes is the most decoded map bytes a site may hold in all.
	Bytes int64
}

// UpsertSourcemap stores a sourcemap, replacing the one with the same
// (site, release, file): uploading the same map twice leaves one row. The
// site's usage after the upsert must stay within limits, where a
// replacement counts with its new size instead of the old one; otherwise
// nothing is written and the error is sourcemap_quota_exceeded. A site
// deleted since the caller looked it up gets ErrSiteGone.
func (db *DB) UpsertSourcemap(ctx context.Context, site *Site, release, file string, data []byte, limits SourcemapLimits) error {
	now := FormatTime(db.now())
	return db.writer.Do(ctx, func(tx *Tx) error {
		if err := db.checkSite(site); err != nil {
			return err
		}
		// Read from the sourcemaps_usage index only: the maps stay on disk.
		var files, replaced int
		var bytes, replacedBytes int64
		if err := tx.QueryRow(`SELECT COUNT(*), COALESCE(SUM(size), 0),
				COUNT(CASE WHEN release = ? AND file = ? THEN 1 END), COALESCE(SUM(CASE WHEN release = ? AND file = ? THEN size END), 0)
				FROM sourcemaps INDEXED BY sourcemaps_usage WHERE site_id = ?`,
			release, file, release, file, site.ID).Scan(&files, &bytes, &replaced, &replacedBytes); err != nil {
			return fmt.Errorf("sourcemap usage: %w", err)
		}
		files += 1 - replaced
		bytes += int64(len(data)) - replacedBytes
		if limits.Files > 0 && files > limits.Files {
			return fault.Errorf(fault.SourcemapQuotaExceeded,
				"the site already stores %d sourcemap files, the most allowed; replace an existing (release, file) or delete an old release (DELETE /v1/sites/:siteId/sourcemaps?release=)", limits.Files)
		}
		if limits.Bytes > 0 && bytes > limits.Bytes {
			return fault.Errorf(fault.SourcemapQuotaExceeded,
				"this map would bring the site's sourcemaps to %d bytes, over the %d allowed; delete an old release first (DELETE /v1/sites/:siteId/sourcemaps?release=)", bytes, limits.Bytes)
		}
		_, err := tx.Exec(`INSERT INTO sourcemaps(site_id, release, file, map, size, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT(site_id, release, file) DO UPDATE SET map = excluded.map, size = excluded.size, updated_at = excluded.updated_at`,
			site.ID, release, file, data, len(data), now, now)
		return err
	})
}

// DeleteSourcemaps deletes the maps of site's release, or only its file
// when file is not empty, audited as sourcemap.delete with what was
// removed, and returns the files and bytes freed. Nothing to delete is
// not_found; a site deleted since the caller looked it up gets ErrSiteGone.
func (db *DB) DeleteSourcemaps(ctx context.Context, actor Actor, site *Site, release, file string) (files int, bytes int64, err error) {
	err = db.writer.Do(ctx, func(tx *Tx) error {
		if err := db.checkSite(site); err != nil {
			return err
		}
		match := `site_id = ? AND release = ? AND (? = '' OR file = ?)`
		args := []any{site.ID, release, file, file}
		if err := tx.QueryRow(`SELECT COUNT(*), COALESCE(SUM(size), 0) FROM sourcemaps INDEXED BY sourcemaps_usage WHERE `+match,
			args...).Scan(&files, &bytes); err != nil {
			return fmt.Errorf("sourcemaps to delete: %w", err)
		}
		if files == 0 {
			return fault.Errorf(fault.NotFound, "no sourcemap of that release (and file) on this site")
		}
		if _, err := tx.Exec(`DELETE FROM sourcemaps WHERE `+match, args...); err != nil {
			return err
		}
		meta := map[string]any{"release": release, "files": files, "bytes": bytes}
		if file != "" {
			meta["file"] = file
		}
		return db.audit(tx, site.WorkspaceID, actor, "sourcemap.delete", site.ID, meta)
	})
	return files, bytes, err
}
