package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// rawConvertChunk is how many rows one writer job of the raw conversion
// rewrites: the reading and compressing happen before the job, so the job
// is that many updates by rowid, a few milliseconds of the writer.
const rawConvertChunk = 500

// rawConversion rewrites the events stored before migration 0012 with raw
// in its current form holding the received time (intake_raw_codec.go), from the
// lowest seq up (docs/storage.md#event-bytes). A raw that cannot be
// re-encoded stays as it is, with received_at. Both forms stay readable
// throughout.
func (db *DB) rawConversion(chunk int) conversion {
	if chunk == 0 {
		chunk = rawConvertChunk
	}
	return conversion{Name: "raw conversion", Done: "events converted to compressed raw", Unit: "events",
		Chunk: chunk, Step: db.convertRawChunk}
}

// convertRawChunk converts the next chunk of rows; done reports that no
// conversion remains.
func (db *DB) convertRawChunk(ctx context.Context, chunk int) (converted int64, done bool, err error) {
	var next, end int64
	err = db.read.QueryRowContext(ctx, `SELECT next_seq, end_seq FROM raw_conversion WHERE id = 1`).Scan(&next, &end)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, true, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("raw conversion: %w", err)
	}
	type row struct {
		seq    int64
		id     string
		old    any // raw as read: text, or a blob of rawFormatV1
		packed []byte
	}
	var list []row
	last := end
	// Read and compress on this goroutine, off the writer.
	err = func() error {
		rows, err := db.read.QueryContext(ctx, `SELECT seq, id, site_id, type, anon_id, user_id, url, referrer, raw, ts, received_at
			FROM events WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?`, next, end, chunk)
		if err != nil {
			return err
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			var r row
			var f rawFields
			var user, url, ref sql.NullString
			var ts, received string
			if err := rows.Scan(&r.seq, &f[0], &f[1], &f[2], &f[3], &user, &url, &ref, &r.old, &ts, &received); err != nil {
				return err
			}
			n++
			last = r.seq
			if received == "" { // rawFormatV2 or rawFormatV3 already
				continue
			}
			f[4], f[5], f[6] = user.String, url.String, ref.String
			r.id = f[0]
			text, err := decodeRaw(r.old, f)
			if err != nil {
				continue // a row that cannot be read is left as it is
			}
			if packed, received := storedRaw(text, f, ts, received); received == "" {
				r.packed = packed.([]byte)
				list = append(list, r)
			}
		}
		if n < chunk {
			last = end
		}
		return rows.Err()
	}()
	if err != nil {
		return 0, false, fmt.Errorf("raw conversion: %w", err)
	}
	// The job counts into a variable of its own, read only once the job
	// answered: should ctx end first, do returns while the job may still
	// run on the writer.
	var rewritten int64
	err = db.writer.do(ctx, func(tx *writeTx) error {
		rewritten = 0
		for _, r := range list {
			// The row may have been erased, and its seq taken by a newer
			// event, since it was read: only the row as read is rewritten.
			res, err := tx.Exec(`UPDATE events SET raw = ?, received_at = '' WHERE seq = ? AND id = ? AND raw = ?`, r.packed, r.seq, r.id, r.old)
			if err != nil {
				return err
			}
			n, _ := res.RowsAffected()
			rewritten += n
		}
		if last >= end {
			_, err := tx.Exec(`DELETE FROM raw_conversion`)
			return err
		}
		_, err := tx.Exec(`UPDATE raw_conversion SET next_seq = ? WHERE id = 1`, last)
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("raw conversion: %w", err)
	}
	return rewritten, last >= end, nil
}
