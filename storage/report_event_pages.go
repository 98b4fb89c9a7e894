package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Since migration 0021 every event has a row in event_pages under its seq:
// its name (NULL for a pageview) and its page path, kept in step with
// events by triggers on every path that writes or deletes events
// (docs/query-api.md#how-reports-stay-fast). A report that reads only those of
// an event then reads its index entry and this ~17-byte row instead of the wide
// events row. The events stored before 0021 get their rows from the backfill
// below; until it has ended reports read the events rows, as before (a fallback
// per event, a LEFT JOIN, lost most of the gain).

// eventPagesChunk is how many events one writer job of the backfill
// covers: one INSERT ... SELECT over a range of seq
// (docs/storage.md#event-bytes).
const eventPagesChunk = 2000

// loadEventPagesReady sets eventPagesReady when no backfill remains.
func (db *DB) loadEventPagesReady(ctx context.Context) error {
	var n int
	if err := db.write.QueryRowContext(ctx, `SELECT COUNT(*) FROM event_pages_backfill`).Scan(&n); err != nil {
		return fmt.Errorf("event pages backfill: %w", err)
	}
	db.eventPagesReady.Store(n == 0)
	return nil
}

// eventPagesBackfill gives the events stored before migration 0021 their
// event_pages rows, a chunk of events per writer job, from the lowest seq
// up, resumable (event_pages_backfill records where it stands).
func (db *DB) eventPagesBackfill(chunk int) conversion {
	if chunk == 0 {
		chunk = eventPagesChunk
	}
	return conversion{Name: "event pages backfill", Done: "event pages backfilled", Unit: "events",
		Chunk: chunk, Step: func(ctx context.Context, chunk int) (int64, bool, error) {
			return db.backfillEventPages(ctx, chunk, nil)
		}}
}

// eventPagesSQL writes the event_pages rows of the events of a range of
// seq, as the insert trigger of migration 0021 does. DO NOTHING: an event
// written since has its row already.
const eventPagesSQL = `INSERT INTO event_pages(seq, name, path)
	SELECT seq, CASE WHEN type = 'pageview' THEN NULL ELSE type END, tally_page_path(url)
	FROM events WHERE seq > ? AND seq <= ? ON CONFLICT(seq) DO NOTHING`

// backfillEventPages backfills the next chunk of events; done reports that
// none remains, and then reports read event_pages. job, when set, is given
// the time of the writer job (the benchmark's figure). Where it stands is
// read off the writer (only this goroutine moves it), so a database
// without a backfill queues no job.
func (db *DB) backfillEventPages(ctx context.Context, chunk int, job func(time.Duration)) (converted int64, done bool, err error) {
	var next, end int64
	err = db.read.QueryRowContext(ctx, `SELECT next_seq, end_seq FROM event_pages_backfill WHERE id = 1`).Scan(&next, &end)
	if errors.Is(err, sql.ErrNoRows) {
		db.eventPagesReady.Store(true)
		return 0, true, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("event pages backfill: %w", err)
	}
	// The chunk ends at its chunk-th event, not chunk seq on, as the event
	// columns conversion's (intake_event_columns.go).
	last := end
	err = db.read.QueryRowContext(ctx, `SELECT seq FROM events WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT 1 OFFSET ?`,
		next, end, chunk-1).Scan(&last)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, false, fmt.Errorf("event pages backfill: %w", err)
	}
	var n int64
	t0 := time.Now()
	err = db.writer.do(ctx, func(tx *writeTx) error {
		r, err := tx.Exec(eventPagesSQL, next, last)
		if err != nil {
			return err
		}
		if n, err = r.RowsAffected(); err != nil {
			return err
		}
		if last >= end {
			_, err = tx.Exec(`DELETE FROM event_pages_backfill`)
			return err
		}
		_, err = tx.Exec(`UPDATE event_pages_backfill SET next_seq = ? WHERE id = 1`, last)
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("event pages backfill: %w", err)
	}
	if job != nil {
		job(time.Since(t0))
	}
	if last >= end {
		db.eventPagesReady.Store(true)
	}
	return n, last >= end, nil
}

// usePages sets q.pages when event_pages is complete and q reads nothing
// of an event but its name and page and what its index entry holds (site,
// visitor, time: time dimensions are read from the index's ts_ms): no
// property, no dimension this read does not know.
func (db *DB) usePages(q *StatsQuery) {
	ok := db.eventPagesReady.Load() && !q.wideEvents && !db.wideReads.Load()
	known := func(d string) bool {
		return d == "event:page" || d == GoalDimension && len(q.Goals) > 0 || d == "event:name" || d == anonDim || VisitDimensions[d] != "" || TimeDimension(d)
	}
	for _, d := range q.Dimensions {
		ok = ok && known(d)
	}
	filterDims(q.Filters, func(d string) { ok = ok && known(d) })
	filterDims(q.Goals, func(d string) { ok = ok && known(d) })
	q.pages = ok
}

// EventPagesReady reports whether every event has its event_pages row
// (the backfill of migration 0021 has ended), so that reports read them;
// benchmarks wait for it.
func (db *DB) EventPagesReady() bool { return db.eventPagesReady.Load() }

// ReadWideEvents makes reports and funnels read the wide events rows, as
// before event_pages is complete, even when it is (on) or not (off): the
// tests run their hand-computed cases both ways.
func (db *DB) ReadWideEvents(on bool) { db.wideReads.Store(on) }
