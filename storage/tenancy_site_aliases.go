package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/tally-analytics/tally/fault"
)

// Site aliases are the host names a site answers to besides its id, so that
// Plausible's and Umami's trackers can name it as they do
// (docs/intake.md#plausible--and-umami-compatible-intake). They are held in
// memory like the sites themselves and changed only through this process's
// writer.

// Bounds of a site's aliases.
const (
	// MaxAliases is the most aliases a site may have.
	MaxAliases = 50
	// MaxAliasLen is the longest alias, in bytes: a DNS name's limit.
	MaxAliasLen = 253
)

// aliasPattern is a host name, lower case: labels of letters, digits and
// inner hyphens, separated by dots. An Umami website id (a UUID) is one
// too, so a site moved from Umami answers to its old id.
var aliasPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$`)

// loadAliases fills t's alias maps from site_aliases.
func (db *DB) loadAliases(ctx context.Context, q querier, t *tenants) error {
	t.aliases = map[string]string{}
	t.siteAliases = map[string][]string{}
	rows, err := q.QueryContext(ctx, `SELECT site_id, alias FROM site_aliases ORDER BY site_id, alias`)
	if err != nil {
		return fmt.Errorf("load site aliases: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var site, alias string
		if err := rows.Scan(&site, &alias); err != nil {
			return err
		}
		t.aliases[alias] = site
		t.siteAliases[site] = append(t.siteAliases[site], alias)
	}
	return rows.Err()
}

// SiteAliases lists the aliases of the site id, sorted; empty, never nil.
func (db *DB) SiteAliases(id string) []string {
	db.tenants.mu.RLock()
	defer db.tenants.mu.RUnlock()
	if a := db.siteAliases[id]; a != nil {
		return a
	}
	return []string{}
}

// SiteNamed returns the site that name names: the site whose id it is,
// else the site that has it as an alias (compared without regard to
// case). A site id wins over an alias, so no alias can take the traffic
// of a name that is a site's id: a new alias that equals a site id
// without regard to case is refused (SetSiteAliases), as is a new site
// whose id equals an alias so (CreateSite); one stored before those
// checks answers only for names that are no site's id (docs/intake.md#plausible--and-umami-compatible-intake, Aliases).
func (db *DB) SiteNamed(name string) (*Site, bool) {
	db.tenants.mu.RLock()
	defer db.tenants.mu.RUnlock()
	if s, ok := db.sites[name]; ok {
		return s, true
	}
	id, ok := db.aliases[strings.ToLower(name)]
	if !ok {
		return nil, false
	}
	s, ok := db.sites[id]
	return s, ok
}

// CleanAliases validates and normalises a list of aliases: each trimmed,
// lower-cased and without a trailing dot, a host name of at most
// MaxAliasLen bytes; duplicates folded; at most MaxAliases; sorted.
func CleanAliases(list []string) ([]string, error) {
	out := make([]string, 0, len(list))
	for i, a := range list {
		a = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(a)), ".")
		switch {
		case a == "":
			return nil, fault.Errorf(fault.InvalidAliases, "aliases[%d] is empty: an alias is a host name such as example.com", i)
		case len(a) > MaxAliasLen:
			return nil, fault.Errorf(fault.InvalidAliases, "aliases[%d] is %d bytes long; an alias is at most %d", i, len(a), MaxAliasLen)
		case !aliasPattern.MatchString(a):
			return nil, fault.Errorf(fault.InvalidAliases, "aliases[%d] is not a host name: use letters, digits, hyphens and dots, such as example.com (no scheme, port or path)", i)
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	if len(out) > MaxAliases {
		return nil, fault.Errorf(fault.InvalidAliases, "a site has at most %d aliases, this list has %d", MaxAliases, len(out))
	}
	slices.Sort(out)
	return out, nil
}

// SetSiteAliases replaces the aliases of site with aliases (cleaned by
// CleanAliases), audited as site.aliases with the new and the previous
// list. A name another site has as an alias, or that is another site's
// id without regard to case, is 409 alias_taken. A list equal to the
// current one writes nothing.
func (db *DB) SetSiteAliases(ctx context.Context, actor Actor, site *Site, aliases []string) ([]string, error) {
	aliases, err := CleanAliases(aliases)
	if err != nil {
		return nil, err
	}
	if slices.Equal(db.SiteAliases(site.ID), aliases) {
		return aliases, nil
	}
	err = db.writer.do(ctx, func(tx *writeTx) error {
		if err := db.checkSite(site); err != nil {
			return err
		}
		if err := db.coord().lockNames(tx); err != nil {
			return err
		}
		// Read in the writer, after every earlier change's commit hook.
		previous := db.SiteAliases(site.ID)
		for _, a := range aliases {
			taken, err := nameTaken(tx, a, site.ID)
			if err != nil {
				return err
			}
			if taken {
				// Which site has it is not said: it may be another
				// workspace's.
				return fault.Errorf(fault.AliasTaken, "the name %q is already an alias or the id of another site", a)
			}
		}
		if _, err := tx.Exec(`DELETE FROM site_aliases WHERE site_id = ?`, site.ID); err != nil {
			return err
		}
		for _, a := range aliases {
			if _, err := tx.Exec(`INSERT INTO site_aliases(site_id, alias) VALUES (?, ?)`, site.ID, a); err != nil {
				return err
			}
		}
		if err := db.audit(tx, site.WorkspaceID, actor, "site.aliases", site.ID,
			map[string]any{"aliases": aliases, "previous_aliases": previous}); err != nil {
			return err
		}
		if err := db.coord().notify(tx, "site", site.ID); err != nil {
			return err
		}
		tx.OnCommit(func() {
			db.tenants.mu.Lock()
			defer db.tenants.mu.Unlock()
			for _, a := range db.siteAliases[site.ID] {
				delete(db.aliases, a)
			}
			for _, a := range aliases {
				db.aliases[a] = site.ID
			}
			db.siteAliases[site.ID] = aliases
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return aliases, nil
}

// nameTaken reports whether a site other than except answers to name (an
// alias: lower case) already: as its alias, or as its id without regard to
// case. Site ids are ASCII, so lower() of SQLite and of PostgreSQL's "C"
// collation fold them alike.
func nameTaken(tx *writeTx, name, except string) (bool, error) {
	var one int
	err := tx.QueryRow(`SELECT 1 FROM site_aliases WHERE alias = ? AND site_id <> ?
		UNION ALL SELECT 1 FROM sites WHERE lower(id) = ? AND id <> ? LIMIT 1`, name, except, name, except).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// forgetAliases drops the deleted site id's aliases from memory (its rows
// went in the same transaction).
func (db *DB) forgetAliases(id string) {
	db.tenants.mu.Lock()
	defer db.tenants.mu.Unlock()
	for _, a := range db.siteAliases[id] {
		delete(db.aliases, a)
	}
	delete(db.siteAliases, id)
}
