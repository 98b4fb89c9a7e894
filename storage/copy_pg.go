package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tally-analytics/tally/storage/internal/engine"
)

// TableCheck is one line of `tally migrate-to`'s verification (docs/postgresql.md#moving-from-sqlite-to-postgresql): a table's rows on both sides and,
// for a rollup, the sum of each counter.
type TableCheck struct {
	Table            string
	SQLite, Postgres int64
	// Merged counts the SQLite rows folded into another row on
	// PostgreSQL, their keys being equal once stored there (copy_merge_pg.go).
	Merged int64
	Sums   []SumCheck
}

// SumCheck is a rollup counter's sum on both sides.
type SumCheck struct {
	Column           string
	SQLite, Postgres int64
}

// OK is whether every figure of c is equal on both sides, the merged rows
// counted with PostgreSQL's.
func (c TableCheck) OK() bool {
	if c.SQLite != c.Postgres+c.Merged {
		return false
	}
	for _, s := range c.Sums {
		if s.SQLite != s.Postgres {
			return false
		}
	}
	return true
}

// CopyProgress is told, per table, how many rows are copied of total.
type CopyProgress func(table string, done, total int64)

// CopyToPostgres copies the SQLite database at path (its server stopped)
// into the empty PostgreSQL database at databaseURL (docs/postgresql.md#moving-from-sqlite-to-postgresql): migrations on both sides, every table in one
// transaction (a failure leaves the migrated schema empty, so running
// again starts over), the columns PostgreSQL keeps and SQLite computes
// written through the same Go code, identities moved past the copied ids;
// then the checks of every table.
func CopyToPostgres(ctx context.Context, path, databaseURL string, progress CopyProgress) ([]TableCheck, error) {
	if err := CheckUnused(ctx, path); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	src, err := Open(ctx, Options{Path: path})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer src.Close()
	// Waited for, not refused: a conversion resumes where it stopped and
	// takes minutes at most, and the copy needs the final row forms.
	if src.conv.done != nil {
		select {
		case <-src.conv.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err := conversionsDone(ctx, src.read); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", DescribeDatabaseURL(databaseURL), redactErr(engine.RedactConnect(err), databaseURL))
	}
	defer conn.Close(context.Background())
	if err := requireEmpty(ctx, conn); err != nil {
		return nil, err
	}
	if err := migrateTarget(ctx, databaseURL); err != nil {
		return nil, err
	}
	c := &pgCopy{src: src.read, dst: conn, progress: progress}
	return c.run(ctx)
}

// redactErr keeps a connection error's text free of the URL's password.
func redactErr(err error, url string) error {
	msg := err.Error()
	if i := strings.Index(url, "://"); i >= 0 {
		rest := url[i+3:]
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if colon := strings.Index(rest[:at], ":"); colon >= 0 {
				if pw := rest[colon+1 : at]; pw != "" {
					msg = strings.ReplaceAll(msg, pw, "xxxxx")
				}
			}
		}
	}
	return errors.New(msg)
}

