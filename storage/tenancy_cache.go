package storage

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"sync"
)

// tenants holds the workspaces, sites and active keys in memory. Every
// change goes through this process's writer, whose commit hooks keep these
// maps current, so credential checks never query the database.
type tenants struct {
	mu         sync.RWMutex
	wsBySlug   map[string]*Workspace
	sites      map[string]*Site
	keysByHash map[string]*APIKey // active keys only
	// aliases maps each alias to its site's id; siteAliases lists each
	// site's aliases, sorted (tenancy_site_aliases.go).
	aliases     map[string]string
	siteAliases map[string][]string
	// deleting holds the sites this instance is deleting, kept hidden
	// by a reload of the maps (db_coord_pg.go) until the delete ends.
	deleting map[string]bool
	// uses is locked on its own (see keyUses).
	uses keyUses
}

// querier is a read pool or the writer's transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// loadTenants fills the tenancy maps at Open.
func (db *DB) loadTenants(ctx context.Context) error {
	t, err := db.readTenants(ctx, db.read)
	if err == nil {
		db.swapTenants(t)
	}
	return err
}

// reloadTenants reads the tenancy maps again, on PostgreSQL whenever
// another instance changed them (db_coord_pg.go). It reads in a writer job
// and swaps in its commit hook, so that it is ordered with this
// instance's own changes: a reload read before one of them never
// replaces the maps after that change's hook.
func (db *DB) reloadTenants(ctx context.Context) error {
	return db.writer.do(ctx, func(tx *writeTx) error {
		t, err := db.readTenants(ctx, tx.Tx)
		if err != nil {
			return err
		}
		tx.OnCommit(func() { db.swapTenants(t) })
		return nil
	})
}

// swapTenants puts t's maps in place, leaving out the sites this instance
// is deleting; requests keep reading the old maps until then.
func (db *DB) swapTenants(t *tenants) {
	db.tenants.mu.Lock()
	defer db.tenants.mu.Unlock()
	for id := range db.tenants.deleting {
		delete(t.sites, id)
	}
	db.wsBySlug, db.sites, db.keysByHash = t.wsBySlug, t.sites, t.keysByHash
	db.aliases, db.siteAliases = t.aliases, t.siteAliases
}

// readTenants reads the tenancy tables into fresh maps.
func (db *DB) readTenants(ctx context.Context, q querier) (*tenants, error) {
	t := &tenants{
		wsBySlug:   map[string]*Workspace{},
		sites:      map[string]*Site{},
		keysByHash: map[string]*APIKey{},
	}

	rows, err := q.QueryContext(ctx, `SELECT id, name, slug, created_at FROM workspaces`)
	if err != nil {
		return nil, fmt.Errorf("load workspaces: %w", err)
	}
	for rows.Next() {
		w := &Workspace{}
		if err := rows.Scan(&w.ID, &w.Name, &w.Slug, &w.CreatedAt); err != nil {
			rows.Close()
			return nil, err
		}
		t.wsBySlug[w.Slug] = w
	}
	rows.Close()

	rows, err = q.QueryContext(ctx, siteColumns+db.coord().sitesShown())
	if err != nil {
		return nil, fmt.Errorf("load sites: %w", err)
	}
	for rows.Next() {
		s := &Site{}
		if err := s.scan(rows); err != nil {
			rows.Close()
			return nil, err
		}
		t.sites[s.ID] = s
	}
	rows.Close()

	if err := db.loadAliases(ctx, q, t); err != nil {
		return nil, err
	}

	rows, err = q.QueryContext(ctx, keyColumns+` WHERE revoked_at IS NULL`)
	if err != nil {
		return nil, fmt.Errorf("load keys: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		k, hash, err := scanKey(rows)
		if err != nil {
			return nil, err
		}
		k.hash, _ = hex.DecodeString(hash)
		t.keysByHash[hash] = k
	}
	return t, rows.Err()
}

// Workspace returns the workspace with the given slug.
func (db *DB) Workspace(slug string) (*Workspace, bool) {
	db.tenants.mu.RLock()
	defer db.tenants.mu.RUnlock()
	w, ok := db.wsBySlug[slug]
	return w, ok
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
