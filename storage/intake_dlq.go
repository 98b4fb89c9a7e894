package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"sync"
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

// replayClaim is how long a replay's claim on a DLQ entry holds on
// PostgreSQL should its instance stop without releasing it: three times
// the longest a replay waits for the collector (10 s).
const replayClaim = 30 * time.Second

// replayClaims are the DLQ entries (site, id) this process is replaying.
type replayClaims struct {
	mu sync.Mutex
	on map[[2]string]bool
}

// errReplayInProgress answers a replay of an entry another request is
// replaying.
var errReplayInProgress = &fault.Error{Code: fault.ReplayInProgress, RetryAfter: 1,
	Message: "another request is replaying this event; it stays in the DLQ until that replay ends"}

// ClaimReplay claims e, as read, for one replay, and returns the release to
// call once the replay ended, whatever its outcome. A replay of the entry
// under way elsewhere, in this process or (on PostgreSQL) in another
// instance, is replay_in_progress; an entry gone meanwhile is not_found. On
// PostgreSQL a claim its instance never released expires after
// replayClaim (docs/intake.md#dead-letter-queue).
func (db *DB) ClaimReplay(ctx context.Context, site string, e *DLQEntry) (release func(), err error) {
	key := [2]string{site, e.ID}
	rc := &db.replays
	rc.mu.Lock()
	if rc.on[key] {
		rc.mu.Unlock()
		return nil, errReplayInProgress
	}
	if rc.on == nil {
		rc.on = map[[2]string]bool{}
	}
	rc.on[key] = true
	rc.mu.Unlock()
	local := func() {
		rc.mu.Lock()
		delete(rc.on, key)
		rc.mu.Unlock()
	}
	claimed, until, err := db.coord().claimReplay(ctx, site, e.ID, e.ReceivedAt, db.now())
	if err != nil || !claimed {
		local()
		if err != nil {
			return nil, err
		}
		var n int
		if err := db.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM dlq WHERE site_id = ? AND id = ?`, site, e.ID).Scan(&n); err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fault.Errorf(fault.NotFound, "no quarantined event with that id on this site")
		}
		return nil, errReplayInProgress
	}
	return func() {
		// A release that fails leaves the claim to expire.
		db.coord().releaseReplay(context.WithoutCancel(ctx), site, e.ID, until)
		local()
	}, nil
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
