package storage

import (
	"context"
	"database/sql"
	"os"
	"time"
)

// ImportChunk is the most events one ImportEvents call takes: a full
// intake request's worth (docs/intake.md), so an import's writer job is no
// longer than the writer's usual batch and intake runs between two chunks.
const ImportChunk = 500

// ImportEvents stores events of an import (docs/import.md) through the writer
// as intake does, in one job: sessions, visits, rollups, and the day partials
// and report cache of the days it touches, all kept as for events that arrive
// late. Unlike intake, an event whose id the site has imported before is a
// duplicate for good (imported_ids), not only for 48 hours, so the same
// import run again stores nothing; and imported events use no quota. It
// waits for room in the writer's queue rather than failing when it is full.
// More than ImportChunk events is a programming error of the caller.
func (db *DB) ImportEvents(ctx context.Context, events []IngestEvent) (IngestResult, error) {
	if len(events) == 0 {
		return IngestResult{Duplicate: []bool{}}, nil
	}
	if len(events) > ImportChunk {
		panic("storage: ImportEvents takes at most ImportChunk events")
	}
	w, j := db.ingestJob(events, nil, nil)
	w.imported = true
	if err := db.writer.Run(ctx, j, true); err != nil {
		return IngestResult{}, err
	}
	return w.result(), nil
}

// ImportSummary is what an import's audit entry records: where the rows
// came from and how many there were, never the rows themselves.
type ImportSummary struct {
	// Source is the product the rows came from: goatcounter, umami, tally,
	// plausible.
	Source string
	// Files are the names of the files read (base names, no folders), or
	// the database's host and name without credentials.
	Files []string
	// Rows read, Imported (stored now), Duplicates (stored before) and
	// Skipped (rows the source marks as not to count, say bots).
	Rows, Imported, Duplicates, Skipped int64
	Took                                time.Duration
}

// RecordImport writes the audit entry of a finished import of site
// (action site.import), one per import however many chunks it took.
func (db *DB) RecordImport(ctx context.Context, actor Actor, site *Site, s ImportSummary) error {
	files := s.Files
	if files == nil {
		files = []string{}
	}
	return db.writer.do(ctx, func(tx *writeTx) error {
		if err := db.holdSite(tx, site); err != nil {
			return err
		}
		return db.audit(tx, site.WorkspaceID, actor, "site.import", site.ID, map[string]any{
			"source": s.Source, "files": files, "rows": s.Rows, "imported": s.Imported,
			"duplicates": s.Duplicates, "skipped": s.Skipped, "duration_ms": s.Took.Milliseconds(),
		})
	})
}

// CheckUnused returns ErrInUse when another connection, usually a running
// server, has the database file at path open, as Vacuum finds out: `tally
// import` with the server stopped must be the file's only writer, or the
// server's caches and sessions memo would not see the import. It checks
// and lets go; a server started in the moment between this check and the
// import's own Open is not caught.
func CheckUnused(ctx context.Context, path string) error {
	if _, err := os.Stat(path); err != nil {
		return err
	}
	db, err := sql.Open("sqlite", FileURI(path)+"?mode=rw&_pragma=busy_timeout(0)&_pragma=locking_mode(EXCLUSIVE)")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		return inUse(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN EXCLUSIVE`); err != nil {
		return inUse(err)
	}
	_, err = conn.ExecContext(ctx, `COMMIT`)
	return inUse(err)
}

// Clock is the time the database's writes are stamped with (Options.Now):
// an import bounds its events' times by it, as intake does.
func (db *DB) Clock() time.Time { return db.now() }
