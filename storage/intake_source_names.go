package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/tally-analytics/tally/privacy"
)

// A visit's source is Plausible's (docs/intake.md#source-names): its
// utm_source, else its referrer's host, each named as the referrer list
// names it ("google.de" and "GOOGLE" are "Google"). The writer stores the
// name in source_text where the list knows one; sessions.source, a
// generated column, reads source_text, else utm_source, else the host, so
// an unknown source costs no byte. Rows stored before migration 0026 hold
// hosts: the backfill below names them.

// visitSourceName is the name a visit's source is stored under, "" where
// the generated column's value (utm, else the referrer's host) is already
// its source: utm is the landing's utm_source, referrer the visit's
// (visitReferrer's form: host, then path).
func visitSourceName(utm, referrer string) string {
	if utm != "" {
		if n, ok := privacy.UTMSourceName(utm); ok && n != utm {
			return n
		}
		return ""
	}
	lookup := privacy.SourceName
	host := referrer
	if rest, ok := strings.CutPrefix(host, "android-app://"); ok {
		host, lookup = rest, privacy.AppSourceName
	}
	if i := strings.IndexByte(host, '/'); i >= 0 {
		host = host[:i]
	}
	if n, ok := lookup(host); ok {
		return n
	}
	return ""
}

// sourceNamesChunk is how many sessions one writer job of the backfill
// covers: they are read and named off the writer, so the job is at most
// that many updates by id, a few milliseconds of the writer.
const sourceNamesChunk = 500

// sourceNamesBackfill names the sources of the sessions stored before
// migration 0026, a chunk of ids per writer job, from the lowest id up. It
// runs after the session times conversion, which clears a source stored
// before 0016. It is a job rather than an UPDATE in the migration because
// the names come from the list in Go (a host's parent domains, any
// top-level domain), and so that no migration holds the writer over every
// session of a large database.
func (db *DB) sourceNamesBackfill(chunk int) conversion {
	if chunk == 0 {
		chunk = sourceNamesChunk
	}
	return conversion{Name: "source names backfill", Done: "source names backfilled", Unit: "sessions",
		Chunk: chunk, Step: db.backfillSourceNames}
}

// backfillSourceNames names the next chunk's sources; done reports that no
// backfill remains. A row whose utm_source or referrer intake changed
// since it was read is left alone (intake named it then).
func (db *DB) backfillSourceNames(ctx context.Context, chunk int) (written int64, done bool, err error) {
	var next, end int64
	err = db.read.QueryRowContext(ctx, `SELECT next_id, end_id FROM source_names_backfill WHERE id = 1`).Scan(&next, &end)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, true, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("source names backfill: %w", err)
	}
	type named struct {
		id                        int64
		site, day, utm, ref, name string
	}
	var list []named
	last := end
	rows, err := db.read.QueryContext(ctx, `SELECT id, site_id, started_at, coalesce(utm_source, ''), coalesce(referrer, ''),
		coalesce(source_text, '') FROM sessions WHERE id > ? AND id <= ? ORDER BY id LIMIT ?`, next, end, chunk)
	if err != nil {
		return 0, false, fmt.Errorf("source names backfill: %w", err)
	}
	n := 0
	for rows.Next() {
		var r named
		var stored string
		if err := rows.Scan(&r.id, &r.site, &r.day, &r.utm, &r.ref, &stored); err != nil {
			rows.Close()
			return 0, false, fmt.Errorf("source names backfill: %w", err)
		}
		n++
		if n == chunk {
			last = r.id
		}
		if r.name = visitSourceName(r.utm, r.ref); r.name != stored {
			r.day = r.day[:min(len(r.day), 10)]
			list = append(list, r)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, false, fmt.Errorf("source names backfill: %w", err)
	}
	// The job counts into a variable of its own, read only once the job
	// answered (see convertRawChunk).
	var w int64
	err = db.writer.do(ctx, func(tx *writeTx) error {
		w = 0
		if len(list) > 0 {
			st, err := tx.Prepare(`UPDATE sessions SET source_text = ? WHERE id = ? AND coalesce(utm_source, '') = ? AND coalesce(referrer, '') = ?`)
			if err != nil {
				return err
			}
			defer st.Close()
			// A renamed source changes its start day's figures, which that
			// day's partials (partial_days.go) hold.
			touched := map[[2]string]bool{}
			for _, r := range list {
				res, err := st.Exec(nullable(r.name), r.id, r.utm, r.ref)
				if err != nil {
					return err
				}
				if k, _ := res.RowsAffected(); k > 0 {
					w += k
					touched[[2]string{r.site, r.day}] = true
				}
			}
			if err := dropDays(tx, func(args ...any) error { _, err := tx.Exec(dropPartialsSQL, args...); return err }, touched); err != nil {
				return err
			}
		}
		if last >= end {
			_, err := tx.Exec(`DELETE FROM source_names_backfill`)
			return err
		}
		_, err := tx.Exec(`UPDATE source_names_backfill SET next_id = ? WHERE id = 1`, last)
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("source names backfill: %w", err)
	}
	return w, last >= end, nil
}
