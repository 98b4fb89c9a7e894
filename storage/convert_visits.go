package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// visitBackfillChunk is how many sessions one writer job of the visit
// backfill updates: their events are read and folded before the job, so
// the job is that many updates by rowid, a few milliseconds of the writer.
const visitBackfillChunk = 200

// visitBackfill computes the visit attributes of the sessions stored
// before migration 0013 from their events, from the lowest id up
// (docs/intake.md#visits). A session that intake touches first gets them then
// (see ingestRun.ready), and the backfill leaves it alone.
func (db *DB) visitBackfill(chunk int) conversion {
	if chunk == 0 {
		chunk = visitBackfillChunk
	}
	return conversion{Name: "visit backfill", Done: "visits backfilled", Unit: "sessions", Chunk: chunk,
		Step: func(ctx context.Context, chunk int) (int64, bool, error) {
			c, err := db.readVisitChunk(ctx, chunk)
			if err != nil || c == nil {
				return 0, c == nil && err == nil, err
			}
			n, err := db.writeVisitChunk(ctx, c)
			return n, c.last >= c.end, err
		}}
}

// visitChunk is one chunk of the backfill as read: the sessions still to
// compute and their visits, and how far the chunk reaches.
type visitChunk struct {
	rows      []backfilledVisit
	last, end int64
}

type backfilledVisit struct {
	id         int64
	site       string
	start, end time.Time
	visit      visit
}

// readVisitChunk reads the next chunk's sessions and folds their events,
// in one read transaction (a snapshot in which each session's events are
// exactly its events), off the writer. It returns nil when no backfill
// remains.
func (db *DB) readVisitChunk(ctx context.Context, chunk int) (*visitChunk, error) {
	tx, err := db.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("visit backfill: %w", err)
	}
	defer tx.Rollback()
	var c visitChunk
	var next int64
	err = tx.QueryRowContext(ctx, `SELECT next_id, end_id FROM visit_backfill WHERE id = 1`).Scan(&next, &c.end)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("visit backfill: %w", err)
	}
	type pending struct {
		id         int64
		site, anon string
		start, end int64
		ready      bool
	}
	var list []pending
	rows, err := tx.QueryContext(ctx, `SELECT id, site_id, anon_id, started_ms, ended_ms, visit_ready FROM sessions
		WHERE id > ? AND id <= ? ORDER BY id LIMIT ?`, next, c.end, chunk)
	if err != nil {
		return nil, fmt.Errorf("visit backfill: %w", err)
	}
	for rows.Next() {
		var p pending
		if err := rows.Scan(&p.id, &p.site, &p.anon, &p.start, &p.end, &p.ready); err != nil {
			rows.Close()
			return nil, fmt.Errorf("visit backfill: %w", err)
		}
		list = append(list, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("visit backfill: %w", err)
	}
	c.last = c.end
	if len(list) == chunk {
		c.last = list[len(list)-1].id
	}
	for _, p := range list {
		if p.ready {
			continue
		}
		start, end := msTime(p.start), msTime(p.end)
		v, err := visitOfEvents(ctx, db.d, tx, p.site, p.anon, start, end, 0)
		if err != nil {
			return nil, fmt.Errorf("visit backfill: %w", err)
		}
		c.rows = append(c.rows, backfilledVisit{id: p.id, site: p.site, start: start, end: end, visit: v})
	}
	return &c, nil
}

// writeVisitChunk stores a chunk's visits in one writer job and records
// how far the backfill got (or ends it). A session that intake changed
// since the chunk was read is ready by then, with the attributes intake
// computed from all its events, and is left as it is; so is one deleted
// meanwhile.
func (db *DB) writeVisitChunk(ctx context.Context, c *visitChunk) (int64, error) {
	// The job counts into a variable of its own, read only once the job
	// answered (see convertRawChunk).
	var written int64
	err := db.writer.do(ctx, func(tx *writeTx) error {
		written = 0
		if len(c.rows) > 0 {
			st, err := tx.Prepare(`UPDATE sessions SET ` + visitSet + ` WHERE id = ? AND visit_ready = 0`)
			if err != nil {
				return err
			}
			defer st.Close()
			// A backfilled visit changes its start day's figures: that day's
			// partials (partial_days.go) were computed without its
			// attributes.
			touched := map[[2]string]bool{}
			for _, r := range c.rows {
				res, err := st.Exec(append(r.visit.args(r.start, r.end), r.id)...)
				if err != nil {
					return err
				}
				n, _ := res.RowsAffected()
				written += n
				if n > 0 {
					touched[[2]string{r.site, FormatTime(r.start)[:10]}] = true
				}
			}
			if err := dropDays(tx, func(args ...any) error { _, err := tx.Exec(dropPartialsSQL, args...); return err }, touched); err != nil {
				return err
			}
		}
		if c.last >= c.end {
			_, err := tx.Exec(`DELETE FROM visit_backfill`)
			return err
		}
		_, err := tx.Exec(`UPDATE visit_backfill SET next_id = ? WHERE id = 1`, c.last)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("visit backfill: %w", err)
	}
	return written, nil
}
