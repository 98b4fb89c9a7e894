package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/tally-analytics/tally/fault"
)

// SourcemapPartMax is the most map bytes one row of sourcemap_parts holds,
// and so the most one writer job of a sourcemap upload or delete writes or
// frees: about 4 ms of the writer where a 25 MiB map in one job took about
// 80 ms, and a release of ten of them a second, with all intake waiting.
const SourcemapPartMax = 1 << 20

// sourcemapOrphanAge is how old parts no row points at must be before
// Prune deletes them: far longer than any upload takes (the write timeout
// ends the request well before), so an upload under way is never touched.
const sourcemapOrphanAge = time.Hour

// SourcemapLimits caps what one site may store in sourcemaps; a zero field
// means no cap.
type SourcemapLimits struct {
	// Files is the most (release, file) pairs a site may hold.
	Files int
	// Bytes is the most decoded map bytes a site may hold in all.
	Bytes int64
}

// errPartsMissing is the answer to an upload whose parts were pruned before
// it finished, which only an upload stalled for over an hour could see.
var errPartsMissing = &fault.Error{Code: fault.Unavailable, RetryAfter: 1,
	Message: "the upload took too long and its stored parts were discarded; upload the map again"}

// UpsertSourcemap stores a sourcemap, the concatenation of pieces (which
// are not copied), replacing the one with the same (site, release, file):
// uploading the same map twice leaves one row. The site's usage after the
// upsert must stay within limits, where a replacement counts with its new
// size instead of the old one; otherwise nothing is kept and the error is
// sourcemap_quota_exceeded. A site deleted since the caller looked it up
// gets ErrSiteGone.
//
// No writer job handles more than SourcemapPartMax bytes of map: a first
// job checks the site and the caps, one job writes each part, a last one
// checks again and points the row at the new parts; then the replaced
// map's parts are deleted one a job. A failure midway deletes the parts
// written; parts a crash leaves behind are deleted by Prune.
func (db *DB) UpsertSourcemap(ctx context.Context, site *Site, release, file string, pieces [][]byte, limits SourcemapLimits) error {
	parts := splitParts(pieces)
	var size int64
	for _, p := range parts {
		size += int64(len(p))
	}
	if err := db.sourcemapJob(ctx, func(tx *writeTx) (int64, error) {
		if err := db.holdSite(tx, site); err != nil {
			return 0, err
		}
		return 0, checkSourcemapCaps(tx, db.d, site.ID, release, file, size, limits)
	}); err != nil {
		return err
	}
	upload := uuid.NewString()
	now := FormatTime(db.now())
	// The jobs of a caller run in order, so these run after any part job
	// still queued when ctx ended, and find every part it wrote.
	abandon := func(err error) error {
		db.freeParts(context.WithoutCancel(ctx), site.ID, upload, false)
		return err
	}
	for seq, p := range parts {
		if err := db.sourcemapJob(ctx, func(tx *writeTx) (int64, error) {
			if err := db.holdSite(tx, site); err != nil {
				return 0, err
			}
			_, err := tx.Exec(`INSERT INTO sourcemap_parts(site_id, upload, seq, created_at, data) VALUES (?, ?, ?, ?, ?)`,
				site.ID, upload, seq, now, p)
			return int64(len(p)), err
		}); err != nil {
			return abandon(err)
		}
	}
	// From here the outcome must be known: a job that commits after its
	// caller stopped waiting would point the row at parts then deleted.
	ctx = context.WithoutCancel(ctx)
	var replaced sql.NullString
	err := db.sourcemapJob(ctx, func(tx *writeTx) (int64, error) {
		if err := db.holdSite(tx, site); err != nil {
			return 0, err
		}
		if err := checkSourcemapCaps(tx, db.d, site.ID, release, file, size, limits); err != nil {
			return 0, err
		}
		var stored int
		if err := tx.QueryRow(`SELECT COUNT(*) FROM sourcemap_parts WHERE site_id = ? AND upload = ?`,
			site.ID, upload).Scan(&stored); err != nil {
			return 0, fmt.Errorf("count sourcemap parts: %w", err)
		}
		if stored != len(parts) {
			return 0, errPartsMissing
		}
		// A map stored inline, before parts existed, is freed by the
		// update below, in this job: once per such row.
		var inline int64
		err := tx.QueryRow(`SELECT upload, CASE WHEN upload IS NULL THEN size ELSE 0 END
				FROM sourcemaps`+db.d.IndexedBy("sourcemaps_usage")+` WHERE site_id = ? AND release = ? AND file = ?`,
			site.ID, release, file).Scan(&replaced, &inline)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("replaced sourcemap: %w", err)
		}
		// The empty map is a parameter: x'' is a bit string to PostgreSQL.
		_, err = tx.Exec(`INSERT INTO sourcemaps(site_id, release, file, map, size, created_at, updated_at, upload)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT(site_id, release, file) DO UPDATE
				SET map = excluded.map, size = excluded.size, updated_at = excluded.updated_at, upload = excluded.upload`,
			site.ID, release, file, []byte{}, size, now, now, upload)
		return inline, err
	})
	if err != nil {
		return abandon(err)
	}
	if replaced.Valid {
		// The new map is stored: should this stop midway, Prune deletes
		// the rest.
		db.freeParts(ctx, site.ID, replaced.String, false)
	}
	return nil
}

