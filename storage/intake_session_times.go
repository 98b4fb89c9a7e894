package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// A session's times are stored as integers since migration 0016
// (docs/storage.md#event-bytes, docs/intake.md#visits): start_ms and
// duration_ms. Readers use the generated columns, which read a row of the new
// form and a row stored before (start_text, end_text) alike: started_ms and
// ended_ms, the integers both indexes key, for bounds, order and arithmetic;
// started_at and ended_at, the same text as before, for what is shown.

// visitRangeSQL bounds a read of sessions s to a site's visits that start
// in a range (arguments: site, from and to in ms), by the index on
// (site_id, started_ms).
const visitRangeSQL = `s.site_id = ? AND s.started_ms >= ? AND s.started_ms < ?`

// visitStartMS and visitEndMS are a visit's (alias s) start and end in
// milliseconds since the epoch, comparable with events.ts_ms.
func visitStartMS(s string) string { return s + ".started_ms" }
func visitEndMS(s string) string   { return s + ".ended_ms" }

// durationSQL is a visit's length in seconds.
const durationSQL = `(s.ended_ms - s.started_ms) / 1000.0`

// The writer's reads of a visitor's sessions, newest first: the newest,
// and those starting at or before a time in ms. textTimes (start_ms IS
// NULL) marks a row the conversion has not reached.
const (
	sessionReadColumns = `id, started_ms, ended_ms, start_ms IS NULL, event_count, user_id, ` + visitColumns
	hasSessionSQL      = `SELECT 1 FROM sessions WHERE site_id = ? AND anon_id = ? LIMIT 1`
	newestSessionSQL   = `SELECT ` + sessionReadColumns + ` FROM sessions WHERE site_id = ? AND anon_id = ? ORDER BY started_ms DESC LIMIT 1`
	loadSessionsSQL    = `SELECT ` + sessionReadColumns + ` FROM sessions WHERE site_id = ? AND anon_id = ? AND started_ms <= ? ORDER BY started_ms DESC`
)

// sessionExportColumns are a session's columns as the GDPR export shows
// them: the row as it was before migration 0016, times as text.
const sessionExportColumns = `id, site_id, anon_id, user_id, started_at, ended_at, event_count, ` + visitColumns

// sessionTimesChunk is how many ids one writer job of the session times
// conversion covers: one UPDATE of that range by rowid, a few
// milliseconds of the writer.
const sessionTimesChunk = 500

// sessionTimesConversion rewrites the sessions stored before migration
// 0016 into the integer form, a range of ids per writer job, from the
// lowest id up. The UPDATE computes the new form from the generated
// columns, so a row that intake rewrote meanwhile (already in the new
// form) is left alone, and one deleted meanwhile is simply not found.
func (db *DB) sessionTimesConversion(chunk int) conversion {
	if chunk == 0 {
		chunk = sessionTimesChunk
	}
	return conversion{Name: "session times conversion", Done: "session times converted", Unit: "sessions",
		Chunk: chunk, Step: db.convertSessionTimes}
}

// sessionConvertSQL rewrites the rows of a range of ids stored before
// migration 0016 in the new form: times as integers, source derived (a
// stored source is what the writer derived), the agent coded where its
// values are on the lists. A row the visit backfill wrote meanwhile has
// its agent coded already and keeps it.
var sessionConvertSQL = `UPDATE sessions SET start_ms = started_ms, duration_ms = ended_ms - started_ms, start_text = '', end_text = '',
	source_text = NULL, agent = coalesce(agent, ` + oldAgentCode + `),
	browser_text = CASE WHEN agent IS NULL AND ` + oldAgentCode + ` IS NOT NULL THEN NULL ELSE browser_text END,
	os_text = CASE WHEN agent IS NULL AND ` + oldAgentCode + ` IS NOT NULL THEN NULL ELSE os_text END,
	device_text = CASE WHEN agent IS NULL AND ` + oldAgentCode + ` IS NOT NULL THEN NULL ELSE device_text END
	WHERE id > ? AND id <= ? AND start_ms IS NULL`

var oldAgentCode = agentCodeSQL("browser_text", "os_text", "device_text")

// convertSessionTimes converts the next chunk of ids; done reports that no
// conversion remains. Where the conversion stands is read off the writer
// (only this goroutine moves it), so a database without one queues no job.
func (db *DB) convertSessionTimes(ctx context.Context, chunk int) (converted int64, done bool, err error) {
	var next, end int64
	err = db.read.QueryRowContext(ctx, `SELECT next_id, end_id FROM session_times_conversion WHERE id = 1`).Scan(&next, &end)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, true, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("session times conversion: %w", err)
	}
	last := min(next+int64(chunk), end)
	// The job counts into a variable of its own, read only once the job
	// answered (see convertRawChunk).
	var n int64
	err = db.writer.do(ctx, func(tx *writeTx) error {
		r, err := tx.Exec(sessionConvertSQL, next, last)
		if err != nil {
			return err
		}
		if n, err = r.RowsAffected(); err != nil {
			return err
		}
		if last >= end {
			_, err = tx.Exec(`DELETE FROM session_times_conversion`)
			return err
		}
		_, err = tx.Exec(`UPDATE session_times_conversion SET next_id = ? WHERE id = 1`, last)
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("session times conversion: %w", err)
	}
	return n, last >= end, nil
}

// msTime is a time of sessions' integer columns.
func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
