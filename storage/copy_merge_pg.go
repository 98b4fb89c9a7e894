package storage

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The copy's merges (docs/postgresql.md#moving-from-sqlite-to-postgresql, Keys
// equal on PostgreSQL). Text is copied as PostgreSQL's driver stores it,
// NUL and bytes that are not UTF-8 written U+FFFD (engine.PGText), so rows whose
// keys differ on SQLite only there (an event type "\x00" beside one
// "\uFFFD") share one key on PostgreSQL, where a COPY of both would
// break a unique key and the whole copy. Intake on PostgreSQL would have
// made them one row: the copy does what it would have done. A rollup's
// rows are summed; a user's profiles merged, the later's traits over the
// earlier's; any other row is kept once, the first in key order, as an
// insert that finds its key taken leaves the row there. TableCheck.Merged
// counts the rows folded so.

// copyMerge folds the rows of one table whose unique keys collide once
// stored: the first row of a key goes to the COPY, the later ones are held
// and applied to it after.
type copyMerge struct {
	table string
	cols  []copyColumn
	// keys are the table's unique keys as indexes into cols (keys on a
	// column the copy leaves to PostgreSQL are left out); pk is its
	// primary key, nil when it has none.
	keys [][]int
	pk   []int
	seen []map[string]bool
	held [][]any
}

// newMerge reads table's unique keys from the target.
func (c *pgCopy) newMerge(ctx context.Context, table string, cols []copyColumn) (*copyMerge, error) {
	rows, err := c.dst.Query(ctx, `SELECT array(SELECT a.attname::text FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(n, o)
			JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n ORDER BY k.o), i.indisprimary
		FROM pg_index i WHERE i.indrelid = $1::regclass AND i.indisunique AND i.indexprs IS NULL AND i.indpred IS NULL`,
		pgx.Identifier{table}.Sanitize())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	m := &copyMerge{table: table, cols: cols}
	for rows.Next() {
		var names []string
		var primary bool
		if err := rows.Scan(&names, &primary); err != nil {
			return nil, err
		}
		key := make([]int, 0, len(names))
		for _, n := range names {
			if i := columnIndex(cols, n); i >= 0 {
				key = append(key, i)
			}
		}
		if len(key) < len(names) {
			continue // a column PostgreSQL fills itself: unique there
		}
		m.keys = append(m.keys, key)
		m.seen = append(m.seen, map[string]bool{})
		if primary {
			m.pk = key
		}
	}
	return m, rows.Err()
}

// columnIndex is the index of the column named name in cols, -1 if none.
func columnIndex(cols []copyColumn, name string) int {
	return slices.IndexFunc(cols, func(c copyColumn) bool { return c.name == name })
}

// fold reports whether row (as the COPY would write it) has a key an
// earlier row has: then it is held, not copied. Only a key whose text
// holds U+FFFD can be another's (every other text is stored as it is), so
// only those are remembered.
func (m *copyMerge) fold(row []any) bool {
	for k, key := range m.keys {
		id, ok := mergeKey(row, key)
		if !ok {
			continue
		}
		if m.seen[k][id] {
			m.held = append(m.held, row)
			return true
		}
		m.seen[k][id] = true
	}
	return false
}

// mergeKey is the key's values of row as one text, ok only when one of
// them is text holding U+FFFD and none is NULL (which unique keys never
// compare equal).
func mergeKey(row []any, key []int) (string, bool) {
	parts := make([]string, len(key))
	replaced := false
	for i, c := range key {
		if row[c] == nil {
			return "", false
		}
		parts[i] = text(row[c])
		if s, ok := row[c].(string); ok && strings.Contains(s, "\uFFFD") {
			replaced = true
		}
	}
	// NUL cannot be in the stored text: it separates the values.
	return strings.Join(parts, "\x00"), replaced
}

// apply folds the held rows into the copied ones, in tx.
func (m *copyMerge) apply(ctx context.Context, tx pgx.Tx) error {
	if len(m.held) == 0 {
		return nil
	}
	switch {
	case sourceOf(m.table) != m.table || m.table == "imported_rows":
		return m.sum(ctx, tx)
	case m.table == "user_profiles":
		return m.profiles(ctx, tx)
	}
	return nil // kept once: the first row stays as it is
}

// where is the primary key's condition, its parameters numbered from
// first, and their values of row.
func (m *copyMerge) where(row []any, first int) (string, []any) {
	var conds []string
	var args []any
	for i, c := range m.pk {
		conds = append(conds, fmt.Sprintf("%s = $%d", pgx.Identifier{m.cols[c].name}.Sanitize(), first+i))
		args = append(args, row[c])
	}
	return strings.Join(conds, " AND "), args
}

// sum adds each held rollup row's counters (every column outside the
// primary key) to its key's row.
func (m *copyMerge) sum(ctx context.Context, tx pgx.Tx) error {
	for _, row := range m.held {
		var sets []string
		var args []any
		for i, col := range m.cols {
			if !slices.Contains(m.pk, i) {
				id := pgx.Identifier{col.name}.Sanitize()
				args = append(args, row[i])
				sets = append(sets, fmt.Sprintf("%s = %s + $%d", id, id, len(args)))
			}
		}
		cond, keyArgs := m.where(row, len(args)+1)
		if _, err := tx.Exec(ctx, `UPDATE `+pgx.Identifier{m.table}.Sanitize()+` SET `+strings.Join(sets, ", ")+` WHERE `+cond,
			append(args, keyArgs...)...); err != nil {
			return fmt.Errorf("merge a row of %s: %w", m.table, err)
		}
	}
	return nil
}

// profiles merges each held profile into its key's: the traits of the
// one updated later over the other's (as a later identify would have
// merged them), the earlier creation and the later update.
func (m *copyMerge) profiles(ctx context.Context, tx pgx.Tx) error {
	traits, created, updated := columnIndex(m.cols, "traits"), columnIndex(m.cols, "created_at"), columnIndex(m.cols, "updated_at")
	if traits < 0 || created < 0 || updated < 0 {
		return fmt.Errorf("merge user profiles: the target lacks traits, created_at or updated_at")
	}
	for _, row := range m.held {
		cond, args := m.where(row, 1)
		var have [3]string
		if err := tx.QueryRow(ctx, `SELECT traits, created_at, updated_at FROM user_profiles WHERE `+cond, args...).Scan(&have[0], &have[1], &have[2]); err != nil {
			return fmt.Errorf("merge user profiles: %w", err)
		}
		older, newer := have[0], text(row[traits])
		if text(row[updated]) < have[2] {
			older, newer = newer, older
		}
		t, _, err := mergeTraits([]byte(older), []byte(newer), noCaps)
		if err != nil {
			return fmt.Errorf("merge user profiles: %w", err)
		}
		merged := string(t.appendTo(nil))
		cond, args = m.where(row, 4)
		if _, err := tx.Exec(ctx, `UPDATE user_profiles SET traits = $1, created_at = LEAST(created_at, $2), updated_at = GREATEST(updated_at, $3) WHERE `+cond,
			append([]any{merged, text(row[created]), text(row[updated])}, args...)...); err != nil {
			return fmt.Errorf("merge user profiles: %w", err)
		}
	}
	return nil
}