// splitParts cuts pieces longer than SourcemapPartMax into slices of it,
// without copying, and leaves out empty ones.
func splitParts(pieces [][]byte) [][]byte {
	var parts [][]byte
	for _, p := range pieces {
		for len(p) > 0 {
			n := min(len(p), SourcemapPartMax)
			parts = append(parts, p[:n])
			p = p[n:]
		}
	}
	return parts
}

// checkSourcemapCaps refuses a map of size bytes as (release, file) of site
// if the site's usage would then exceed limits; a replacement counts with
// its new size instead of the old one. It reads the sourcemaps_usage index
// only: the maps stay on disk.
func checkSourcemapCaps(tx *writeTx, d dialect, site, release, file string, size int64, limits SourcemapLimits) error {
	var files, replaced int
	var bytes, replacedBytes int64
	if err := tx.QueryRow(`SELECT COUNT(*), COALESCE(SUM(size), 0),
			COUNT(CASE WHEN release = ? AND file = ? THEN 1 END), COALESCE(SUM(CASE WHEN release = ? AND file = ? THEN size END), 0)
			FROM sourcemaps`+d.IndexedBy("sourcemaps_usage")+` WHERE site_id = ?`,
		release, file, release, file, site).Scan(&files, &bytes, &replaced, &replacedBytes); err != nil {
		return fmt.Errorf("sourcemap usage: %w", err)
	}
	files += 1 - replaced
	bytes += size - replacedBytes
	if limits.Files > 0 && files > limits.Files {
		return fault.Errorf(fault.SourcemapQuotaExceeded,
			"the site already stores %d sourcemap files, the most allowed; replace an existing (release, file) or delete an old release (DELETE /v1/sites/:siteId/sourcemaps?release=)", limits.Files)
	}
	if limits.Bytes > 0 && bytes > limits.Bytes {
		return fault.Errorf(fault.SourcemapQuotaExceeded,
			"this map would bring the site's sourcemaps to %d bytes, over the %d allowed; delete an old release first (DELETE /v1/sites/:siteId/sourcemaps?release=)", bytes, limits.Bytes)
	}
	return nil
}

// DeleteSourcemaps deletes the maps of site's release, or only its file
// when file is not empty, audited as sourcemap.delete with what was
// removed, and returns the files and bytes freed. Nothing to delete is
// not_found; a site deleted since the caller looked it up gets ErrSiteGone.
// One job removes the rows and writes the audit row; the maps' parts then
// go one a job (maps stored inline, before parts existed, go with their
// row).
func (db *DB) DeleteSourcemaps(ctx context.Context, actor Actor, site *Site, release, file string) (files int, bytes int64, err error) {
	// The job's outcome must be known, to free the parts of the rows it
	// deleted, so it is waited for even if the client leaves.
	ctx = context.WithoutCancel(ctx)
	var uploads []string
	err = db.sourcemapJob(ctx, func(tx *writeTx) (int64, error) {
		if err := db.holdSite(tx, site); err != nil {
			return 0, err
		}
		match := `site_id = ? AND release = ? AND (? = '' OR file = ?)`
		args := []any{site.ID, release, file, file}
		var inline int64
		if err := tx.QueryRow(`SELECT COUNT(*), COALESCE(SUM(size), 0), COALESCE(SUM(CASE WHEN upload IS NULL THEN size END), 0)
				FROM sourcemaps`+db.d.IndexedBy("sourcemaps_usage")+` WHERE `+match,
			args...).Scan(&files, &bytes, &inline); err != nil {
			return 0, fmt.Errorf("sourcemaps to delete: %w", err)
		}
		if files == 0 {
			return 0, fault.Errorf(fault.NotFound, "no sourcemap of that release (and file) on this site")
		}
		rows, err := tx.Query(`SELECT upload FROM sourcemaps`+db.d.IndexedBy("sourcemaps_usage")+` WHERE `+match+` AND upload IS NOT NULL`, args...)
		if err != nil {
			return 0, fmt.Errorf("sourcemap uploads to delete: %w", err)
		}
		uploads = uploads[:0]
		for rows.Next() {
			var u string
			if err := rows.Scan(&u); err != nil {
				rows.Close()
				return 0, err
			}
			uploads = append(uploads, u)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, err
		}
		if _, err := tx.Exec(`DELETE FROM sourcemaps WHERE `+match, args...); err != nil {
			return 0, err
		}
		meta := map[string]any{"release": release, "files": files, "bytes": bytes}
		if file != "" {
			meta["file"] = file
		}
		return inline, db.audit(tx, site.WorkspaceID, actor, "sourcemap.delete", site.ID, meta)
	})
	if err != nil {
		return 0, 0, err
	}
	// The rows are gone and the answer is settled; should this stop
	// midway, Prune deletes the rest.
	for _, u := range uploads {
		db.freeParts(ctx, site.ID, u, false)
	}
	return files, bytes, nil
}

