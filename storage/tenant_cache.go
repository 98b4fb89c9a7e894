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
	// uses is locked on its own (see keyUses).
	uses keyUses
}

func (db *DB) loadTenants(ctx context.Context) error {
	t := &db.tenants
	t.wsBySlug = map[string]*Workspace{}
	t.sites = map[string]*Site{}
	t.keysByHash = map[string]*APIKey{}

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

	rows, err = db.read.QueryContext(ctx, siteColumns)
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

	if err := db.loadAliases(ctx); err != nil {
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
	return rows.Err()
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
