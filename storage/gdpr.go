package storage

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"
)

// Subject is the person of a GDPR request: exactly one of AnonID and
// UserID is set.
type Subject struct {
	AnonID string
	UserID string
}

// kind is "anon_id" or "user_id".
func (s Subject) kind() string {
	if s.UserID != "" {
		return "user_id"
	}
	return "anon_id"
}

// id is the bare id of the subject.
func (s Subject) id() string {
	if s.UserID != "" {
		return s.UserID
	}
	return s.AnonID
}

// hash is what the audit log keeps of the subject: the first 12 hex
// characters of the SHA-256 of the bare id.
func (s Subject) hash() string {
	sum := sha256.Sum256([]byte(s.id()))
	return hex.EncodeToString(sum[:])[:12]
}

// SubjectCounts counts a subject's rows per table. Its JSON form is the
// counts of the gdpr.delete audit entry's metadata.
type SubjectCounts struct {
	Events        int64 `json:"events"`
	Sessions      int64 `json:"sessions"`
	UserProfiles  int64 `json:"user_profiles"`
	IdentityLinks int64 `json:"identity_links"`
}

// ExportCounts counts the rows of an export: the four tables a subject has rows in and
// the DLQ rows tagged with the subject, which erasure deletes too. Its JSON
// form is the counts of the gdpr.export audit entry's metadata.
type ExportCounts struct {
	SubjectCounts
	DLQ int64 `json:"dlq"`
}

// SubjectExport holds every row of a subject, complete (events with raw).
type SubjectExport struct {
	Counts        ExportCounts
	Events        []map[string]any
	Sessions      []map[string]any
	UserProfiles  []map[string]any
	IdentityLinks []map[string]any
	DLQ           []map[string]any
}

// The subject's rows of each table as SQL conditions over ?1 (the site) and
// ?2 (the subject's id), with the links read from l. A user's anon ids come
// from a subquery on the links, never from a list of parameters: a user can
// be linked to more anon ids than SQLite takes variables (32,766).

// userAnons are the anon ids linked to the user ?2.
func userAnons(l linkTables) string {
	return `SELECT anon_id FROM ` + l.byUser("") + ` WHERE site_id = ?1 AND user_id = ?2`
}

// anonUsers are the users linked to the anon id ?2.
func anonUsers(l linkTables) string {
	return `SELECT user_id FROM ` + l.any("") + ` WHERE site_id = ?1 AND anon_id = ?2`
}

// visitorWhere matches the subject's rows of events and sessions.
func (s Subject) visitorWhere(l linkTables) string {
	if s.UserID != "" {
		return `site_id = ?1 AND anon_id IN (` + userAnons(l) + `)`
	}
	return `site_id = ?1 AND anon_id = ?2`
}

// profileWhere matches the subject's user_profiles: the user's own, or
// those of the users linked to the anon id.
func (s Subject) profileWhere(l linkTables) string {
	if s.UserID != "" {
		return `site_id = ?1 AND user_id = ?2`
	}
	return `site_id = ?1 AND user_id IN (` + anonUsers(l) + `)`
}

// linkWhere matches the subject's links.
func (s Subject) linkWhere() string {
	if s.UserID != "" {
		return `site_id = ?1 AND user_id = ?2`
	}
	return `site_id = ?1 AND anon_id = ?2`
}

// linkSource is where the subject's links are searched: by user or by anon
// id.
func (s Subject) linkSource(l linkTables) string {
	if s.UserID != "" {
		return l.byUser("")
	}
	return l.any("")
}

// dlqWhere matches the DLQ rows tagged with the subject: its user id or
// one of its anon ids.
func (s Subject) dlqWhere(d dialect, l linkTables) string {
	if s.UserID != "" {
		// A union of two index searches: with OR, SQLite would scan the
		// site's whole DLQ.
		seq := d.dlqSeq()
		return seq + ` IN (SELECT ` + seq + ` FROM dlq WHERE site_id = ?1 AND user_id = ?2
			UNION SELECT d.` + seq + ` FROM ` + l.byUser("l") + ` ` + d.CrossJoin() + ` dlq d
			ON d.site_id = l.site_id AND d.anon_id = l.anon_id WHERE l.site_id = ?1 AND l.user_id = ?2)`
	}
	return `site_id = ?1 AND anon_id = ?2`
}

