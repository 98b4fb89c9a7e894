package storage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
)

// Subject is the person of a GDPR request: exactly one of AnonID and
// UserID is set.
type Subject struct {
	AnonID string `json:"anon_id,omitempty"`
	UserID string `json:"user_id,omitempty"`
}

// kind is "anon_id" or "user_id".
func (s Subject) kind() string {
	if s.UserID != "" {
		return "user_id"
	}
	return "anon_id"
}

// Hash is what the audit log keeps of the subject: the first 12 hex
// characters of the SHA-256 of the bare id.
func (s Subject) Hash() string {
	id := s.AnonID
	if s.UserID != "" {
		id = s.UserID
	}
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])[:12]
}

// SubjectCounts counts a subject's rows per table.
type SubjectCounts struct {
	Events        int64 `json:"events"`
	Sessions      int64 `json:"sessions"`
	UserProfiles  int64 `json:"user_profiles"`
	IdentityLinks int64 `json:"identity_links"`
}

// SubjectExport holds every row of a subject, complete (events with raw).
type SubjectExport struct {
	Counts        SubjectCounts    `json:"counts"`
	Events        []map[string]any `json:"events"`
	Sessions      []map[string]any `json:"sessions"`
	UserProfiles  []map[string]any `json:"user_profiles"`
	IdentityLinks []map[string]any `json:"identity_links"`
}

// subjectScope is which rows belong to a subject on a site, as SPEC's
// GDPR section resolves it.
type subjectScope struct {
	site    string
	anonIDs []string // events and sessions
	userIDs []string // user_profiles
	// links and dlq: a WHERE clause on those tables with its arguments.
	linkWhere string
	linkArgs  []any
	dlqWhere  string
	dlqArgs   []any
}

// resolve finds the subject's anon and user ids: by user id, every anon id
// ever linked to the user; by anon id, that anon id, and the users linked
// to it (whose profiles go too).
func resolve(tx *Tx, site string, s Subject) (*subjectScope, error) {
	sc := &subjectScope{site: site}
	var q string
	var arg string
	if s.UserID != "" {
		q, arg = `SELECT anon_id FROM identity_links WHERE site_id = ? AND user_id = ?`, s.UserID
		sc.userIDs = []string{s.UserID}
	} else {
		q, arg = `SELECT user_id FROM identity_links WHERE site_id = ? AND anon_id = ?`, s.AnonID
		sc.anonIDs = []string{s.AnonID}
	}
	rows, err := tx.Query(q, site, arg)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		if s.UserID != "" {
			sc.anonIDs = append(sc.anonIDs, id)
		} else {
			sc.userIDs = append(sc.userIDs, id)
		}
	}
	rows.Close()
	if s.UserID != "" {
		sc.linkWhere, sc.linkArgs = `site_id = ? AND user_id = ?`, []any{site, s.UserID}
		sc.dlqWhere, sc.dlqArgs = `site_id = ? AND (user_id = ?`, []any{site, s.UserID}
		if len(sc.anonIDs) > 0 {
			sc.dlqWhere += ` OR anon_id IN (` + placeholders(len(sc.anonIDs)) + `)`
			sc.dlqArgs = append(sc.dlqArgs, strs(sc.anonIDs)...)
		}
		sc.dlqWhere += `)`
	} else {
		sc.linkWhere, sc.linkArgs = `site_id = ? AND anon_id = ?`, []any{site, s.AnonID}
		sc.dlqWhere, sc.dlqArgs = `site_id = ? AND anon_id = ?`, []any{site, s.AnonID}
	}
	return sc, nil
}

func strs(ids []string) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// in returns "site_id = ? AND col IN (...)" and its arguments; with no ids
// it matches nothing.
func (sc *subjectScope) in(col string, ids []string) (string, []any) {
	if len(ids) == 0 {
		return `0`, nil
	}
	return `site_id = ? AND ` + col + ` IN (` + placeholders(len(ids)) + `)`, append([]any{sc.site}, strs(ids)...)
}