// requireEmpty refuses a target holding any row in a table of its current
// schema (an empty migrated schema, say of a copy that failed, is fine).
func requireEmpty(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' AND table_name <> 'schema_migrations'
		ORDER BY table_name`)
	if err != nil {
		return fmt.Errorf("read the target's tables: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("read the target's tables: %w", err)
	}
	for _, n := range names {
		var has bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+pgx.Identifier{n}.Sanitize()+`)`).Scan(&has); err != nil {
			return fmt.Errorf("read table %s of the target: %w", n, err)
		}
		if has {
			return fmt.Errorf("the target database is not empty (table %s has rows): migrate-to copies into an empty database only", n)
		}
	}
	return nil
}

// migrateTarget applies the PostgreSQL migrations.
func migrateTarget(ctx context.Context, databaseURL string) error {
	db, err := sql.Open(engine.PGDriverName, databaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := engine.CheckServer(ctx, db); err != nil {
		return err
	}
	return migratePG(ctx, db, migrationPGFiles, time.Now)
}

// pgCopy is one run of CopyToPostgres.
type pgCopy struct {
	src      *sql.DB
	dst      *pgx.Conn
	progress CopyProgress
	// credentials maps a credential's text (events of before SQLite's
	// 0019) to its code; next is the code a new one gets.
	credentials map[string]int64
	next, first int64
}

// copyColumn is a column the copy writes.
type copyColumn struct {
	name, typ string
	identity  bool
}

func (c *pgCopy) run(ctx context.Context) ([]TableCheck, error) {
	tables, err := c.targetTables(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.loadCredentials(ctx); err != nil {
		return nil, err
	}
	tx, err := c.dst.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.Background())
	var checks []TableCheck
	newCreds := 0
	for _, t := range tables {
		check, err := c.copyTable(ctx, tx, t)
		if err != nil {
			return nil, fmt.Errorf("copy %s: %w", t, err)
		}
		if check != nil {
			checks = append(checks, *check)
		}
	}
	// Credentials of old rows that had no code: written after the events
	// gave them one.
	for text, code := range c.credentials {
		if code >= c.firstNew() {
			if _, err := tx.Exec(ctx, `INSERT INTO credentials(code, credential) VALUES ($1, $2)`, code, text); err != nil {
				return nil, fmt.Errorf("copy credentials: %w", err)
			}
			newCreds++
		}
	}
	if err := c.setIdentities(ctx, tx, tables); err != nil {
		return nil, err
	}
	for i := range checks {
		if err := c.verify(ctx, tx, &checks[i]); err != nil {
			return nil, err
		}
		if checks[i].Table == "credentials" {
			checks[i].SQLite += int64(newCreds)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return checks, nil
}

// targetTables lists the target's tables, each after those its foreign
// keys name.
func (c *pgCopy) targetTables(ctx context.Context) ([]string, error) {
	rows, err := c.dst.Query(ctx, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' AND table_name <> 'schema_migrations'
		ORDER BY table_name`)
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	rows, err = c.dst.Query(ctx, `SELECT cl.relname::text, ref.relname::text FROM pg_constraint k
		JOIN pg_class cl ON cl.oid = k.conrelid JOIN pg_class ref ON ref.oid = k.confrelid
		WHERE k.contype = 'f' AND cl.relnamespace = current_schema()::regnamespace`)
	if err != nil {
		return nil, err
	}
	deps := map[string][]string{}
	for rows.Next() {
		var a, b string
		if err := rows.Scan(&a, &b); err != nil {
			return nil, err
		}
		if a != b {
			deps[a] = append(deps[a], b)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	var visit func(string)
	visit = func(n string) {
		if seen[n] {
			return
		}
		seen[n] = true
		for _, d := range deps[n] {
			visit(d)
		}
		out = append(out, n)
	}
	for _, n := range names {
		visit(n)
	}
	return out, nil
}

func (c *pgCopy) loadCredentials(ctx context.Context) error {
	c.credentials = map[string]int64{}
	rows, err := c.src.QueryContext(ctx, `SELECT code, credential FROM credentials`)
	if err != nil {
		return fmt.Errorf("read credentials: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var code int64
		var text string
		if err := rows.Scan(&code, &text); err != nil {
			return err
		}
		c.credentials[text] = code
		if code >= c.next {
			c.next = code + 1
		}
	}
	if c.next == 0 {
		c.next = 1
	}
	c.first = c.next
	return rows.Err()
}

func (c *pgCopy) firstNew() int64 { return c.first }

// sourceOf is the SQLite table a target table takes its rows from: a
// rollup's slots come from SQLite's one row per key.
func sourceOf(table string) string { return strings.TrimSuffix(table, "_slots") }

func (c *pgCopy) targetColumns(ctx context.Context, table string) ([]copyColumn, error) {
	rows, err := c.dst.Query(ctx, `SELECT column_name::text, data_type::text, is_identity = 'YES'
		FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = $1 AND is_generated = 'NEVER'
		ORDER BY ordinal_position`, table)
	if err != nil {
		return nil, err
	}
	var out []copyColumn
	for rows.Next() {
		var col copyColumn
		if err := rows.Scan(&col.name, &col.typ, &col.identity); err != nil {
			return nil, err
		}
		out = append(out, col)
	}
	return out, rows.Err()
}

// sqliteColumns gives a SQLite table's stored columns and its primary
// key's, in key order; ok false when SQLite has no such table.
func (c *pgCopy) sqliteColumns(ctx context.Context, table string) (cols map[string]bool, pk []string, ok bool, err error) {
	rows, err := c.src.QueryContext(ctx, `SELECT name, pk FROM pragma_table_info(?)`, table)
	if err != nil {
		return nil, nil, false, err
	}
	defer rows.Close()
	cols = map[string]bool{}
	keyed := map[int]string{}
	for rows.Next() {
		var name string
		var k int
		if err := rows.Scan(&name, &k); err != nil {
			return nil, nil, false, err
		}
		cols[name] = true
		if k > 0 {
			keyed[k] = name
		}
	}
	for i := 1; i <= len(keyed); i++ {
		pk = append(pk, keyed[i])
	}
	return cols, pk, len(cols) > 0, rows.Err()
}

// copyTable copies one table; nil for a table SQLite does not have
// (PostgreSQL's own bookkeeping, empty after a copy).
func (c *pgCopy) copyTable(ctx context.Context, tx pgx.Tx, table string) (*TableCheck, error) {
	source := sourceOf(table)
	have, pk, ok, err := c.sqliteColumns(ctx, source)
	if err != nil || !ok {
		return nil, err
	}
	target, err := c.targetColumns(ctx, table)
	if err != nil {
		return nil, err
	}
	var names, exprs []string
	var cols []copyColumn
	for _, col := range target {
		expr := ""
		switch {
		case table == "events" && col.name == "id_text":
			expr = "id" // canonical text, whichever form the row keeps
		case table == "events" && col.name == "path":
			expr = "tally_page_path(url)"
		case table == "events" && col.name == "props":
			expr = rawSQL
		case table == "events" && col.name == "received_ms":
			expr = receivedSQL
		case table == "dlq" && col.name == "seq", table == "webhook_secrets" && col.name == "rowid":
			expr = "rowid"
		case col.name == "slot" && table != source:
			expr = "0"
		case have[col.name]:
			expr = `"` + col.name + `"`
		default:
			continue // PostgreSQL's own column: its default
		}
		names = append(names, col.name)
		exprs = append(exprs, expr)
		cols = append(cols, col)
	}
	order := "rowid"
	if len(pk) > 0 {
		order = `"` + strings.Join(pk, `", "`) + `"`
	}
	if table == "audit_log" {
		order = "seq"
	}
	check := &TableCheck{Table: table}
	if err := c.src.QueryRowContext(ctx, `SELECT COUNT(*) FROM "`+source+`"`).Scan(&check.SQLite); err != nil {
		return nil, err
	}
	rows, err := c.src.QueryContext(ctx, `SELECT `+strings.Join(exprs, ", ")+` FROM "`+source+`" ORDER BY `+order)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	merge, err := c.newMerge(ctx, table, cols)
	if err != nil {
		return nil, err
	}
	src := &rowSource{rows: rows, c: c, table: table, cols: cols, vals: make([]any, len(cols)), total: check.SQLite, merge: merge}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{table}, names, src); err != nil {
		if src.err != nil {
			return nil, src.err
		}
		return nil, err
	}
	if src.err != nil {
		return nil, src.err
	}
	if err := merge.apply(ctx, tx); err != nil {
		return nil, err
	}
	check.Merged = int64(len(merge.held))
	if c.progress != nil {
		c.progress(table, src.done, check.SQLite)
	}
	return check, nil
}

// rowSource feeds CopyFrom from SQLite's rows, converting each value to
// what the target column takes.
type rowSource struct {
	rows        *sql.Rows
	c           *pgCopy
	table       string
	cols        []copyColumn
	vals        []any
	out         []any
	done, total int64
	err         error
	merge       *copyMerge
}

// Next reads the next row that is not folded into an earlier one.
func (s *rowSource) Next() bool {
	for s.next() {
		if !s.merge.fold(s.out) {
			return true
		}
	}
	return false
}

func (s *rowSource) next() bool {
	if s.err != nil || !s.rows.Next() {
		if s.err == nil {
			s.err = s.rows.Err()
		}
		return false
	}
	ptrs := make([]any, len(s.vals))
	for i := range s.vals {
		ptrs[i] = &s.vals[i]
	}
	if err := s.rows.Scan(ptrs...); err != nil {
		s.err = err
		return false
	}
	s.out = make([]any, len(s.vals))
	for i, col := range s.cols {
		v, err := s.convert(col, s.vals[i])
		if err != nil {
			s.err = fmt.Errorf("column %s: %w", col.name, err)
			return false
		}
		if t, ok := v.(string); ok && col.typ == "json" {
			v = pgJSON(t)
		}
		s.out[i] = engine.PGText(v) // as the driver stores text (docs/postgresql.md#text-with-nul-and-invalid-utf-8)
	}
	s.done++
	if s.c.progress != nil && s.done%50000 == 0 {
		s.c.progress(s.table, s.done, s.total)
	}
	return true
}

func (s *rowSource) convert(col copyColumn, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	if s.table == "events" {
		switch col.name {
		case "props":
			return propsOf(text(v)), nil
		case "received_ms":
			t, err := time.Parse(timeLayout, text(v))
			if err != nil {
				return nil, nil
			}
			return t.UnixMilli(), nil
		case "credential":
			return s.c.credentialCode(text(v)), nil
		}
	}
	if b, ok := v.([]byte); ok && len(b) == 16 && col.typ == "text" && (col.name == "id" || col.name == "id_text") {
		// dedupKey's 16 bytes of a canonical UUID: PostgreSQL keeps the
		// text (docs/storage.md#storage, On PostgreSQL).
		u, _ := uuid.FromBytes(b)
		return u.String(), nil
	}
	switch col.typ {
	case "bytea":
		switch x := v.(type) {
		case string:
			return []byte(x), nil
		case []byte:
			// An empty blob, not NULL (pgx sends a nil slice as NULL).
			if x == nil {
				return []byte{}, nil
			}
		}
	case "text", "json":
		switch x := v.(type) {
		case []byte:
			return string(x), nil
		case int64:
			return strconv.FormatInt(x, 10), nil
		case float64:
			return strconv.FormatFloat(x, 'g', -1, 64), nil
		}
	case "bigint", "integer", "smallint":
		switch x := v.(type) {
		case string:
			return strconv.ParseInt(x, 10, 64)
		case []byte:
			return strconv.ParseInt(string(x), 10, 64)
		case float64:
			return int64(x), nil
		}
	}
	return v, nil
}

func (s *rowSource) Values() ([]any, error) { return s.out, nil }
func (s *rowSource) Err() error             { return s.err }

func text(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return fmt.Sprint(v)
}

// propsOf is events.props on PostgreSQL (docs/storage.md#storage, On
// PostgreSQL): the properties object of the wire text as sent, nil when
// there is none.
func propsOf(raw string) any {
	var ev struct {
		Properties json.RawMessage `json:"properties"`
	}
	if json.Unmarshal([]byte(raw), &ev) != nil || len(ev.Properties) == 0 || ev.Properties[0] != '{' {
		return nil
	}
	return string(ev.Properties)
}

// credentialCode is the code of an events row's credential column: a
// code already, or the text rows of before SQLite's 0019 keep.
func (c *pgCopy) credentialCode(v string) int64 {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return n
	}
	if code, ok := c.credentials[v]; ok {
		return code
	}
	code := c.next
	c.next++
	c.credentials[v] = code
	return code
}

