package storage

import (
	"context"
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
	// site's aliases, sorted (site_aliases.go).
	aliases     map[string]string
	siteAliases map[string][]string
	// deleting holds the sites this instance is deleting, kept hidden
	// by a reload of the maps (coord_pg.go) until the delete ends.
	deleting map[string]bool
	// uses is locked on its own (see keyUses).
	uses keyUses
}

// loadTenants reads the tenancy tables into fresh maps, then swaps them in
// under the lock: at Open, and on PostgreSQL whenever another instance
// changed them (coord_pg.go), while requests keep reading the old maps.
func (db *DB) loadTenants(ctx context.Context) error {
	t := &tenants{
		wsBySlug:   map[string]*Workspace{},
		sites:      map[string]*Site{},
		keysByHash: map[string]*APIKey{},
	}

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
		t.wsBySlug[w.Slug] = w
	}
	rows.Close()

	rows, err = db.read.QueryContext(ctx, siteColumns+db.coord().sitesShown())
	if err != nil {
		return fmt.Errorf("load sites: %w", err)
	}
	for rows.Next() {
		s := &Site{}
		if err := s.scan(rows); err != nil {
			rows.Close()
			return err
		}
		t.sites[s.ID] = s
	}
	rows.Close()
	db.tenants.mu.RLock()
	for id := range db.tenants.deleting {
		delete(t.sites, id)
	}
	db.tenants.mu.RUnlock()

	if err := db.loadAliases(ctx, t); err != nil {
		return err
	}

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
	if err := rows.Err(); err != nil {
		return err
	}
	db.tenants.mu.Lock()
	db.wsBySlug, db.sites, db.keysByHash = t.wsBySlug, t.sites, t.keysByHash
	db.aliases, db.siteAliases = t.aliases, t.siteAliases
	db.tenants.mu.Unlock()
	return nil
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
