package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// AuditEntry is one row of the append-only audit log.
type AuditEntry struct {
	ID          string
	WorkspaceID string
	ActorKind   string
	ActorID     *string
	Action      string
	Target      *string
	Metadata    json.RawMessage
	TS          string
}

// audit appends an entry inside tx, so it commits or rolls back with the
// mutation it records. Its ts is now, moved 1 ms past the workspace's newest
// entry when it would collide or go backwards: entries of one workspace
// never share a ts, which keeps the ts cursor exact, across instances too.
func (db *DB) audit(tx *writeTx, workspaceID string, actor Actor, action, target string, metadata map[string]any) error {
	ts := db.now().UTC().Truncate(time.Millisecond)
	// Another instance may be writing this workspace's log: its entry
	// commits before this MAX reads (docs/postgresql.md#on-postgresql).
	if err := db.coord().lockWorkspace(tx, workspaceID); err != nil {
		return fmt.Errorf("lock the audit log: %w", err)
	}
	var newest *string
	if err := tx.QueryRow(`SELECT MAX(ts) FROM audit_log WHERE workspace_id = ?`, workspaceID).Scan(&newest); err != nil {
		return fmt.Errorf("read newest audit ts: %w", err)
	}
	if newest != nil {
		last, err := time.Parse(timeLayout, *newest)
		if err != nil {
			return fmt.Errorf("bad audit ts %q: %w", *newest, err)
		}
		if !ts.After(last) {
			ts = last.Add(time.Millisecond)
		}
	}
	if metadata == nil {
		metadata = map[string]any{}
	}
	if actor.isUser() {
		metadata["actor"] = "user"
	}
	meta, err := json.Marshal(metadata)
	if err != nil {
		return fmt.Errorf("encode audit metadata: %w", err)
	}
	_, err = tx.Exec(`INSERT INTO audit_log(id, workspace_id, actor_kind, actor_id, action, target, metadata, ts)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		uuid.NewString(), workspaceID, actor.Kind, nullable(actor.ID), action, nullable(target), string(meta), FormatTime(ts))
	if err != nil {
		return fmt.Errorf("append audit entry: %w", err)
	}
	return nil
}

// nullable maps "" to SQL NULL.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Audit returns up to limit entries of a workspace with ts strictly before
// before (all entries when before is zero), newest first, and the cursor of
// the next page: the ts of the last entry returned when more exist.
func (db *DB) Audit(ctx context.Context, workspaceID string, limit int, before time.Time) ([]AuditEntry, *string, error) {
	query := `SELECT id, workspace_id, actor_kind, actor_id, action, target, metadata, ts
		FROM audit_log WHERE workspace_id = ?`
	args := []any{workspaceID}
	if !before.IsZero() {
		query += ` AND ts < ?`
		args = append(args, FormatTime(ceilMillisecond(before)))
	}
	query += ` ORDER BY ts DESC LIMIT ?`
	args = append(args, limit+1)
	rows, err := db.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	entries := []AuditEntry{}
	for rows.Next() {
		var e AuditEntry
		var meta string
		if err := rows.Scan(&e.ID, &e.WorkspaceID, &e.ActorKind, &e.ActorID, &e.Action, &e.Target, &meta, &e.TS); err != nil {
			return nil, nil, err
		}
		e.Metadata = json.RawMessage(meta)
		entries = append(entries, e)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	var next *string
	if len(entries) > limit {
		entries = entries[:limit]
		next = &entries[limit-1].TS
	}
	return entries, next, nil
}

// ceilMillisecond rounds t up to a whole millisecond, so that "strictly
// before t" over millisecond timestamps keeps an entry at t's millisecond
// when t carries a finer fraction after it.
func ceilMillisecond(t time.Time) time.Time {
	r := t.Truncate(time.Millisecond)
	if r.Before(t) {
		r = r.Add(time.Millisecond)
	}
	return r
}

// Actor kinds recorded in the audit log (a closed set of the contract).
const (
	ActorAdmin  = "admin"
	ActorAPIKey = "apiKey"
	ActorSystem = "system"
)

// Actor is who performed an audited action. ID is empty for the admin
// token and the system.
type Actor struct {
	Kind string
	ID   string
}

// UserActor is a signed-in user (docs/accounts.md#audit). The contract's
// actor kinds are a closed set without users, so the entry says
// actor_kind "system", actor_id the user's id, and metadata "actor":
// "user" (audit adds it for every Actor of this kind).
func UserActor(userID string) Actor { return Actor{Kind: ActorSystem, ID: userID} }

// isUser reports whether a is a signed-in user: the system never has an id.
func (a Actor) isUser() bool { return a.Kind == ActorSystem && a.ID != "" }