// setIdentities moves every identity past the largest id copied and past
// what SQLite's AUTOINCREMENT handed out, so no id is ever reused.
func (c *pgCopy) setIdentities(ctx context.Context, tx pgx.Tx, tables []string) error {
	for _, t := range tables {
		cols, err := c.targetColumns(ctx, t)
		if err != nil {
			return err
		}
		for _, col := range cols {
			if !col.identity {
				continue
			}
			var used int64
			if t == sourceOf(t) {
				_ = c.src.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM sqlite_sequence WHERE name = ?`, t).Scan(&used)
			}
			id := pgx.Identifier{col.name}.Sanitize()
			_, err := tx.Exec(ctx, `SELECT setval(pg_get_serial_sequence($1, $2), GREATEST(COALESCE((SELECT MAX(`+id+`) FROM `+pgx.Identifier{t}.Sanitize()+`), 0), $3::bigint, 1),
				GREATEST(COALESCE((SELECT MAX(`+id+`) FROM `+pgx.Identifier{t}.Sanitize()+`), 0), $3::bigint) > 0)`, t, col.name, used)
			if err != nil {
				return fmt.Errorf("set the identity of %s.%s: %w", t, col.name, err)
			}
		}
	}
	return nil
}

// verify fills in the PostgreSQL side of check: rows and, for a rollup,
// every counter's sum (summed over the slots) beside SQLite's.
func (c *pgCopy) verify(ctx context.Context, tx pgx.Tx, check *TableCheck) error {
	q := pgx.Identifier{check.Table}.Sanitize()
	if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM `+q).Scan(&check.Postgres); err != nil {
		return err
	}
	source := sourceOf(check.Table)
	if source == check.Table {
		return nil
	}
	have, pk, _, err := c.sqliteColumns(ctx, source)
	if err != nil {
		return err
	}
	key := map[string]bool{}
	for _, k := range pk {
		key[k] = true
	}
	var counters []string
	for name := range have {
		if !key[name] {
			counters = append(counters, name)
		}
	}
	sort.Strings(counters)
	for _, name := range counters {
		s := SumCheck{Column: name}
		if err := c.src.QueryRowContext(ctx, `SELECT COALESCE(SUM("`+name+`"), 0) FROM "`+source+`"`).Scan(&s.SQLite); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT COALESCE(SUM(`+pgx.Identifier{name}.Sanitize()+`), 0)::bigint FROM `+q).Scan(&s.Postgres); err != nil {
			return err
		}
		check.Sums = append(check.Sums, s)
	}
	return nil
}

// conversionTables are SQLite's background conversions' progress tables,
// each holding its row until the conversion is done; PostgreSQL has none.
var conversionTables = []string{"raw_conversion", "event_columns_conversion", "event_pages_backfill", "session_times_conversion", "visit_backfill"}

// conversionsDone refuses a file one of whose conversions stopped before
// its end (a failure ends it until the next start), naming it.
func conversionsDone(ctx context.Context, db *sql.DB) error {
	for _, t := range conversionTables {
		var n int
		err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM "`+t+`"`).Scan(&n)
		if err != nil && strings.Contains(err.Error(), "no such table") {
			continue
		}
		if err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("the background conversion %s has not finished (it stopped on an error): start the server once, let it finish (its log says so), stop it and run migrate-to again", t)
		}
	}
	return nil
}
