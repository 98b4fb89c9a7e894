package storage

import (
	"context"
	"strings"

	"github.com/tally-analytics/tally/fault"
)

// Site is a property inside exactly one workspace.
type Site struct {
	ID          string
	WorkspaceID string
	Name        string
	CreatedAt   string
	// RetentionDays is the site's own retention: nil follows the server's
	// RETENTION_DAYS, 0 keeps everything (docs/storage.md#retention).
	RetentionDays *int
	// PurgedBefore is the first UTC day (YYYY-MM-DD) whose raw rows are
	// all kept; "" while no purge has removed any.
	PurgedBefore string
	// TimeZone is the site's IANA time zone ("UTC" unless set): the query
	// API's days, hours and relative ranges are in it (docs/query-api.md).
	TimeZone string
}

// siteColumns are the columns scanned by (*Site).scan.
const siteColumns = `SELECT id, workspace_id, name, created_at, retention_days, COALESCE(purged_before, ''), time_zone FROM sites`

func (s *Site) scan(row interface{ Scan(...any) error }) error {
	return row.Scan(&s.ID, &s.WorkspaceID, &s.Name, &s.CreatedAt, &s.RetentionDays, &s.PurgedBefore, &s.TimeZone)
}

// Sites lists the sites of a workspace, ordered by id.
func (db *DB) Sites(ctx context.Context, workspaceID string) ([]Site, error) {
	rows, err := db.read.QueryContext(ctx,
		siteColumns+` WHERE workspace_id = ? ORDER BY id`, workspaceID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	list := []Site{}
	for rows.Next() {
		var s Site
		if err := s.scan(rows); err != nil {
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
	s := &Site{ID: id, WorkspaceID: ws.ID, Name: name, CreatedAt: FormatTime(db.now()), TimeZone: "UTC"}
	err = db.writer.do(ctx, func(tx *writeTx) error {
		if err := db.coord().lockNames(tx); err != nil {
			return err
		}
		// An id that is an alias without regard to case is taken too: the
		// alias's traffic would go to the new site (SiteNamed). Whose
		// alias is not said: it may be another workspace's.
		var n int
		if err := tx.QueryRow(`SELECT (SELECT COUNT(*) FROM sites WHERE id = ?) + (SELECT COUNT(*) FROM site_aliases WHERE alias = ?)`,
			id, strings.ToLower(id)).Scan(&n); err != nil {
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
		if err := db.coord().notify(tx, "site", s.ID); err != nil {
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

// MaxRetentionDays bounds a site's retention_days (about a century), far
// beyond any need and far from overflowing a date.
const MaxRetentionDays = 36500

// SiteChange is what UpdateSite changes: each field set is changed, the
// others are left as they are.
type SiteChange struct {
	Name *string
	// Retention, when set, replaces the site's RetentionDays with
	// RetentionDays (nil: follow RETENTION_DAYS).
	Retention     bool
	RetentionDays *int
	// TimeZone, when set, replaces the site's time zone: an IANA name
	// (docs/query-api.md).
	TimeZone *string
}

// UpdateSite renames site and sets its retention and time zone as change says, audited
// as site.update with each changed field and its previous value. A change
// that changes nothing writes nothing.
func (db *DB) UpdateSite(ctx context.Context, actor Actor, site *Site, change SiteChange) (*Site, error) {
	updated := *site
	meta := map[string]any{}
	if change.Name != nil {
		name, err := cleanText(*change.Name, fault.InvalidName, "name")
		if err != nil {
			return nil, err
		}
		if name != site.Name {
			updated.Name = name
			meta["name"], meta["previous_name"] = name, site.Name
		}
	}
	if change.Retention {
		if d := change.RetentionDays; d != nil && (*d < 0 || *d > MaxRetentionDays) {
			return nil, fault.Errorf(fault.InvalidRetention, "retention_days must be null or a whole number from 0 to %d", MaxRetentionDays)
		}
		if !sameDays(change.RetentionDays, site.RetentionDays) {
			updated.RetentionDays = change.RetentionDays
			meta["retention_days"], meta["previous_retention_days"] = change.RetentionDays, site.RetentionDays
		}
	}
	if change.TimeZone != nil {
		if _, err := LoadTimeZone(*change.TimeZone); err != nil {
			return nil, err
		}
		if *change.TimeZone != site.TimeZone {
			updated.TimeZone = *change.TimeZone
			meta["time_zone"], meta["previous_time_zone"] = *change.TimeZone, site.TimeZone
		}
	}
	if len(meta) == 0 {
		return site, nil
	}
	err := db.writer.do(ctx, func(tx *writeTx) error {
		if err := db.checkSite(site); err != nil {
			return err
		}
		cur, _ := db.Site(site.ID)
		if _, err := tx.Exec(`UPDATE sites SET name = ?, retention_days = ?, time_zone = ? WHERE id = ?`,
			updated.Name, updated.RetentionDays, updated.TimeZone, site.ID); err != nil {
			return err
		}
		if updated.TimeZone != site.TimeZone {
			// Partials are kept per zone: those of the old one would only
			// take room.
			if _, err := tx.Exec(`DELETE FROM day_partials WHERE site_id = ? AND zone <> ?`, site.ID, updated.TimeZone); err != nil {
				return err
			}
			tx.partialsChanged(site.ID)
		}
		// A purge may have moved purged_before since the request read the
		// site.
		updated.PurgedBefore = cur.PurgedBefore
		if err := db.audit(tx, site.WorkspaceID, actor, "site.update", site.ID, meta); err != nil {
			return err
		}
		if err := db.coord().notify(tx, "site", site.ID); err != nil {
			return err
		}
		tx.OnCommit(func() { db.replaceSite(&updated) })
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &updated, nil
}

// replaceSite puts s in the tenancy cache in place of the site of the same
// id, unless that site was deleted (or deleted and created again) meanwhile.
func (db *DB) replaceSite(s *Site) {
	db.tenants.mu.Lock()
	defer db.tenants.mu.Unlock()
	if cur, ok := db.sites[s.ID]; ok && cur.WorkspaceID == s.WorkspaceID && cur.CreatedAt == s.CreatedAt {
		db.sites[s.ID] = s
	}
}

func sameDays(a, b *int) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}
