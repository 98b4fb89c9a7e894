package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tally-analytics/tally/fault"
)

// Imported history (docs/import.md): another product's per-day aggregates, kept
// apart from the events in imported_rows (migration 0024) under an import of
// the imports list. An import is written in writer jobs of at most
// ImportRowsChunk rows, so intake waits no longer for it than for one of its
// own batches, and is invisible to reads until its last job marks it complete;
// that job also replaces every earlier import of the site whose days overlap
// its own, so importing the same export twice counts it once.

// ImportRowsChunk is how many rollup rows one writer job of an import writes, as many
// as one job of a site's deletion removes (siteDeleteChunk). Measured with
// BenchmarkPlausibleImport (a year's export, 325,215 rollup rows, single
// events sent meanwhile every 5 ms): a job of 250 took about 2 ms and
// intake waited 2.4-2.7 ms at the median during the import (0.6-0.8 ms
// without one); jobs of 1,000 imported about 20% faster but intake waited
// 5.8-10 ms (docs/import.md).
const ImportRowsChunk = 250

// ImportedRow is one row of an imported rollup: the figures of one local
// day of the site for one value of a dimension (Dim "" for the whole
// site). Visitors are as the source counted them for that day and value.
type ImportedRow struct {
	Day       string // YYYY-MM-DD
	Dim       string
	Value     string
	Visitors  int64
	Visits    int64
	Pageviews int64
	Events    int64
	Bounces   int64
	Duration  int64 // seconds, the sum over the visits
}

// ImportInfo is one import of a site, as GET /v1/sites/:siteId/imports
// lists it.
type ImportInfo struct {
	ID        int64
	Source    string
	Files     []string
	FirstDay  string // "" when it wrote no row
	LastDay   string
	Rows      int64
	CreatedAt string
}

// Import is an import being written: Add its rows, then Finish.
type Import struct {
	db       *DB
	site     *Site
	id       int64
	source   string
	files    []string
	rows     int64
	first    string
	last     string
	finished bool
}

