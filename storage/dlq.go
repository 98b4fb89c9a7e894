package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/tally-analytics/tally/fault"
)

// DLQRow is a quarantined event as the DLQ list shows it.
type DLQRow struct {
	ID         string
	SiteID     string
	Payload    json.RawMessage
	Error      json.RawMessage
	ReceivedAt string
}

// DLQEntry is what a replay needs of a quarantined event.
type DLQEntry struct {
	DLQRow
	UserAgent string
	// Endpoint is the intake endpoint the event came to, "events" or
	// "s2s" ("events" for rows that do not say).
	Endpoint string
}

const dlqColumns = `SELECT id, site_id, payload, error, received_at FROM dlq`

func (db *DB) dlqQuery(ctx context.Context, query string, args ...any) ([]DLQRow, error) {
	rows, err := db.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	list := []DLQRow{}
	for rows.Next() {
		var r DLQRow
		var payload, errs string
		if err := rows.Scan(&r.ID, &r.SiteID, &payload, &errs, &r.ReceivedAt); err != nil {
			return nil, err
		}
		r.Payload, r.Error = asJSON(payload), asJSON(errs)
		list = append(list, r)
	}
	return list, rows.Err()
}

// asJSON returns stored JSON text as JSON (a JSON string if it is not).
func asJSON(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

// DLQ returns a page of site's quarantined events, newest first, received
// strictly before before (no bound when zero). Like Timeline, a page never
// ends inside a group of equal received_at values, so the cursor neither
// skips nor repeats a row.
func (db *DB) DLQ(ctx context.Context, site string, limit int, before time.Time) ([]DLQRow, *string, error) {
	bound := "9999-12-31T23:59:59.999Z"
	if !before.IsZero() {
		bound = FormatTime(ceilMillisecond(before))
	}
	rows, err := db.dlqQuery(ctx, dlqColumns+` WHERE site_id = ? AND received_at < ? ORDER BY received_at DESC, `+db.d.dlqSeq()+` DESC LIMIT ?`,
		site, bound, limit+1)
	if err != nil || len(rows) <= limit {
		return rows, nil, err
	}
	edge := rows[limit-1].ReceivedAt
	page := rows[:0:0]
	for _, r := range rows[:limit] {
		if r.ReceivedAt != edge {
			page = append(page, r)
		}
	}
	tied, err := db.dlqQuery(ctx, dlqColumns+` WHERE site_id = ? AND received_at = ? ORDER BY `+db.d.dlqSeq()+` DESC`, site, edge)
	if err != nil {
		return nil, nil, err
	}
	page = append(page, tied...)
	// A bool scans SQLite's 0/1 and PostgreSQL's boolean alike.
	var more bool
	if err := db.read.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM dlq WHERE site_id = ? AND received_at < ?)`, site, edge).Scan(&more); err != nil {
		return nil, nil, err
	}
	if !more {
		return page, nil, nil
	}
	return page, &edge, nil
}

// DLQEntry returns one quarantined event of site, or not_found.
func (db *DB) DLQEntry(ctx context.Context, site, id string) (*DLQEntry, error) {
	var e DLQEntry
	var payload, errs string
	var ua, endpoint *string
	err := db.read.QueryRowContext(ctx, `SELECT id, site_id, payload, error, received_at, user_agent, endpoint FROM dlq WHERE site_id = ? AND id = ?`,
		site, id).Scan(&e.ID, &e.SiteID, &payload, &errs, &e.ReceivedAt, &ua, &endpoint)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fault.Errorf(fault.NotFound, "no quarantined event with that id on this site")
	}
	if err != nil {
		return nil, err
	}
	e.Payload, e.Error = json.RawMessage(payload), asJSON(errs)
	if ua != nil {
		e.UserAgent = *ua
	}
	e.Endpoint = "events"
	if endpoint != nil && *endpoint != "" {
		e.Endpoint = *endpoint
	}
	return &e, nil
}

// CookielessQuarantine reports whether site's DLQ holds event id in
// cookieless form with anon_id anon, i.e. whether an event arriving with
// that id and anon id is the replay of such a row, already rewritten; it
// returns the row's browser, OS and device type.
func (db *DB) CookielessQuarantine(ctx context.Context, site, id, anon string) (QuarantinedAgent, bool, error) {
	var browser, os, device *string
	err := db.read.QueryRowContext(ctx, `SELECT browser, os, device_type FROM dlq WHERE site_id = ? AND id = ? AND anon_id = ? AND cookieless = 1`,
		site, id, anon).Scan(&browser, &os, &device)
	if errors.Is(err, sql.ErrNoRows) {
		return QuarantinedAgent{}, false, nil
	}
	if err != nil {
		return QuarantinedAgent{}, false, err
	}
	deref := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	return QuarantinedAgent{Browser: deref(browser), OS: deref(os), DeviceType: deref(device)}, true, nil
}

// FinishReplay records a replay the collector accepted, audited as
// dlq.replay in the same transaction. When the collector quarantined the
// event again (requarantined), its fresh DLQ row is kept. Otherwise the row
// is deleted, but only as it was read: should its received_at have changed
// meanwhile (quarantined again by another request), the newer row stays.
// It reports whether the row is gone. A site deleted since the caller
// looked it up gets ErrSiteGone and nothing written.
func (db *DB) FinishReplay(ctx context.Context, actor Actor, site *Site, e *DLQEntry, replayedAt time.Time, requarantined bool) (deleted bool, err error) {
	err = db.writer.do(ctx, func(tx *writeTx) error {
		deleted = false
		if err := db.checkSite(site); err != nil {
			return err
		}
		if !requarantined {
			res, err := tx.Exec(`DELETE FROM dlq WHERE site_id = ? AND id = ? AND received_at = ?`, site.ID, e.ID, e.ReceivedAt)
			if err != nil {
				return err
			}
			n, _ := res.RowsAffected()
			deleted = n > 0
		}
		return db.audit(tx, site.WorkspaceID, actor, "dlq.replay", e.ID, map[string]any{
			"replayed_at": FormatTime(replayedAt), "requarantined": !deleted})
	})
	return deleted, err
}

// DLQSize counts the rows of the dead-letter queue.
func (db *DB) DLQSize(ctx context.Context) (int, error) {
	var n int
	err := db.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM dlq`).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}
