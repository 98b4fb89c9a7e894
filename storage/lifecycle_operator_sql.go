package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
)

// OperatorSQL is one connection for an operator's ad-hoc SQL (`tally sql`,
// docs/storage.md#event-bytes): on SQLite it has the service's SQL functions
// (event_raw, event_received_at, tally_page_path, ...), registered in the
// driver for every connection of this process, which a sqlite3 shell
// lacks. It is read-only unless opened for writing (SQLite only).
type OperatorSQL struct {
	pool  *sql.DB
	conn  *sql.Conn
	pg    bool
	write bool
}

// OpenOperatorSQL opens the SQLite file at path, or the PostgreSQL
// database at url when url is set, for an operator's SQL. Read-only, the
// SQLite file is opened read-only (it must exist) and PostgreSQL runs the
// SQL in a READ ONLY transaction. With write (SQLite only), the file is
// opened with SQLite's exclusive lock, taken at once and kept until Close:
// ErrInUse while another process (a running server, a sqlite3 shell) has
// the file open, and no server can open it meanwhile. A write behind a
// running server's back would leave its caches (tenants, keys, quota,
// sessions memo, report partials) disagreeing with the file.
func OpenOperatorSQL(ctx context.Context, path, url string, write bool) (*OperatorSQL, error) {
	o := &OperatorSQL{pg: url != "", write: write}
	var err error
	switch {
	case o.pg && write:
		return nil, errors.New("writes on PostgreSQL are not offered: other instances may be serving the database, and nothing tells this command so")
	case o.pg:
		o.pool, err = sql.Open("pgx", url)
	case path == "" || path == ":memory:":
		return nil, fmt.Errorf("database path %q names no file", path)
	default:
		if _, err := os.Stat(path); err != nil {
			return nil, err
		}
		dsn := FileURI(path) + "?mode=ro&_pragma=busy_timeout(5000)"
		if write {
			// As the service writes: foreign keys (deletes cascade) and
			// secure_delete (deleted content overwritten, docs/gdpr.md).
			dsn = FileURI(path) + "?mode=rw&_pragma=busy_timeout(0)&_pragma=locking_mode(EXCLUSIVE)&_pragma=foreign_keys(1)&_pragma=secure_delete(1)"
		}
		o.pool, err = sql.Open("sqlite", dsn)
	}
	if err != nil {
		return nil, err
	}
	o.pool.SetMaxOpenConns(1)
	if o.conn, err = o.pool.Conn(ctx); err != nil {
		o.pool.Close()
		return nil, unreachableOr(o.pg, err)
	}
	if write {
		// In exclusive locking mode the first write transaction takes
		// the file's exclusive lock and keeps it (as Vacuum does).
		_, err = o.conn.ExecContext(ctx, `BEGIN EXCLUSIVE`)
		if err == nil {
			_, err = o.conn.ExecContext(ctx, `COMMIT`)
		}
		if err != nil {
			o.Close()
			return nil, inUse(err)
		}
	}
	return o, nil
}

// unreachableOr is err, on PostgreSQL said to be a connection failure.
func unreachableOr(pg bool, err error) error {
	if pg {
		return fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	return err
}

// Close closes the connection (and lets go of the exclusive lock).
func (o *OperatorSQL) Close() error {
	if o.conn != nil {
		o.conn.Close()
	}
	return o.pool.Close()
}

// OperatorResult is what Run did: rows changed by a write, and kept report
// partials dropped because of them.
type OperatorResult struct {
	Changed, PartialsDropped int64
}

// Run runs query and passes the column names, then each row of its last
// statement (SQLite runs several statements separated by ';' in order;
// PostgreSQL takes one), to row. A row holding an events row's raw and its
// columns id, site_id, type, anon_id, user_id, url and referrer (SELECT *
// FROM events) has raw as its wire text, decoded here as event_raw does:
// the one way to read raw on PostgreSQL, which cannot call Go. Values are
// nil, int64, float64, bool, string, []byte or time.Time. For writing,
// query runs in one transaction, committed only if it all succeeds; when
// it changed rows, the kept report partials (day_partials) are dropped in
// it too, so that reports compute them again from the events.
func (o *OperatorSQL) Run(ctx context.Context, query string, row func(columns []string, values []any) error) (OperatorResult, error) {
	var res OperatorResult
	if strings.TrimSpace(query) == "" {
		return res, errors.New("no SQL to run")
	}
	switch {
	case o.pg:
		tx, err := o.conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return res, err
		}
		defer tx.Rollback()
		rows, err := tx.QueryContext(ctx, query)
		if err != nil {
			return res, err
		}
		return res, eachRow(rows, row)
	case !o.write:
		rows, err := o.conn.QueryContext(ctx, query)
		if err != nil {
			return res, err
		}
		return res, eachRow(rows, row)
	}
	tx, err := o.conn.BeginTx(ctx, nil)
	if err != nil {
		return res, err
	}
	defer tx.Rollback()
	var before, after int64
	if err := tx.QueryRowContext(ctx, `SELECT total_changes()`).Scan(&before); err != nil {
		return res, err
	}
	rows, err := tx.QueryContext(ctx, query)
	if err != nil {
		return res, err
	}
	if err := eachRow(rows, row); err != nil {
		return res, err
	}
	if err := tx.QueryRowContext(ctx, `SELECT total_changes()`).Scan(&after); err != nil {
		return res, err
	}
	if res.Changed = after - before; res.Changed > 0 {
		r, err := tx.ExecContext(ctx, `DELETE FROM day_partials`)
		if err != nil {
			return res, err
		}
		res.PartialsDropped, _ = r.RowsAffected()
	}
	return res, tx.Commit()
}

// eventFieldColumns are the columns event_raw takes after raw, in order.
var eventFieldColumns = [7]string{"id", "site_id", "type", "anon_id", "user_id", "url", "referrer"}

// eachRow passes rows' columns and values to row, with raw decoded where
// the row holds the columns event_raw needs.
func eachRow(rows *sql.Rows, row func([]string, []any) error) error {
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	rawAt, fieldAt := -1, [7]int{-1, -1, -1, -1, -1, -1, -1}
	for i, c := range cols {
		c = strings.ToLower(c)
		if c == "raw" && rawAt < 0 {
			rawAt = i
		}
		for k, name := range eventFieldColumns {
			if c == name && fieldAt[k] < 0 {
				fieldAt[k] = i
			}
		}
	}
	for _, at := range fieldAt {
		if at < 0 {
			rawAt = -1
		}
	}
	values := make([]any, len(cols))
	targets := make([]any, len(cols))
	for i := range values {
		targets[i] = &values[i]
	}
	for rows.Next() {
		if err := rows.Scan(targets...); err != nil {
			return err
		}
		if b, ok := valueAt(values, rawAt).([]byte); ok {
			var f rawFields
			for k, at := range fieldAt {
				f[k] = textOf(values[at])
			}
			if text, err := decodeRaw(storedForm(b), f); err == nil && text != nil {
				values[rawAt] = string(text)
			}
		}
		if err := row(cols, values); err != nil {
			return err
		}
	}
	return rows.Err()
}

// valueAt is values[i], nil for i < 0.
func valueAt(values []any, i int) any {
	if i < 0 {
		return nil
	}
	return values[i]
}

// textOf is a column value as event_raw's arguments see it.
func textOf(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return ""
}

// storedForm is a stored raw read as bytes, as SQLite's functions see it:
// the wire text as is (which the compressed form could not take,
// encodeRaw) is text, not a blob of a format.
func storedForm(b []byte) any {
	if len(b) > 0 && b[0] > rawFormatV3 {
		return string(b)
	}
	return b
}
