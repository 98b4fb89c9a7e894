package storage

import (
	"context"

	"github.com/tally-analytics/tally/fault"
)

// Site is a property inside exactly one workspace.
type Site struct {
	ID          string
	WorkspaceID string
	Name        string
	CreatedAt   string
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
	err = db.writer.do(ctx, func(tx *writeTx) error {
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
		tx.onCommit(func() {
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