// BeginImport starts an import of source's files into site: an incomplete
// entry of the imports list, which reads ignore until Finish.
func (db *DB) BeginImport(ctx context.Context, site, source string, files []string) (*Import, error) {
	s, ok := db.Site(site)
	if !ok {
		return nil, fault.Errorf(fault.NotFound, "site %q not found", site)
	}
	names, err := json.Marshal(files)
	if err != nil {
		return nil, err
	}
	im := &Import{db: db, site: s, source: source, files: files}
	err = db.writer.do(ctx, func(tx *writeTx) error {
		if err := db.holdSite(tx, s); err != nil {
			return err
		}
		if err := tx.QueryRow(`INSERT INTO imports(site_id, source, files, created_at) VALUES (?, ?, ?, ?) RETURNING id`,
			site, source, string(names), FormatTime(db.now())).Scan(&im.id); err != nil {
			return fmt.Errorf("start import: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return im, nil
}

// ID is the import's id in the imports list.
func (im *Import) ID() int64 { return im.id }

// Add writes rows (at most ImportRowsChunk) in one writer job. Rows of the same
// day, dimension and value add up.
func (im *Import) Add(ctx context.Context, rows []ImportedRow) error {
	if len(rows) > ImportRowsChunk {
		return fmt.Errorf("storage: %d imported rows in one job, at most %d", len(rows), ImportRowsChunk)
	}
	if len(rows) == 0 {
		return nil
	}
	for _, r := range rows {
		if _, err := time.Parse(time.DateOnly, r.Day); err != nil {
			return fmt.Errorf("storage: imported day %q is not YYYY-MM-DD", r.Day)
		}
	}
	err := im.db.writer.do(ctx, func(tx *writeTx) error {
		if err := im.db.holdSite(tx, im.site); err != nil {
			return err
		}
		stmt, err := tx.Prepare(`INSERT INTO imported_rows(site_id, import_id, dim, day, value,
			visitors, visits, pageviews, events, bounces, duration) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (site_id, import_id, dim, day, value) DO UPDATE SET
			visitors = imported_rows.visitors + excluded.visitors, visits = imported_rows.visits + excluded.visits,
			pageviews = imported_rows.pageviews + excluded.pageviews, events = imported_rows.events + excluded.events,
			bounces = imported_rows.bounces + excluded.bounces, duration = imported_rows.duration + excluded.duration`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, r := range rows {
			if _, err := stmt.Exec(im.site.ID, im.id, r.Dim, r.Day, r.Value,
				r.Visitors, r.Visits, r.Pageviews, r.Events, r.Bounces, r.Duration); err != nil {
				return fmt.Errorf("write imported row: %w", err)
			}
		}
		tx.MarkWritten()
		return nil
	})
	if err != nil {
		return err
	}
	im.rows += int64(len(rows))
	for _, r := range rows {
		if im.first == "" || r.Day < im.first {
			im.first = r.Day
		}
		if r.Day > im.last {
			im.last = r.Day
		}
	}
	return nil
}

// Finish marks the import complete, so that reads count it, and in the same
// transaction hides every earlier import of the site whose days overlap its
// own (and any left incomplete by an interrupted run), and writes the audit
// row (source, files, rows, days; no figures). The hidden imports' rows are
// then deleted in chunks. rows is what the audit records as imported (the
// source's rows, where Add counted rollup rows).
func (im *Import) Finish(ctx context.Context, rows int64, meta map[string]any) error {
	db := im.db
	var replaced []int64
	err := db.writer.do(ctx, func(tx *writeTx) error {
		if err := db.holdSite(tx, im.site); err != nil {
			return err
		}
		replaced = []int64{}
		q, err := tx.Query(`SELECT id FROM imports WHERE site_id = ? AND id <> ? AND
			(complete = 0 OR first_day IS NULL OR (? <> '' AND first_day <= ? AND last_day >= ?))`,
			im.site.ID, im.id, im.first, im.last, im.first)
		if err != nil {
			return err
		}
		for q.Next() {
			var id int64
			if err := q.Scan(&id); err != nil {
				q.Close()
				return err
			}
			replaced = append(replaced, id)
		}
		q.Close()
		if err := q.Err(); err != nil {
			return err
		}
		for _, id := range replaced {
			if _, err := tx.Exec(`DELETE FROM imports WHERE id = ?`, id); err != nil {
				return err
			}
		}
		res, err := tx.Exec(`UPDATE imports SET complete = 1, rows = ?, first_day = ?, last_day = ? WHERE id = ? AND complete = 0`,
			rows, nullable(im.first), nullable(im.last), im.id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			// Another import of the site completed meanwhile and removed
			// this one (one import of a site at a time).
			return fmt.Errorf("another import of site %s completed while this one ran: run this one again", im.site.ID)
		}
		m := map[string]any{"import_id": im.id, "source": im.source, "file_names": im.files, "rows": rows,
			"first_day": nullable(im.first), "last_day": nullable(im.last), "replaced": replaced}
		for k, v := range meta {
			m[k] = v
		}
		return db.audit(tx, im.site.WorkspaceID, Actor{Kind: ActorSystem}, "site.import", im.site.ID, m)
	})
	if err != nil {
		return err
	}
	im.finished = true
	return db.dropImportRows(ctx, im.site.ID, replaced)
}

// dropImportRows deletes the rows of imports no longer listed, a chunk per
// writer job.
func (db *DB) dropImportRows(ctx context.Context, site string, ids []int64) error {
	for _, id := range ids {
		for {
			var n int64
			err := db.writer.do(ctx, func(tx *writeTx) error {
				res, err := tx.Exec(`DELETE FROM imported_rows WHERE (site_id, import_id, dim, day, value) IN
					(SELECT site_id, import_id, dim, day, value FROM imported_rows
					 WHERE site_id = ? AND import_id = ? LIMIT ?)`, site, id, ImportRowsChunk)
				if err != nil {
					return err
				}
				n, err = res.RowsAffected()
				return err
			})
			if err != nil {
				return err
			}
			if n < ImportRowsChunk {
				break
			}
		}
	}
	return nil
}

// Abandon deletes an import that failed before Finish: its list entry and
// the rows it wrote. A run that cannot (the process stopped) leaves an
// incomplete entry, which reads ignore and the site's next import removes.
func (im *Import) Abandon(ctx context.Context) error {
	if im.finished {
		return nil
	}
	db := im.db
	err := db.writer.do(ctx, func(tx *writeTx) error {
		_, err := tx.Exec(`DELETE FROM imports WHERE id = ? AND complete = 0`, im.id)
		return err
	})
	if err != nil {
		return err
	}
	return db.dropImportRows(ctx, im.site.ID, []int64{im.id})
}

// Imports lists the site's complete imports, oldest first.
func (db *DB) Imports(ctx context.Context, site string) ([]ImportInfo, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT id, source, files, COALESCE(first_day, ''), COALESCE(last_day, ''),
		rows, created_at FROM imports WHERE site_id = ? AND complete = 1 ORDER BY id`, site)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []ImportInfo{}
	for rows.Next() {
		var i ImportInfo
		var files string
		if err := rows.Scan(&i.ID, &i.Source, &files, &i.FirstDay, &i.LastDay, &i.Rows, &i.CreatedAt); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(files), &i.Files); err != nil {
			return nil, fmt.Errorf("import %d: bad files %q: %w", i.ID, files, err)
		}
		out = append(out, i)
	}
	return out, rows.Err()
}
