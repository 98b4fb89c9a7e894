package storage

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

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
	// Sites restricts the key to these sites of its workspace; nil means
	// every site. A deleted site leaves the list, so an empty (non-nil)
	// list reaches no site (docs/api.md#authentication).
	Sites []string

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

// Restricted reports whether the key is limited to some sites.
func (k *APIKey) Restricted() bool { return k.Sites != nil }

// AllowsSite reports whether the key may address site id; an unrestricted
// key may address every site of its workspace (the caller checks that).
func (k *APIKey) AllowsSite(id string) bool {
	return k.Sites == nil || slices.Contains(k.Sites, id)
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

// normalizeSites checks a key's site restriction against ws (nil: every
// site; else a non-empty list of ws's sites) and folds duplicates, keeping
// first-seen order. It returns the sites, for checkSite in the writer.
func (db *DB) normalizeSites(ws *Workspace, ids []string) ([]string, []*Site, error) {
	if ids == nil {
		return nil, nil, nil
	}
	if len(ids) == 0 {
		return nil, nil, fault.Errorf(fault.InvalidSites, "sites must be a non-empty array of site ids of this workspace, or absent for every site")
	}
	out, sites := []string{}, []*Site{}
	for _, id := range ids {
		if slices.Contains(out, id) {
			continue
		}
		s, ok := db.Site(id)
		if !ok || s.WorkspaceID != ws.ID {
			return nil, nil, UnknownSiteFault(id)
		}
		out, sites = append(out, id), append(sites, s)
	}
	return out, sites, nil
}

// UnknownSiteFault is the answer to a key restriction naming a site that
// is not in the workspace (or, for a restricted creator, not in its own
// restriction: the same answer, so other sites cannot be probed).
func UnknownSiteFault(id string) error {
	return fault.Errorf(fault.InvalidSites, "sites: no site %q in this workspace", id)
}

// CreateKey makes a key for ws that may address every site of it; see
// CreateKeyForSites.
func (db *DB) CreateKey(ctx context.Context, actor Actor, ws *Workspace, label string, scopes []string) (*APIKey, string, error) {
	return db.CreateKeyForSites(ctx, actor, ws, label, scopes, nil)
}

// CreateKeyForSites makes a key for ws restricted to sites (nil: every
// site), audited as key.create. It returns the metadata and the
// plaintext, which is not kept anywhere.
func (db *DB) CreateKeyForSites(ctx context.Context, actor Actor, ws *Workspace, label string, scopes, sites []string) (*APIKey, string, error) {
	label, err := cleanText(label, fault.InvalidLabel, "label")
	if err != nil {
		return nil, "", err
	}
	scopes, err = normalizeScopes(scopes)
	if err != nil {
		return nil, "", err
	}
	sites, found, err := db.normalizeSites(ws, sites)
	if err != nil {
		return nil, "", err
	}
	plaintext := newPlaintextKey(ws.Slug)
	k := &APIKey{ID: uuid.NewString(), WorkspaceID: ws.ID, Label: label, Scopes: scopes, Sites: sites,
		CreatedAt: FormatTime(db.now()), hash: hashKey(plaintext)}
	hash := hex.EncodeToString(k.hash)
	scopesJSON, _ := json.Marshal(scopes)
	var sitesJSON *string
	if sites != nil {
		b, _ := json.Marshal(sites)
		sitesJSON = new(string)
		*sitesJSON = string(b)
	}
	err = db.writer.do(ctx, func(tx *writeTx) error {
		// A site deleted since the check above would stay in the list:
		// DeleteSite drops it from keys only in its last transaction, and
		// hides it before its first, so one still visible here is dropped
		// from this key too.
		for _, s := range found {
			if db.checkSite(s) != nil {
				return UnknownSiteFault(s.ID)
			}
		}
		if _, err := tx.Exec(`INSERT INTO api_keys(id, workspace_id, label, scopes, key_hash, created_at, sites) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			k.ID, k.WorkspaceID, k.Label, string(scopesJSON), hash, k.CreatedAt, sitesJSON); err != nil {
			return err
		}
		if err := db.audit(tx, ws.ID, actor, "key.create", k.ID, map[string]any{"label": label, "scopes": scopes, "sites": sites}); err != nil {
			return err
		}
		if err := db.coord().notify(tx, "key", k.ID); err != nil {
			return err
		}
		tx.OnCommit(func() {
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
		if err := db.coord().notify(tx, "key", keyID); err != nil {
			return err
		}
		tx.OnCommit(func() {
			db.tenants.mu.Lock()
			delete(db.keysByHash, hash)
			db.tenants.mu.Unlock()
		})
		return nil
	})
}

const keyColumns = `SELECT id, workspace_id, label, scopes, created_at, last_used_at, revoked_at, key_hash, sites FROM api_keys`

func scanKey(rows *sql.Rows) (*APIKey, string, error) {
	k := &APIKey{}
	var scopes, hash string
	var sites *string
	if err := rows.Scan(&k.ID, &k.WorkspaceID, &k.Label, &scopes, &k.CreatedAt, &k.LastUsedAt, &k.RevokedAt, &hash, &sites); err != nil {
		return nil, "", err
	}
	if err := json.Unmarshal([]byte(scopes), &k.Scopes); err != nil {
		return nil, "", fmt.Errorf("key %s: bad scopes column: %w", k.ID, err)
	}
	if sites != nil {
		k.Sites = []string{}
		if err := json.Unmarshal([]byte(*sites), &k.Sites); err != nil || k.Sites == nil {
			return nil, "", fmt.Errorf("key %s: bad sites column: %v", k.ID, err)
		}
	}
	return k, hash, nil
}

// dropSiteFromKeys removes site id of workspace wsID from every key
// restricted to it, in tx, the transaction that deletes the site; after
// the commit, the cached keys follow. A cached key is replaced, never
// changed, since requests in flight hold it.
//
// The lists are read, edited and written back from Go, not by SQLite's
// json_each, so the statements are plain SQL (issue 17). Site ids need no
// escapes in JSON, so json.Marshal writes the text SQLite's
// json_group_array wrote.
func (db *DB) dropSiteFromKeys(tx *writeTx, wsID, id string) error {
	rows, err := tx.Query(`SELECT id, sites FROM api_keys WHERE workspace_id = ? AND sites IS NOT NULL ORDER BY id`, wsID)
	if err != nil {
		return fmt.Errorf("drop site from keys: %w", err)
	}
	type edit struct{ key, sites string }
	var edits []edit
	for rows.Next() {
		var key, text string
		if err := rows.Scan(&key, &text); err != nil {
			rows.Close()
			return fmt.Errorf("drop site from keys: %w", err)
		}
		var sites []string
		if err := json.Unmarshal([]byte(text), &sites); err != nil {
			rows.Close()
			return fmt.Errorf("drop site from keys: key %s: bad sites column: %w", key, err)
		}
		if !slices.Contains(sites, id) {
			continue
		}
		b, _ := json.Marshal(slices.DeleteFunc(sites, func(s string) bool { return s == id }))
		edits = append(edits, edit{key, string(b)})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("drop site from keys: %w", err)
	}
	for _, e := range edits {
		if _, err := tx.Exec(`UPDATE api_keys SET sites = ? WHERE id = ?`, e.sites, e.key); err != nil {
			return fmt.Errorf("drop site from keys: %w", err)
		}
	}
	tx.OnCommit(func() {
		db.tenants.mu.Lock()
		defer db.tenants.mu.Unlock()
		for hash, k := range db.keysByHash {
			if k.WorkspaceID != wsID || !k.Restricted() || !slices.Contains(k.Sites, id) {
				continue
			}
			c := *k
			c.Sites = slices.DeleteFunc(slices.Clone(k.Sites), func(s string) bool { return s == id })
			db.keysByHash[hash] = &c
		}
	})
	return nil
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
