package storage

import (
	"context"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/tally-analytics/tally/fault"
)

// Workspace is the customer boundary.
type Workspace struct {
	ID        string
	Name      string
	Slug      string
	CreatedAt string
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
	err = db.writer.do(ctx, func(tx *writeTx) error {
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
		if err := db.coord().notify(tx, "workspace", w.ID); err != nil {
			return err
		}
		tx.OnCommit(func() {
			db.tenants.mu.Lock()
			db.wsBySlug[w.Slug] = w
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
	err = db.writer.do(ctx, func(tx *writeTx) error {
		if _, err := tx.Exec(`UPDATE workspaces SET name = ?, updated_at = ? WHERE id = ?`,
			name, FormatTime(db.now()), ws.ID); err != nil {
			return err
		}
		if err := db.audit(tx, ws.ID, actor, "workspace.update", ws.ID, map[string]any{"name": name, "previous_name": ws.Name}); err != nil {
			return err
		}
		if err := db.coord().notify(tx, "workspace", ws.ID); err != nil {
			return err
		}
		tx.OnCommit(func() {
			db.tenants.mu.Lock()
			db.wsBySlug[ws.Slug] = &updated
			db.tenants.mu.Unlock()
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &updated, nil
}
