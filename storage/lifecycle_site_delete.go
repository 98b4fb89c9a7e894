package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/tally-analytics/tally/fault"
)

// siteDataTables hold a site's data; deleting a site empties them of it so
// a later site with the same id starts clean (the audit log is kept). None
// is deleted whole: clients fill every one of them without bound, the
// rollups too (a row per distinct url, referrer or event type per day, and
// days go back as far as event timestamps do). Each says how many rows one
// writer job deletes, and either nothing (its rows go by the row handle: rowid, ctid on PostgreSQL) or the
// columns of its primary key after site_id: a site's rows then lie
// together in that order and go by ranges of it, one index scan, about
// five times faster than a lookup per row.
var siteDataTables = []siteTable{
	{"events", "", siteDeleteChunk}, {"sessions", "", siteDeleteChunk},
	{"event_ids", "id", siteDeleteChunk}, {"identity_links", "anon_id, user_id", siteDeleteChunk},
	{"user_profiles", "", siteDeleteChunk}, {"dlq", "", siteDeleteChunk},
	// Rollup rows have no other index: 1,000 of them take 0.7 ms with
	// 40-character values and 2.3 ms with 500 (measured in one job).
	{"daily_events", "day, type", 1000}, {"daily_dimensions", "day, dimension, value", 1000},
	{"daily_sessions", "day", 1000}, {"site_usage", "month", 1000},
	{"webhook_secrets", "", siteDeleteChunk}, {"goals", "", siteDeleteChunk}, {"segments", "", siteDeleteChunk}, {"funnels", "", siteDeleteChunk},
	{"site_aliases", "", siteDeleteChunk}, {"shared_links", "", siteDeleteChunk},
	// Mail (docs/email.md): recipients, thresholds, the outbox's rows.
	{"mail_subscriptions", "", siteDeleteChunk}, {"traffic_alerts", "", siteDeleteChunk}, {"mail_outbox", "", siteDeleteChunk},
	{"imported_ids", "id", siteDeleteChunk},
	// Imported history (import_history.go): rollup rows, and the list of imports.
	{"imported_rows", "import_id, dim, day, value", 1000}, {"imports", "", siteDeleteChunk},
	// A map stored before migration 0008 is inline, up to 25 MiB, and
	// secure_delete overwrites it: deleting one costs about what uploading
	// it did, so one row goes per job. Later maps are parts of at most
	// 1 MiB (SourcemapPartMax), also one per job.
	{"sourcemaps", "", 1}, {"sourcemap_parts", "", 1},
}

// siteTable is one of siteDataTables.
type siteTable struct {
	table string
	// pk is the primary key after site_id, for deleting by ranges; "" to
	// delete by row handle (dialect.rowHandle).
	pk    string
	chunk int
}