// ExportSubject returns every row of the subject on site, including the DLQ
// rows erasure would delete, read in one read transaction (one consistent
// snapshot, without the writer), then audits gdpr.export with the counts.
func (db *DB) ExportSubject(ctx context.Context, actor Actor, site *Site, s Subject) (*SubjectExport, error) {
	tx, err := db.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	l := db.links()
	out := &SubjectExport{}
	if out.Events, err = exportEvents(ctx, tx, db.d, site.ID, s, l); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	out.Counts.Events = int64(len(out.Events))
	// Explicit columns, the same on both backends: PostgreSQL's tables
	// have columns of their own (docs/postgresql.md#on-postgresql).
	for _, part := range []struct {
		dst      *[]map[string]any
		query    string
		jsonCols []string
		count    *int64
	}{
		{&out.Sessions, `SELECT ` + sessionExportColumns + ` FROM sessions WHERE ` + s.visitorWhere(l) + ` ORDER BY started_ms, id`, nil, &out.Counts.Sessions},
		{&out.UserProfiles, `SELECT ` + profileExportColumns + ` FROM user_profiles WHERE ` + s.profileWhere(l) + ` ORDER BY user_id`, []string{"traits"}, &out.Counts.UserProfiles},
		// created_at is Unix ms since migration 0017: shown as the text
		// it was before (below).
		{&out.IdentityLinks, `SELECT site_id, anon_id, user_id, created_at FROM ` + s.linkSource(l) + ` WHERE ` + s.linkWhere() +
			` ORDER BY ` + db.d.linkCreatedMS() + `, anon_id, user_id`, nil, &out.Counts.IdentityLinks},
		{&out.DLQ, `SELECT ` + dlqExportColumns + ` FROM dlq WHERE ` + s.dlqWhere(db.d, l) + ` ORDER BY received_at, id`, []string{"payload", "error"}, &out.Counts.DLQ},
	} {
		rows, err := tx.QueryContext(ctx, part.query, site.ID, s.id())
		if err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
		list, err := scanRows(rows, part.jsonCols...)
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
		*part.dst = list
		*part.count = int64(len(list))
	}
	tx.Rollback()
	for _, r := range out.IdentityLinks {
		r["created_at"] = linkCreatedText(r["created_at"])
	}
	err = db.writer.do(ctx, func(tx *writeTx) error {
		if err := db.checkSite(site); err != nil {
			return err
		}
		return db.audit(tx, site.WorkspaceID, actor, "gdpr.export", site.ID, map[string]any{
			"subject_kind": s.kind(), "subject_hash": s.hash(), "counts": out.Counts})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// profileExportColumns and dlqExportColumns are the columns an export
// shows of user_profiles and dlq: SQLite's, which PostgreSQL's tables
// have too (beside a few of their own).
const (
	profileExportColumns = `site_id, user_id, traits, created_at, updated_at`
	dlqExportColumns     = `id, site_id, payload, error, received_at, anon_id, user_id, endpoint, user_agent, cookieless, browser, os, device_type`
)

// eventExportColumns are the columns an export shows of events before raw
// and received_at, which rawRead reads.
var eventExportColumns = []string{"id", "site_id", "type", "url", "ts", "anon_id", "user_id", "referrer", "country", "city",
	"browser", "os", "device_type"}

// exportEvents reads the subject's events, complete: their columns, raw
// (as JSON) and received_at, through rawRead so that both backends give
// the same text.
func exportEvents(ctx context.Context, tx *sql.Tx, d dialect, site string, s Subject, l linkTables) ([]map[string]any, error) {
	r := newRawRead(d)
	rows, err := tx.QueryContext(ctx, `SELECT `+strings.Join(eventExportColumns, ", ")+`, `+r.columns()+
		` FROM events WHERE `+s.visitorWhere(l)+` ORDER BY ts, seq`, site, s.id())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []map[string]any{}
	vals := make([]sql.NullString, len(eventExportColumns))
	targets := make([]any, 0, len(vals)+10)
	for i := range vals {
		targets = append(targets, &vals[i])
	}
	targets = append(targets, r.targets()...)
	for rows.Next() {
		if err := rows.Scan(targets...); err != nil {
			return nil, err
		}
		if err := r.decode(); err != nil {
			return nil, err
		}
		row := make(map[string]any, len(vals)+2)
		for i, c := range eventExportColumns {
			if !vals[i].Valid {
				row[c] = nil
			} else {
				row[c] = vals[i].String
			}
		}
		row["raw"] = nil
		if r.Raw.Valid {
			row["raw"] = rawJSON(r.Raw.String)
		}
		row["received_at"] = nil
		if r.Received.Valid {
			row["received_at"] = r.Received.String
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// SubjectAnonIDs returns which of candidates are the subject's anon ids on
// site: the anon id itself, or those linked to the user. Each candidate is
// one index lookup, so any number of them can be asked.
func (db *DB) SubjectAnonIDs(ctx context.Context, site string, s Subject, candidates []string) (map[string]bool, error) {
	out := map[string]bool{}
	if s.UserID == "" {
		out[s.AnonID] = true
		return out, nil
	}
	q := `SELECT EXISTS (SELECT 1 FROM identity_links WHERE site_id = ?1 AND anon_id = ?2 AND user_id = ?3)`
	if db.links().old {
		q += ` OR EXISTS (SELECT 1 FROM ` + oldLinksTable + ` WHERE site_id = ?1 AND anon_id = ?2 AND user_id = ?3)`
	}
	tx, err := db.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer stmt.Close()
	for _, a := range candidates {
		// SQLite answers EXISTS with 0 or 1, PostgreSQL with a boolean:
		// both scan into a bool.
		var linked bool
		if err := stmt.QueryRowContext(ctx, site, a, s.UserID).Scan(&linked); err != nil {
			return nil, err
		}
		if linked {
			out[a] = true
		}
	}
	return out, nil
}
