package storage

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/tally-analytics/tally/fault"
)

// Workspace is the customer boundary.
type Workspace struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Slug      string `json:"slug"`
	CreatedAt string `json:"created_at"`
}

// Site is a property inside exactly one workspace.
type Site struct {
	ID          string `json:"id"`
	WorkspaceID string `json:"workspace_id"`
	Name        string `json:"name"`
	CreatedAt   string `json:"created_at"`
}

// APIKey is a workspace-scoped credential's metadata (never its plaintext).
type APIKey struct {
	ID          string   `json:"id"`
	WorkspaceID string   `json:"workspace_id"`
	Label       string   `json:"label"`
	Scopes      []string `json:"scopes"`
	CreatedAt   string   `json:"created_at"`
	LastUsedAt  *string  `json:"last_used_at"`
	RevokedAt   *string  `json:"revoked_at"`

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

// lastUsedEvery throttles last_used_at writes: an authenticated read only
// becomes a write when the stored value is this much out of date.
const lastUsedEvery = time.Minute

// tenants holds the workspaces, sites and active keys in memory. Every
// change goes through this process's writer, whose commit hooks keep these
// maps current, so credential checks never query the database.
type tenants struct {
	mu           sync.RWMutex
	wsByID       map[string]*Workspace
	wsBySlug     map[string]*Workspace
	sites        map[string]*Site
	keysByHash   map[string]*APIKey // active keys only
	lastUsed     map[string]time.Time
	lastUsedSave map[string]time.Time
}

func (db *DB) loadTenants(ctx context.Context) error {
	t := &db.tenants
	t.wsByID = map[string]*Workspace{}
	t.wsBySlug = map[string]*Workspace{}
	t.sites = map[string]*Site{}
	t.keysByHash = map[string]*APIKey{}
	t.lastUsed = map[string]time.Time{}
	t.lastUsedSave = map[string]time.Time{}

	rows, err := db.read.QueryContext(ctx, `SELECT id, name, slug, created_at FROM workspaces`)
	if err != nil {
		return fmt.Errorf("load workspaces: %w", err)
	}
	for rows.Next() {
		w := &Workspace{}
		if err := rows.Scan(&w.ID, &w.Name, &w.Slug, &w.CreatedAt); err != nil {
			rows.Close()
			return err
		}
		t.wsByID[w.ID], t.wsBySlug[w.Slug] = w, w
	}
	rows.Close()

	rows, err = db.read.QueryContext(ctx, `SELECT id, workspace_id, name, created_at FROM sites`)
	if err != nil {
		return fmt.Errorf("load sites: %w", err)
	}
	for rows.Next() {
		s := &Site{}
		if err := rows.Scan(&s.ID, &s.WorkspaceID, &s.Name, &s.CreatedAt); err != nil {
			rows.Close()
			return err
		}
		t.sites[s.ID] = s
	}
	rows.Close()

	rows, err = db.read.QueryContext(ctx, keyColumns+` WHERE revoked_at IS NULL`)
	if err != nil {
		return fmt.Errorf("load keys: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		k, hash, err := scanKey(rows)
		if err != nil {
			return err
		}
		k.hash, _ = hex.DecodeString(hash)
		t.keysByHash[hash] = k
	}
	return rows.Err()
}

var (
	slugPattern   = regexp.MustCompile(`^[a-z][a-z0-9-]{0,63}$`)
	siteIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

// cleanText trims s and checks that 1 to 128 characters remain.
func cleanText(s, code, what string) (string, error) {
	s = strings.TrimSpace(s)
	if n := utf8.RuneCountInString(s); n < 1 || n > 128 {
		return "", fault.Errorf(code, "%s must be 1 to 128 characters after trimming", what)
	}
	return s, nil
}

// Workspace returns the workspace with the given slug.
func (db *DB) Workspace(slug string) (*Workspace, bool) {
	db.tenants.mu.RLock()
	defer db.tenants.mu.RUnlock()
	w, ok := db.wsBySlug[slug]
	return w, ok
}

// WorkspaceByID returns the workspace with the given id.
func (db *DB) WorkspaceByID(id string) (*Workspace, bool) {
	db.tenants.mu.RLock()
	defer db.tenants.mu.RUnlock()
	w, ok := db.wsByID[id]
	return w, ok
}

// Workspaces lists every workspace, oldest first.
func (db *DB) Workspaces(ctx context.Context) ([]Workspace, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT id, name, slug, created_at FROM workspaces ORDER BY created_at, slug`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	list := []Workspace{}
	for rows.Next() {
		var w Workspace
		if err := rows.Scan(&w.ID, &w.Name, &w.Slug, &w.CreatedAt); err != nil {
			return nil, err
		}
		list = append(list, w)
	}
	return list, rows.Err()
}

// CreateWorkspace validates and stores a workspace, audited as
// workspace.create in the same transaction.
func (db *DB) CreateWorkspace(ctx context.Context, actor Actor, name, slug string) (*Workspace, error) {
	name, err := cleanText(name, fault.InvalidName, "name")
	if err != nil {
		return nil, err
	}
	if !slugPattern.MatchString(slug) {
		return nil, fault.Errorf(fault.InvalidSlug, "slug must match ^[a-z][a-z0-9-]{0,63}$")
	}
	w := &Workspace{ID: uuid.NewString(), Name: name, Slug: slug, CreatedAt: FormatTime(db.now())}
	err = db.writer.Do(ctx, func(tx *Tx) error {
		var n int
		if err := tx.QueryRow(`SELECT COUNT(*) FROM workspaces WHERE slug = ?`, slug).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fault.Errorf(fault.SlugTaken, "the slug %q is already used", slug)
		}
		if _, err := tx.Exec(`INSERT INTO workspaces(id, name, slug, created_at) VALUES (?, ?, ?, ?)`,
			w.ID, w.Name, w.Slug, w.CreatedAt); err != nil {
			return err
		}
		if err := db.audit(tx, w.ID, actor, "workspace.create", w.ID, map[string]any{"slug": slug, "name": name}); err != nil {
			return err
		}
		tx.OnCommit(func() {
			db.tenants.mu.Lock()
			db.wsByID[w.ID], db.wsBySlug[w.Slug] = w, w
			db.tenants.mu.Unlock()
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// UpdateWorkspace renames a workspace (its slug cannot change), audited as
// workspace.update.
func (db *DB) UpdateWorkspace(ctx context.Context, actor Actor, ws *Workspace, name string) (*Workspace, error) {
	name, err := cleanText(name, fault.InvalidName, "name")
	if err != nil {
		return nil, err
	}
	updated := *ws
	updated.Name = name
	err = db.writer.Do(ctx, func(tx *Tx) error {
		if _, err := tx.Exec(`UPDATE workspaces SET name = ?, updated_at = ? WHERE id = ?`,
			name, FormatTime(db.now()), ws.ID); err != nil {
			return err
		}
		if err := db.audit(tx, ws.ID, actor, "workspace.update", ws.ID, map[string]any{"name": name, "previous_name": ws.Name}); err != nil {
			return err
		}
		tx.OnCommit(func() {
			db.tenants.mu.Lock()
			db.wsByID[ws.ID], db.wsBySlug[ws.Slug] = &updated, &updated
			db.tenants.mu.Unlock()
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &updated, nil
}

// Site returns the site with the given id.
func (db *DB) Site(id string) (*Site, bool) {
	db.tenants.mu.RLock()
	defer db.tenants.mu.RUnlock()
	s, ok := db.sites[id]
	return s, ok
}

// checkSite refuses a write for site, run inside the writer's transaction,
// when the site is no longer the one the request looked up: deleted, or
// deleted and created again (perhaps in another workspace). DeleteSite hides
// the site before its first writer job, so a write that passes here commits
// before the delete's last transaction, which then removes what it wrote.
func (db *DB) checkSite(site *Site) error {
	cur, ok := db.Site(site.ID)
	if !ok || cur.WorkspaceID != site.WorkspaceID || cur.CreatedAt != site.CreatedAt {
		return ErrSiteGone
	}
	return nil
}

// Sites lists the sites of a workspace, ordered by id.
func (db *DB) Sites(ctx context.Context, workspaceID string) ([]Site, error) {
	rows, err := db.read.QueryContext(ctx,
		`SELECT id, workspace_id, name, created_at FROM sites WHERE workspace_id = ? ORDER BY id`, workspaceID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	list := []Site{}
	for rows.Next() {
		var s Site
		if err := rows.Scan(&s.ID, &s.WorkspaceID, &s.Name, &s.CreatedAt); err != nil {
			return nil, err
		}
		list = append(list, s)
	}
	return list, rows.Err()
}

// CreateSite validates and stores a site in ws, audited as site.create.
func (db *DB) CreateSite(ctx context.Context, actor Actor, ws *Workspace, id, name string) (*Site, error) {
	if !siteIDPattern.MatchString(id) {
		return nil, fault.Errorf(fault.InvalidSiteID, "site id must match ^[A-Za-z0-9_-]{1,64}$")
	}
	name, err := cleanText(name, fault.InvalidName, "name")
	if err != nil {
		return nil, err
	}
	s := &Site{ID: id, WorkspaceID: ws.ID, Name: name, CreatedAt: FormatTime(db.now())}
	err = db.writer.Do(ctx, func(tx *Tx) error {
		var n int
		if err := tx.QueryRow(`SELECT COUNT(*) FROM sites WHERE id = ?`, id).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fault.Errorf(fault.SiteIDTaken, "the site id %q is already used", id)
		}
		if _, err := tx.Exec(`INSERT INTO sites(id, workspace_id, name, created_at) VALUES (?, ?, ?, ?)`,
			s.ID, s.WorkspaceID, s.Name, s.CreatedAt); err != nil {
			return err
		}
		if err := db.audit(tx, ws.ID, actor, "site.create", s.ID, map[string]any{"name": name}); err != nil {
			return err
		}
		tx.OnCommit(func() {
			db.tenants.mu.Lock()
			db.sites[s.ID] = s
			db.tenants.mu.Unlock()
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// siteDataTables hold a site's data; deleting a site empties them of it so
// a later site with the same id starts clean (the audit log is kept). None
// is deleted whole: clients fill every one of them without bound, the
// rollups too (a row per distinct url, referrer or event type per day, and
// days go back as far as event timestamps do). Each says how many rows one
// writer job deletes, and either nothing (its rows go by rowid) or the
// columns of its primary key after site_id: a site's rows then lie
// together in that order and go by ranges of it, one index scan, about
// five times faster than a lookup per row.
var siteDataTables = []siteTable{
	{"events", "", siteDeleteChunk}, {"sessions", "", siteDeleteChunk},
	{"event_ids", "id", siteDeleteChunk}, {"identity_links", "", siteDeleteChunk},
	{"user_profiles", "", siteDeleteChunk}, {"dlq", "", siteDeleteChunk},
	// Rollup rows have no other index: 1,000 of them take 0.7 ms with
	// 40-character values and 2.3 ms with 500 (measured in one job).
	{"daily_events", "day, type", 1000}, {"daily_dimensions", "day, dimension, value", 1000},
	{"daily_sessions", "day", 1000}, {"site_usage", "month", 1000},
	{"webhook_secrets", "", siteDeleteChunk},
	// A map stored before migration 0008 is inline, up to 25 MiB, and
	// secure_delete overwrites it: deleting one costs about what uploading
	// it did, so one row goes per job. Later maps are parts of at most
	// 1 MiB (SourcemapPartMax), also one per job.
	{"sourcemaps", "", 1}, {"sourcemap_parts", "", 1},
}

// siteTable is one of siteDataTables.
type siteTable struct {
	table string
	// pk is the primary key after site_id, for deleting by ranges; "" to
	// delete by rowid.
	pk    string
	chunk int
}

// deleteChunk deletes up to t.chunk rows of site from t.
func (t siteTable) deleteChunk(tx *Tx, site string) (int64, error) {
	var res sql.Result
	var err error
	if t.pk == "" {
		res, err = tx.Exec(`DELETE FROM `+t.table+` WHERE rowid IN
			(SELECT rowid FROM `+t.table+` WHERE site_id = ? LIMIT ?)`, site, t.chunk)
	} else {
		last := make([]any, strings.Count(t.pk, ",")+1)
		dest := make([]any, len(last))
		for i := range last {
			dest[i] = &last[i]
		}
		err = tx.QueryRow(`SELECT `+t.pk+` FROM `+t.table+` WHERE site_id = ? ORDER BY `+t.pk+` LIMIT 1 OFFSET ?`,
			site, t.chunk-1).Scan(dest...)
		switch {
		case errors.Is(err, sql.ErrNoRows): // less than a chunk left
			res, err = tx.Exec(`DELETE FROM `+t.table+` WHERE site_id = ?`, site)
		case err == nil:
			res, err = tx.Exec(`DELETE FROM `+t.table+` WHERE site_id = ? AND (`+t.pk+`) <= (?`+
				strings.Repeat(", ?", len(last)-1)+`)`, append([]any{site}, last...)...)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("delete %s of site: %w", t.table, err)
	}
	return res.RowsAffected()
}

// siteDeleteChunk is how many rows one writer job of DeleteSite deletes
// from the tables with indexes besides the primary key, a couple of
// milliseconds of the writer, so that intake of the other sites runs
// between the chunks instead of waiting for the whole site. Measured with
// 200,000 events: 3.5 s in all, single events of another site served
// meanwhile (1,567 of them, 11 waited over 10 ms), where one transaction
// had held all intake for 1.5 s.
const siteDeleteChunk = 250

// errSiteRowsLeft makes the final job of deleteSite give way when more
// than a chunk of some table is left, so that it stays as short as a chunk.
var errSiteRowsLeft = errors.New("storage: rows of the deleted site left")

// DeleteSite deletes the site id of ws together with all its data, audited
// as site.delete with the rows removed. The site is hidden at once (intake
// and reads answer as for an unknown site), its tables are emptied in
// chunks, then one transaction deletes the site, what is left of its data
// (at most a chunk a table) and writes the audit row. It runs to the end
// even if ctx is cancelled. If the process stops midway the site is still
// there, with part of its data, and deleting it again finishes the work.
func (db *DB) DeleteSite(ctx context.Context, actor Actor, ws *Workspace, id string) error {
	db.tenants.mu.Lock()
	s, ok := db.sites[id]
	if ok && s.WorkspaceID == ws.ID {
		delete(db.sites, id)
	}
	db.tenants.mu.Unlock()
	if !ok || s.WorkspaceID != ws.ID {
		return fault.Errorf(fault.NotFound, "site not found")
	}
	err := db.deleteSite(context.WithoutCancel(ctx), actor, ws, id)
	if err != nil {
		db.tenants.mu.Lock()
		db.sites[id] = s
		db.tenants.mu.Unlock()
	}
	return err
}

func (db *DB) deleteSite(ctx context.Context, actor Actor, ws *Workspace, id string) error {
	deleted := map[string]int64{}
	for {
		for _, t := range siteDataTables {
			for {
				var n int64
				err := db.writer.Do(ctx, func(tx *Tx) error {
					var err error
					n, err = t.deleteChunk(tx, id)
					return err
				})
				if err != nil {
					return err
				}
				deleted[t.table] += n
				if db.siteDeleteJob != nil {
					db.siteDeleteJob(t.table, n, false)
				}
				if n < int64(t.chunk) {
					break
				}
			}
		}
		// Writes of a site's data check in the writer that the site still
		// exists (see checkSites), so normally nothing is left by now. The
		// final job deletes any rest, unless a table holds more than a
		// chunk of it: then the chunks start over.
		err := db.deleteSiteFinal(ctx, actor, ws, id, deleted)
		if !errors.Is(err, errSiteRowsLeft) {
			return err
		}
	}
}

// deleteSiteFinal deletes the site and the rest of its data, and writes the
// audit row with deleted plus what it removed. It returns errSiteRowsLeft,
// having changed nothing, if a table holds more than a chunk of the site.
func (db *DB) deleteSiteFinal(ctx context.Context, actor Actor, ws *Workspace, id string, deleted map[string]int64) error {
	counts := map[string]int64{}
	err := db.writer.Do(ctx, func(tx *Tx) error {
		for _, t := range siteDataTables {
			var left int
			if err := tx.QueryRow(`SELECT COUNT(*) FROM (SELECT 1 FROM `+t.table+` WHERE site_id = ? LIMIT ?)`,
				id, t.chunk+1).Scan(&left); err != nil {
				return fmt.Errorf("count %s of site: %w", t.table, err)
			}
			if left > t.chunk {
				return errSiteRowsLeft
			}
		}
		res, err := tx.Exec(`DELETE FROM sites WHERE id = ? AND workspace_id = ?`, id, ws.ID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fault.Errorf(fault.NotFound, "site not found")
		}
		total := map[string]int64{}
		for _, t := range siteDataTables {
			res, err := tx.Exec(`DELETE FROM `+t.table+` WHERE site_id = ?`, id)
			if err != nil {
				return fmt.Errorf("delete %s of site: %w", t.table, err)
			}
			counts[t.table], _ = res.RowsAffected()
			total[t.table] = deleted[t.table] + counts[t.table]
		}
		if err := db.audit(tx, ws.ID, actor, "site.delete", id, map[string]any{"deleted_rows": total}); err != nil {
			return err
		}
		tx.OnCommit(func() {
			// site_usage went with the site; so does its in-memory count.
			db.quota.mu.Lock()
			delete(db.quota.used, id)
			db.quota.mu.Unlock()
		})
		return nil
	})
	if err == nil && db.siteDeleteJob != nil {
		for table, n := range counts {
			db.siteDeleteJob(table, n, true)
		}
	}
	return err
}

// NormalizeScopes checks scopes (non-empty, known) and folds duplicates,
// keeping first-seen order.
func NormalizeScopes(scopes []string) ([]string, error) {
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

// newPlaintextKey returns "sk_<slug>_" followed by 32 base64url characters
// encoding 24 bytes (192 bits) from crypto/rand.
func newPlaintextKey(slug string) string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return "sk_" + slug + "_" + base64.RawURLEncoding.EncodeToString(b)
}

// hashKey is the stored form of a key. A plain SHA-256 suffices: the
// plaintext holds 192 random bits, so there is nothing to brute-force.
func hashKey(plaintext string) []byte {
	sum := sha256.Sum256([]byte(plaintext))
	return sum[:]
}

// CreateKey makes a key for ws, audited as key.create. It returns the
// metadata and the plaintext, which is not kept anywhere.
func (db *DB) CreateKey(ctx context.Context, actor Actor, ws *Workspace, label string, scopes []string) (*APIKey, string, error) {
	label, err := cleanText(label, fault.InvalidLabel, "label")
	if err != nil {
		return nil, "", err
	}
	scopes, err = NormalizeScopes(scopes)
	if err != nil {
		return nil, "", err
	}
	plaintext := newPlaintextKey(ws.Slug)
	k := &APIKey{ID: uuid.NewString(), WorkspaceID: ws.ID, Label: label, Scopes: scopes,
		CreatedAt: FormatTime(db.now()), hash: hashKey(plaintext)}
	hash := hex.EncodeToString(k.hash)
	scopesJSON, _ := json.Marshal(scopes)
	err = db.writer.Do(ctx, func(tx *Tx) error {
		if _, err := tx.Exec(`INSERT INTO api_keys(id, workspace_id, label, scopes, key_hash, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			k.ID, k.WorkspaceID, k.Label, string(scopesJSON), hash, k.CreatedAt); err != nil {
			return err
		}
		if err := db.audit(tx, ws.ID, actor, "key.create", k.ID, map[string]any{"label": label, "scopes": scopes}); err != nil {
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
	return db.writer.Do(ctx, func(tx *Tx) error {
		var hash string
		err := tx.QueryRow(`SELECT key_hash FROM api_keys WHERE id = ? AND workspace_id = ? AND revoked_at IS NULL`,
			keyID, ws.ID).Scan(&hash)
		if err == sql.ErrNoRows {
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
		tx.OnCommit(func() {
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
	db.tenants.mu.RLock()
	defer db.tenants.mu.RUnlock()
	for rows.Next() {
		k, _, err := scanKey(rows)
		if err != nil {
			return nil, err
		}
		if t, ok := db.lastUsed[k.ID]; ok && k.RevokedAt == nil {
			s := FormatTime(t)
			k.LastUsedAt = &s
		}
		list = append(list, *k)
	}
	return list, rows.Err()
}

// Authenticate returns the active key whose plaintext is given. It reads
// only memory. The map lookup is by hash, and the final comparison of the
// hashes is constant-time.
func (db *DB) Authenticate(plaintext string) (*APIKey, bool) {
	if !strings.HasPrefix(plaintext, "sk_") {
		return nil, false
	}
	sum := hashKey(plaintext)
	db.tenants.mu.RLock()
	k, ok := db.keysByHash[hex.EncodeToString(sum)]
	db.tenants.mu.RUnlock()
	if !ok || subtle.ConstantTimeCompare(k.hash, sum) != 1 {
		return nil, false
	}
	return k, true
}

// TouchKey records a use of key. The stored last_used_at is rewritten at
// most once a minute per key, off the request's path, so authenticated
// reads do not each become writes.
func (db *DB) TouchKey(k *APIKey) {
	now := db.now()
	db.tenants.mu.Lock()
	db.lastUsed[k.ID] = now
	due := now.Sub(db.lastUsedSave[k.ID]) >= lastUsedEvery
	if due {
		db.lastUsedSave[k.ID] = now
	}
	db.tenants.mu.Unlock()
	if !due {
		return
	}
	go func() {
		// Best effort: a full queue or shutdown skips this write, and the
		// next use after a minute tries again.
		_ = db.writer.Submit(context.Background(), 1, func(tx *Tx) error {
			_, err := tx.Exec(`UPDATE api_keys SET last_used_at = ? WHERE id = ? AND revoked_at IS NULL`, FormatTime(now), k.ID)
			return err
		})
	}()
}