// deleteChunk deletes up to t.chunk rows of site from t.
func (t siteTable) deleteChunk(tx *writeTx, db *DB, site string) (int64, error) {
	// The partials of the rows going (a reset's too) must not be stored
	// again from reads of before.
	tx.partialsChanged(site)
	table := db.d.stored(t.table)
	var res sql.Result
	var err error
	if t.pk == "" {
		h := db.d.RowHandle()
		res, err = tx.Exec(`DELETE FROM `+table+` WHERE `+h+` IN
			(SELECT `+h+` FROM `+table+` WHERE site_id = ? LIMIT ?)`, site, t.chunk)
	} else {
		last := make([]any, strings.Count(t.pk, ",")+1)
		dest := make([]any, len(last))
		for i := range last {
			dest[i] = &last[i]
		}
		err = tx.QueryRow(`SELECT `+t.pk+` FROM `+table+` WHERE site_id = ? ORDER BY `+t.pk+` LIMIT 1 OFFSET ?`,
			site, t.chunk-1).Scan(dest...)
		switch {
		case errors.Is(err, sql.ErrNoRows): // less than a chunk left
			res, err = tx.Exec(`DELETE FROM `+table+` WHERE site_id = ?`, site)
		case err == nil:
			res, err = tx.Exec(`DELETE FROM `+table+` WHERE site_id = ? AND (`+t.pk+`) <= (?`+
				strings.Repeat(", ?", len(last)-1)+`)`, append([]any{site}, last...)...)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("delete %s of site: %w", t.table, err)
	}
	n, err := res.RowsAffected()
	if t.table == "identity_links" && err == nil && n < int64(t.chunk) && db.oldLinks.Load() {
		// Links of before migration 0017 not yet moved (intake_links.go).
		var m int64
		m, err = deleteOldLinks(tx, site, t.chunk-int(n))
		n += m
	}
	return n, err
}

// siteDeleteChunk is how many rows one writer job of DeleteSite deletes
// from the tables with indexes besides the primary key, a couple of
// milliseconds of the writer, so that intake of the other sites runs
// between the chunks instead of waiting for the whole site. Measured with
// 200,000 events: 3.5 s in all, single events of another site served
// meanwhile (1,567 of them, 11 waited over 10 ms), where one transaction
// had held all intake for 1.5 s.
const siteDeleteChunk = 250

// errSiteRowsLeft makes the final job of deleteSite give way when more
// than a chunk of some table is left, so that it stays as short as a chunk.
var errSiteRowsLeft = errors.New("storage: rows of the deleted site left")

// DeleteSite deletes the site id of ws together with all its data, audited
// as site.delete with the rows removed. The site is hidden at once (intake
// and reads answer as for an unknown site), its tables are emptied in
// chunks, then one transaction deletes the site, what is left of its data
// (at most a chunk a table) and writes the audit row. It runs to the end
// even if ctx is cancelled. If the process stops midway the site is still
// there, with part of its data, and deleting it again finishes the work.
func (db *DB) DeleteSite(ctx context.Context, actor Actor, ws *Workspace, id string) error {
	db.tenants.mu.Lock()
	s, ok := db.sites[id]
	if ok && s.WorkspaceID == ws.ID {
		delete(db.sites, id)
		if db.tenants.deleting == nil {
			db.tenants.deleting = map[string]bool{}
		}
		db.tenants.deleting[id] = true
	}
	db.tenants.mu.Unlock()
	if !ok || s.WorkspaceID != ws.ID {
		// On PostgreSQL, a site whose delete stopped midway stays hidden
		// (docs/postgresql.md#on-postgresql): deleting it again finishes the
		// work.
		hidden, err := db.coord().hiddenSite(ctx, ws.ID, id)
		if err != nil {
			return err
		}
		if hidden == nil {
			return fault.Errorf(fault.NotFound, "site not found")
		}
		s = hidden
	}
	ctx = context.WithoutCancel(ctx)
	// Two instances deleting the site at once: one deletes, the other
	// waits and answers as it did (docs/postgresql.md#on-postgresql).
	err := db.coord().exclusively(ctx, "sitedel:"+id, func() error {
		gone, err := db.siteGone(ctx, s)
		if err != nil || gone {
			return err
		}
		return db.deleteSite(ctx, actor, ws, id)
	})
	db.tenants.mu.Lock()
	delete(db.tenants.deleting, id)
	if err != nil && ok {
		db.sites[id] = s
	}
	db.tenants.mu.Unlock()
	return err
}

// siteGone reports whether s was deleted meanwhile, perhaps by another
// instance (and perhaps created again since: another site).
func (db *DB) siteGone(ctx context.Context, s *Site) (bool, error) {
	var n int
	err := db.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM sites WHERE id = ? AND workspace_id = ? AND created_at = ?`,
		s.ID, s.WorkspaceID, s.CreatedAt).Scan(&n)
	return n == 0, err
}

func (db *DB) deleteSite(ctx context.Context, actor Actor, ws *Workspace, id string) error {
	deleted := map[string]int64{}
	// Hidden from the other instances too, before the first chunk goes.
	if db.pg.co != nil {
		if err := db.writer.do(ctx, func(tx *writeTx) error { return db.pg.co.hideSite(tx, id) }); err != nil {
			return err
		}
	}
	for {
		for _, t := range siteDataTables {
			for {
				var n int64
				err := db.writer.do(ctx, func(tx *writeTx) error {
					var err error
					n, err = t.deleteChunk(tx, db, id)
					return err
				})
				if err != nil {
					return err
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
		// Writes of a site's data check in the writer that the site still
		// exists (see checkSites), so normally nothing is left by now. The
		// final job deletes any rest, unless a table holds more than a
		// chunk of it: then the chunks start over.
		err := db.deleteSiteFinal(ctx, actor, ws, id, deleted)
		if !errors.Is(err, errSiteRowsLeft) {
			return err
		}
	}
}

// deleteSiteFinal deletes the site and the rest of its data, and writes the
// audit row with deleted plus what it removed. It returns errSiteRowsLeft,
// having changed nothing, if a table holds more than a chunk of the site.
func (db *DB) deleteSiteFinal(ctx context.Context, actor Actor, ws *Workspace, id string, deleted map[string]int64) error {
	counts := map[string]int64{}
	err := db.writer.do(ctx, func(tx *writeTx) error {
		for _, t := range siteDataTables {
			var left int
			if err := tx.QueryRow(`SELECT COUNT(*) FROM (SELECT 1 FROM `+db.d.stored(t.table)+` WHERE site_id = ? LIMIT ?) AS rest`,
				id, t.chunk+1).Scan(&left); err != nil {
				return fmt.Errorf("count %s of site: %w", t.table, err)
			}
			if left > t.chunk {
				return errSiteRowsLeft
			}
		}
		res, err := tx.Exec(`DELETE FROM sites WHERE id = ? AND workspace_id = ?`, id, ws.ID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fault.Errorf(fault.NotFound, "site not found")
		}
		if err := db.dropSiteFromKeys(tx, ws.ID, id); err != nil {
			return err
		}
		total := map[string]int64{}
		for _, t := range siteDataTables {
			res, err := tx.Exec(`DELETE FROM `+db.d.stored(t.table)+` WHERE site_id = ?`, id)
			if err != nil {
				return fmt.Errorf("delete %s of site: %w", t.table, err)
			}
			counts[t.table], _ = res.RowsAffected()
			if t.table == "identity_links" && db.oldLinks.Load() {
				n, err := deleteOldLinks(tx, id, -1)
				if err != nil {
					return err
				}
				counts[t.table] += n
			}
			total[t.table] = deleted[t.table] + counts[t.table]
		}
		// The query API's cache of the site's data (docs/query-api.md),
		// not counted: at most a few rows a day.
		if _, err := tx.Exec(`DELETE FROM day_partials WHERE site_id = ?`, id); err != nil {
			return fmt.Errorf("delete day_partials of site: %w", err)
		}
		tx.partialsChanged(id)
		if err := db.audit(tx, ws.ID, actor, "site.delete", id, map[string]any{"deleted_rows": total}); err != nil {
			return err
		}
		if err := db.coord().notify(tx, "site", id); err != nil {
			return err
		}
		tx.OnCommit(db.intake.forget)
		tx.OnCommit(func() { db.forgetAliases(id) })
		tx.OnCommit(func() {
			// site_usage went with the site; so does its in-memory count.
			db.quota.mu.Lock()
			delete(db.quota.used, id)
			db.quota.mu.Unlock()
		})
		return nil
	})
	if err == nil && db.hooks.siteDeleteJob != nil {
		for table, n := range counts {
			db.hooks.siteDeleteJob(table, n, true)
		}
	}
	return err
}