// Queries of freeing parts; they read indexes only, never a part's data
// (length() of a blob does not load it), and search, never scan
// (TestSourcemapPartQueriesSearch).
const (
	// uploadInUse counts the sourcemap rows pointing at an upload.
	uploadInUse = `SELECT COUNT(*) FROM sourcemaps WHERE upload = ?`
	// nextPart finds a part of (site, upload) to delete, by its key (the
	// same on both backends), and its size.
	nextPart = `SELECT seq, length(data) FROM sourcemap_parts WHERE site_id = ? AND upload = ? LIMIT 1`
)

// orphanUploads lists uploads with parts older than a cutoff that no
// sourcemap row points at.
func orphanUploads(d dialect) string {
	return `SELECT DISTINCT site_id, upload FROM sourcemap_parts` + d.IndexedBy("sourcemap_parts_age") + `
		WHERE created_at < ? AND NOT EXISTS (SELECT 1 FROM sourcemaps WHERE sourcemaps.upload = sourcemap_parts.upload)
		LIMIT ?`
}

// orphanBatch is how many orphan uploads one read of Prune lists.
const orphanBatch = 100

// freeParts deletes the parts of site's upload, one a writer job. With
// orphan set it stops, deleting nothing more, as soon as a sourcemap row
// points at the upload. It returns the first error; what is left is an
// orphan for Prune.
func (db *DB) freeParts(ctx context.Context, site, upload string, orphan bool) error {
	for {
		var freed int64
		found := false
		err := db.sourcemapJob(ctx, func(tx *writeTx) (int64, error) {
			if orphan {
				var used int
				if err := tx.QueryRow(uploadInUse, upload).Scan(&used); err != nil || used > 0 {
					return 0, err
				}
			}
			var seq int64
			err := tx.QueryRow(nextPart, site, upload).Scan(&seq, &freed)
			if errors.Is(err, sql.ErrNoRows) {
				return 0, nil
			}
			if err != nil {
				return 0, err
			}
			found = true
			_, err = tx.Exec(`DELETE FROM sourcemap_parts WHERE site_id = ? AND upload = ? AND seq = ?`, site, upload, seq)
			return freed, err
		})
		if err != nil || !found {
			return err
		}
	}
}

// pruneSourcemapParts deletes, one a writer job, the parts no sourcemap row
// points at that are older than sourcemapOrphanAge: what an upload, a
// replacement or a delete cut short by a crash left. They are found with a
// read, so the search does not hold the writer; each job checks again that
// no row took them meanwhile.
func (db *DB) pruneSourcemapParts(ctx context.Context) error {
	cutoff := FormatTime(db.now().Add(-sourcemapOrphanAge))
	for {
		rows, err := db.read.QueryContext(ctx, orphanUploads(db.d), cutoff, orphanBatch)
		if err != nil {
			return fmt.Errorf("find orphan sourcemap parts: %w", err)
		}
		var orphans [][2]string
		for rows.Next() {
			var o [2]string
			if err := rows.Scan(&o[0], &o[1]); err != nil {
				rows.Close()
				return err
			}
			orphans = append(orphans, o)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(orphans) == 0 {
			return nil
		}
		for _, o := range orphans {
			if err := db.freeParts(ctx, o[0], o[1], true); err != nil {
				return err
			}
		}
		if len(orphans) < orphanBatch {
			return nil
		}
	}
}

// sourcemapJob runs fn as a writer job; fn returns the bytes of map it
// wrote or freed, which a test hook (DB.hooks.sourcemapJobBytes) is told.
func (db *DB) sourcemapJob(ctx context.Context, fn func(tx *writeTx) (int64, error)) error {
	var n int64
	err := db.writer.do(ctx, func(tx *writeTx) error {
		var err error
		n, err = fn(tx)
		return err
	})
	if err == nil && db.hooks.sourcemapJobBytes != nil {
		db.hooks.sourcemapJobBytes(n)
	}
	return err
}
