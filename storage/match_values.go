package storage

import (
	"context"
)

// matchKey names a matches filter's pattern on a dimension, folded or
// not.
func matchKey(dim, pattern string, fold bool) string {
	if fold {
		return dim + "\x00lower\x00" + pattern
	}
	return dim + "\x00" + pattern
}

// resolveMatches reads, on a backend without RE2 in SQL (PostgreSQL), the
// distinct values of each matches filter's dimension among the site's
// events and their visits, and keeps those its pattern matches, matched
// in Go with the same compiled pattern as SQLite's tally_match, so that
// the read lists them (docs/postgresql.md#on-postgresql). The values are read
// for the whole site, not the range: a visit that starts before the range may
// hold the range's events.
func (db *DB) resolveMatches(ctx context.Context, q *StatsQuery) error {
	if db.d.matchList("x") == "" {
		return nil
	}
	var walk func(fs []QueryFilter) error
	walk = func(fs []QueryFilter) error {
		for _, f := range fs {
			if err := walk(f.Children); err != nil {
				return err
			}
			if f.Op != "matches" && f.Op != "matches_not" {
				continue
			}
			for _, v := range f.Values {
				if _, ok := q.matched[matchKey(f.Dim, v, f.Fold)]; ok {
					continue
				}
				re, err := compilePattern(v)
				if err != nil {
					return err
				}
				b := &sqlBuilder{q: q}
				expr, args, err := b.dimExpr(f.Dim)
				if err != nil {
					return err
				}
				if f.Fold {
					// The pattern is matched against the folded value, as
					// SQLite's tally_match(?, lower(expr)).
					expr = db.d.fold(expr)
				}
				rows, err := db.read.QueryContext(ctx, `SELECT DISTINCT `+expr+` FROM events e LEFT JOIN sessions s ON `+eventVisitJoin+
					` WHERE e.site_id = ?`, append(args, q.Site)...)
				if err != nil {
					return err
				}
				list := []string{}
				for rows.Next() {
					var s *string
					if err := rows.Scan(&s); err != nil {
						rows.Close()
						return err
					}
					if s != nil && re.MatchString(*s) {
						list = append(list, *s)
					}
				}
				rows.Close()
				if err := rows.Err(); err != nil {
					return err
				}
				if q.matched == nil {
					q.matched = map[string][]string{}
				}
				q.matched[matchKey(f.Dim, v, f.Fold)] = list
			}
		}
		return nil
	}
	if err := walk(q.Filters); err != nil {
		return err
	}
	return walk(q.Goals)
}
