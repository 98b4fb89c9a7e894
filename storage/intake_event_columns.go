package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Since migration 0020 an events row holds its browser, OS and device type
// as one agent code (intake_visit_codes.go) where all three are on the lists, and
// its wire id as the 16 bytes of a canonical UUID where it is one
// (docs/storage.md#event-bytes). Readers use the generated columns id, browser,
// os and device_type, which read a row of either form as the text it was stored
// from; only the writer and the conversion below know the stored columns.

// eventAgent is what events.agent, browser_text, os_text and
// device_type_text hold for an event: the code and three NULLs, or NULL
// and the texts ("" stored as NULL) when a value is off the lists.
func eventAgent(e *IngestEvent) (agent, browser, os, device any) {
	if code, ok := agentCode(e.Browser, e.OS, e.DeviceType); ok {
		return code, nil, nil, nil
	}
	return nil, nullable(e.Browser), nullable(e.OS), nullable(e.DeviceType)
}

// eventColumnsChunk is how many rows one writer job of the conversion
// covers: one UPDATE of a range of seq, a few milliseconds of the writer.
const eventColumnsChunk = 500

// eventColumnsConversion rewrites the events stored before migration 0020
// in the new form, a chunk of rows per writer job, from the lowest up. It
// is a run of its own rather than a pass of the raw conversion
// (convert_raw.go): that one reads and re-encodes every raw in Go and is
// long done on a database of before 0020, while this is one UPDATE in
// SQL per chunk, which reads nothing off the writer and leaves raw alone
// (the id's text, which raw refers to, does not change).
func (db *DB) eventColumnsConversion(chunk int) conversion {
	if chunk == 0 {
		chunk = eventColumnsChunk
	}
	return conversion{Name: "event columns conversion", Done: "event columns converted", Unit: "events",
		Chunk: chunk, Step: db.convertEventColumns}
}

// oldEventAgent is the agent code of a row stored before migration 0020,
// NULL when a value is off the lists.
var oldEventAgent = agentCodeSQL("browser_text", "os_text", "device_type_text")

// eventColumnsSQL rewrites the rows of a range of seq stored before
// migration 0020 in the new form: the id as 16 bytes where dedup_key makes
// it so, the agent coded where its values are on the lists. A row already
// in the new form (or with nothing to gain) is not written at all.
var eventColumnsSQL = `UPDATE events SET id_text = dedup_key(id_text), agent = coalesce(agent, ` + oldEventAgent + `),
	browser_text = CASE WHEN agent IS NULL AND ` + oldEventAgent + ` IS NOT NULL THEN NULL ELSE browser_text END,
	os_text = CASE WHEN agent IS NULL AND ` + oldEventAgent + ` IS NOT NULL THEN NULL ELSE os_text END,
	device_type_text = CASE WHEN agent IS NULL AND ` + oldEventAgent + ` IS NOT NULL THEN NULL ELSE device_type_text END
	WHERE seq > ? AND seq <= ? AND (typeof(id_text) = 'text' AND typeof(dedup_key(id_text)) = 'blob'
		OR agent IS NULL AND ` + oldEventAgent + ` IS NOT NULL)`

// convertEventColumns converts the next chunk of rows; done reports that no
// conversion remains. Where it stands is read off the writer (only this
// goroutine moves it), so a database without one queues no job.
func (db *DB) convertEventColumns(ctx context.Context, chunk int) (converted int64, done bool, err error) {
	var next, end int64
	err = db.read.QueryRowContext(ctx, `SELECT next_seq, end_seq FROM event_columns_conversion WHERE id = 1`).Scan(&next, &end)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, true, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("event columns conversion: %w", err)
	}
	// The chunk ends at its chunk-th row, not chunk seq on: a range that
	// retention or erasure emptied costs no job per 500 seq. Rows erased
	// meanwhile only make the job smaller; rows added since are past end.
	last := end
	err = db.read.QueryRowContext(ctx, `SELECT seq FROM events WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT 1 OFFSET ?`,
		next, end, chunk-1).Scan(&last)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, false, fmt.Errorf("event columns conversion: %w", err)
	}
	// The job counts into a variable of its own, read only once the job
	// answered (see convertRawChunk).
	var n int64
	err = db.writer.do(ctx, func(tx *writeTx) error {
		r, err := tx.Exec(eventColumnsSQL, next, last)
		if err != nil {
			return err
		}
		if n, err = r.RowsAffected(); err != nil {
			return err
		}
		if last >= end {
			_, err = tx.Exec(`DELETE FROM event_columns_conversion`)
			return err
		}
		_, err = tx.Exec(`UPDATE event_columns_conversion SET next_seq = ? WHERE id = 1`, last)
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("event columns conversion: %w", err)
	}
	return n, last >= end, nil
}
