package storage

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/tally-analytics/tally/fault"
)

// APIKey is a workspace-scoped credential's metadata (never its plaintext).
type APIKey struct {
	ID          string
	WorkspaceID string
	Label       string
	Scopes      []string
	CreatedAt   string
	LastUsedAt  *string
	RevokedAt   *string

	hash []byte // SHA-256 of the plaintext
}

// HasScope reports whether the key grants scope; admin grants every scope.
func (k *APIKey) HasScope(scope string) bool {
	for _, s := range k.Scopes {
		if s == scope || s == ScopeAdmin {
			return true
		}
	}
	return false
}

// Scopes of API keys.
const (
	ScopeIngestWrite = "ingest:write"
	ScopeQueryRead   = "query:read"
	ScopeAdmin       = "admin"
)

// normalizeScopes checks scopes (non-empty, known) and folds duplicates,
// keeping first-seen order.
func normalizeScopes(scopes []string) ([]string, error) {
	if len(scopes) == 0 {
		return nil, fault.Errorf(fault.InvalidScopes, "scopes must be a non-empty array of %q, %q or %q", ScopeIngestWrite, ScopeQueryRead, ScopeAdmin)
	}
	seen := map[string]bool{}
	out := []string{}
	for _, s := range scopes {
		switch s {
		case ScopeIngestWrite, ScopeQueryRead, ScopeAdmin:
		default:
			return nil, fault.Errorf(fault.InvalidScopes, "unknown scope %q; allowed: %q, %q, %q", s, ScopeIngestWrite, ScopeQueryRead, ScopeAdmin)
		}
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out, nil
}

// CreateKey makes a key for ws, audited as key.create. It returns the
// metadata and the plaintext, which is not kept anywhere.
func (db *DB) CreateKey(ctx context.Context, actor Actor, ws *Workspace, label string, scopes []string) (*APIKey, string, error) {
	label, err := cleanText(label, fault.InvalidLabel, "label")
	if err != nil {
		return nil, "", err
	}
	scopes, err = normalizeScopes(scopes)
	if err != nil {
		return nil, "", err
	}
	plaintext := newPlaintextKey(ws.Slug)
	k := &APIKey{ID: uuid.NewString(), WorkspaceID: ws.ID, Label: label, Scopes: scopes,
		CreatedAt: FormatTime(db.now()), hash: hashKey(plaintext)}
	hash := hex.EncodeToString(k.hash)
	scopesJSON, _ := json.Marshal(scopes)
	err = db.writer.do(ctx, func(tx *writeTx) error {
		if _, err := tx.Exec(`INSERT INTO api_keys(id, workspace_id, label, scopes, key_hash, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			k.ID, k.WorkspaceID, k.Label, string(scopesJSON), hash, k.CreatedAt); err != nil {
			return err
		}
		if err := db.audit(tx, ws.ID, actor, "key.create", k.ID, map[string]any{"label": label, "scopes": scopes}); err != nil {
			return err
		}
		tx.onCommit(func() {
			db.tenants.mu.Lock()
			db.keysByHash[hash] = k
			db.tenants.mu.Unlock()
		})
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return k, plaintext, nil
}

// RevokeKey soft-deletes an active key of ws, audited as key.revoke. An
// unknown or already revoked key is not_found.
func (db *DB) RevokeKey(ctx context.Context, actor Actor, ws *Workspace, keyID string) error {
	now := FormatTime(db.now())
	return db.writer.do(ctx, func(tx *writeTx) error {
		var hash string
		err := tx.QueryRow(`SELECT key_hash FROM api_keys WHERE id = ? AND workspace_id = ? AND revoked_at IS NULL`,
			keyID, ws.ID).Scan(&hash)
		if errors.Is(err, sql.ErrNoRows) {
			return fault.Errorf(fault.NotFound, "key not found")
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(`UPDATE api_keys SET revoked_at = ? WHERE id = ?`, now, keyID); err != nil {
			return err
		}
		if err := db.audit(tx, ws.ID, actor, "key.revoke", keyID, map[string]any{}); err != nil {
			return err
		}
		tx.onCommit(func() {
			db.tenants.mu.Lock()
			delete(db.keysByHash, hash)
			db.tenants.mu.Unlock()
		})
		return nil
	})
}

const keyColumns = `SELECT id, workspace_id, label, scopes, created_at, last_used_at, revoked_at, key_hash FROM api_keys`

func scanKey(rows *sql.Rows) (*APIKey, string, error) {
	k := &APIKey{}
	var scopes, hash string
	if err := rows.Scan(&k.ID, &k.WorkspaceID, &k.Label, &scopes, &k.CreatedAt, &k.LastUsedAt, &k.RevokedAt, &hash); err != nil {
		return nil, "", err
	}
	if err := json.Unmarshal([]byte(scopes), &k.Scopes); err != nil {
		return nil, "", fmt.Errorf("key %s: bad scopes column: %w", k.ID, err)
	}
	return k, hash, nil
}

// Keys lists the keys of a workspace (active and revoked), oldest first.
// last_used_at includes uses not yet written to the database.
func (db *DB) Keys(ctx context.Context, workspaceID string) ([]APIKey, error) {
	rows, err := db.read.QueryContext(ctx, keyColumns+` WHERE workspace_id = ? ORDER BY created_at, id`, workspaceID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	list := []APIKey{}
	for rows.Next() {
		k, _, err := scanKey(rows)
		if err != nil {
			return nil, err
		}
		if t, ok := db.tenants.uses.latest(k.ID); ok && k.RevokedAt == nil {
			s := FormatTime(t)
			k.LastUsedAt = &s
		}
		list = append(list, *k)
	}
	return list, rows.Err()
}