// ExportSubject returns every row of the subject on site, audited as
// gdpr.export in the same transaction; ErrSiteGone when the site was deleted
// since the caller looked it up.
func (db *DB) ExportSubject(ctx context.Context, actor Actor, site *Site, s Subject) (*SubjectExport, error) {
	var out *SubjectExport
	err := db.writer.Do(ctx, func(tx *Tx) error {
		if err := db.checkSite(site); err != nil {
			return err
		}
		sc, err := resolve(tx, site.ID, s)
		if err != nil {
			return err
		}
		out = &SubjectExport{}
		evWhere, evArgs := sc.in("anon_id", sc.anonIDs)
		upWhere, upArgs := sc.in("user_id", sc.userIDs)
		for _, part := range []struct {
			dst       *[]map[string]any
			query     string
			args      []any
			jsonCols  []string
			countInto *int64
		}{
			{&out.Events, `SELECT id, site_id, type, url, ts, anon_id, user_id, referrer, country, city, browser, os, device_type, raw, received_at
				FROM events WHERE ` + evWhere + ` ORDER BY ts, seq`, evArgs, []string{"raw"}, &out.Counts.Events},
			{&out.Sessions, `SELECT * FROM sessions WHERE ` + evWhere + ` ORDER BY started_at`, evArgs, nil, &out.Counts.Sessions},
			{&out.UserProfiles, `SELECT * FROM user_profiles WHERE ` + upWhere, upArgs, []string{"traits"}, &out.Counts.UserProfiles},
			{&out.IdentityLinks, `SELECT * FROM identity_links WHERE ` + sc.linkWhere + ` ORDER BY created_at, anon_id`, sc.linkArgs, nil, &out.Counts.IdentityLinks},
		} {
			rows, err := tx.Query(part.query, part.args...)
			if err != nil {
				return fmt.Errorf("export: %w", err)
			}
			list, err := scanRows(rows, part.jsonCols...)
			rows.Close()
			if err != nil {
				return err
			}
			*part.dst = list
			*part.countInto = int64(len(list))
		}
		return db.audit(tx, site.WorkspaceID, actor, "gdpr.export", site.ID, map[string]any{
			"subject_kind": s.kind(), "subject_hash": s.Hash(), "counts": out.Counts})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// EraseSubject hard-deletes the subject's rows of events, sessions,
// user_profiles and identity_links, and the DLQ rows tagged with the
// subject, in one transaction with the gdpr.delete audit row (which keeps
// only a hash of the id). The daily rollups lose the erased events and
// sessions in the same transaction, so counts stay exact. A repeat finds
// nothing and returns zero counts. A site deleted since the caller looked it
// up gets ErrSiteGone: a later site with the id keeps its subjects.
func (db *DB) EraseSubject(ctx context.Context, actor Actor, site *Site, s Subject) (SubjectCounts, error) {
	var counts SubjectCounts
	err := db.writer.Do(ctx, func(tx *Tx) error {
		counts = SubjectCounts{}
		if err := db.checkSite(site); err != nil {
			return err
		}
		sc, err := resolve(tx, site.ID, s)
		if err != nil {
			return err
		}
		evWhere, evArgs := sc.in("anon_id", sc.anonIDs)
		if err := db.unrollEvents(tx, site.ID, evWhere, evArgs); err != nil {
			return err
		}
		if err := db.unrollSessions(tx, site.ID, evWhere, evArgs); err != nil {
			return err
		}
		upWhere, upArgs := sc.in("user_id", sc.userIDs)
		for _, d := range []struct {
			table, where string
			args         []any
			n            *int64
		}{
			{"events", evWhere, evArgs, &counts.Events},
			{"sessions", evWhere, evArgs, &counts.Sessions},
			{"user_profiles", upWhere, upArgs, &counts.UserProfiles},
			{"identity_links", sc.linkWhere, sc.linkArgs, &counts.IdentityLinks},
			{"dlq", sc.dlqWhere, sc.dlqArgs, new(int64)},
		} {
			res, err := tx.Exec(`DELETE FROM `+d.table+` WHERE `+d.where, d.args...)
			if err != nil {
				return fmt.Errorf("erase %s: %w", d.table, err)
			}
			*d.n, _ = res.RowsAffected()
		}
		return db.audit(tx, site.WorkspaceID, actor, "gdpr.delete", site.ID, map[string]any{
			"subject_kind": s.kind(), "subject_hash": s.Hash(), "counts": counts})
	})
	return counts, err
}

// unrollEvents subtracts the matching events from daily_events.
func (db *DB) unrollEvents(tx *Tx, site, where string, args []any) error {
	rows, err := tx.Query(`SELECT substr(ts, 1, 10), type, COUNT(*) FROM events WHERE `+where+` GROUP BY 1, 2`, args...)
	if err != nil {
		return err
	}
	type dayType struct {
		day, typ string
		n        int64
	}
	var list []dayType
	for rows.Next() {
		var d dayType
		if err := rows.Scan(&d.day, &d.typ, &d.n); err != nil {
			rows.Close()
			return err
		}
		list = append(list, d)
	}
	rows.Close()
	for _, d := range list {
		if _, err := tx.Exec(`UPDATE daily_events SET count = MAX(count - ?, 0) WHERE site_id = ? AND day = ? AND type = ?`, d.n, site, d.day, d.typ); err != nil {
			return err
		}
	}
	// The pageviews' breakdown values.
	rows, err = tx.Query(`SELECT substr(ts, 1, 10), url, referrer, COALESCE(country, ''), COALESCE(browser, ''), COALESCE(os, ''),
		COALESCE(device_type, '') FROM events WHERE type = 'pageview' AND `+where, args...)
	if err != nil {
		return err
	}
	dims := map[dimKey]int{}
	for rows.Next() {
		var day, country, browser, os, device string
		var u, ref *string
		if err := rows.Scan(&day, &u, &ref, &country, &browser, &os, &device); err != nil {
			rows.Close()
			return err
		}
		for d, v := range dimensionValues(u, ref, country, browser, os, device) {
			dims[dimKey{site, day, Dimensions[d], v}]++
		}
	}
	rows.Close()
	for k, n := range dims {
		if _, err := tx.Exec(`UPDATE daily_dimensions SET count = MAX(count - ?, 0) WHERE site_id = ? AND day = ? AND dimension = ? AND value = ?`,
			n, k.site, k.day, k.dim, k.value); err != nil {
			return err
		}
	}
	return nil
}

// unrollSessions subtracts the matching sessions from daily_sessions.
func (db *DB) unrollSessions(tx *Tx, site, where string, args []any) error {
	rows, err := tx.Query(`SELECT started_at, ended_at, event_count FROM sessions WHERE `+where, args...)
	if err != nil {
		return err
	}
	deltas := map[string]*sessionDelta{}
	for rows.Next() {
		var start, end string
		var count int64
		if err := rows.Scan(&start, &end, &count); err != nil {
			rows.Close()
			return err
		}
		s, _ := time.Parse(TimeLayout, start)
		e, _ := time.Parse(TimeLayout, end)
		d := deltas[start[:10]]
		if d == nil {
			d = &sessionDelta{}
			deltas[start[:10]] = d
		}
		d.sessions++
		d.durationMS += e.Sub(s).Milliseconds()
		d.events += count
		if count == 1 {
			d.bounces++
		}
	}
	rows.Close()
	for day, d := range deltas {
		if _, err := tx.Exec(`UPDATE daily_sessions SET sessions = sessions - ?, duration_ms = duration_ms - ?,
			events = events - ?, bounces = bounces - ? WHERE site_id = ? AND day = ?`,
			d.sessions, d.durationMS, d.events, d.bounces, site, day); err != nil {
			return err
		}
	}
	return nil
}
