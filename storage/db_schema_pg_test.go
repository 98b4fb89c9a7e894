package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql's pgx driver, which the service uses

	"github.com/tally-analytics/tally/internal/dbtest"
)

// The tests below apply storage/migrations_pg/*.sql with pgx directly, not
// through Open's runner, so that the schema is checked on its own: every
// file, in order, each in one transaction.

// pgSchemaFiles returns the PostgreSQL migrations' texts in version order.
func pgSchemaFiles(t *testing.T) []string {
	t.Helper()
	names, err := filepath.Glob("migrations_pg/*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("migrations_pg/*.sql: %v (%d files)", err, len(names))
	}
	sort.Strings(names)
	var out []string
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

// pgConnect opens a connection as role (the URL's user replaced), closed at
// the test's end.
func pgConnect(t *testing.T, base, role string) *pgx.Conn {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	c, err := pgx.Connect(context.Background(), u.String())
	if err != nil {
		t.Fatalf("connect as %s: %v", role, err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// pgApplySchema runs every PostgreSQL migration on c, each in a transaction.
func pgApplySchema(t *testing.T, c *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	for i, body := range pgSchemaFiles(t) {
		tx, err := c.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, body); err != nil {
			tx.Rollback(ctx)
			t.Fatalf("migration %d: %v", i+1, err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// startSchemaPostgres makes a database of the test's own on the shared
// PostgreSQL cluster (superuser tally), with the schema applied by
// tally_owner, a role that is not a superuser: the owner of every table,
// as the service's role is when it runs the migrations. It returns the
// database's URL.
func startSchemaPostgres(t *testing.T) string {
	t.Helper()
	base := dbtest.SharedDatabase(t, "")
	super := pgConnect(t, base, "tally")
	pgCreateRole(t, super, "tally_owner")
	for _, q := range []string{
		`GRANT CREATE ON SCHEMA public TO tally_owner`,
		// As a careless setup may: every role gets every privilege on the
		// owner's new tables, so only the schema's REVOKE keeps UPDATE,
		// DELETE and TRUNCATE of audit_log from PUBLIC.
		`ALTER DEFAULT PRIVILEGES FOR ROLE tally_owner GRANT ALL ON TABLES TO PUBLIC`,
	} {
		if _, err := super.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	pgApplySchema(t, pgConnect(t, base, "tally_owner"))
	return base
}

// pgCreateRole creates a login role unless the cluster has it: roles
// belong to the cluster, which the tests share, not to a test's database
// (tests at once may both try).
func pgCreateRole(t *testing.T, super *pgx.Conn, role string) {
	t.Helper()
	q := `DO $$ BEGIN CREATE ROLE ` + role + ` LOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`
	if _, err := super.Exec(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// pgColumn is one column as both catalogues describe it.
type pgColumn struct {
	typ     string // SQLite's declared type, or PostgreSQL's data_type
	notNull bool
	pk      int // position in the primary key, from 1; 0 if not in it
	collate string
	dflt    string // the default's text ("" for none), PostgreSQL's without "::text"
}

// Differences from SQLite that the PostgreSQL schema makes on purpose
// (docs/postgresql.md#on-postgresql); anything else is drift.
var (
	// Tables SQLite has that PostgreSQL does not.
	pgSkipsTables = map[string]string{
		"raw_conversion":           "conversion progress: nothing is converted on PostgreSQL",
		"event_columns_conversion": "conversion progress: nothing is converted on PostgreSQL",
		"event_pages_backfill":     "conversion progress: nothing is converted on PostgreSQL",
		"session_times_conversion": "conversion progress: nothing is converted on PostgreSQL",
		"visit_backfill":           "conversion progress: nothing is converted on PostgreSQL",
		"identity_links_rowid":     "the table of before 0017, dropped on a new SQLite database",
		"sqlite_sequence":          "SQLite's own AUTOINCREMENT table; identities on PostgreSQL",
		"schema_migrations":        "created by the runner on each backend, not by a migration",
	}
	// Tables PostgreSQL has that SQLite does not.
	pgOnlyTables = map[string]string{
		"partial_changes": "generations of closed hours shared by the instances",
		"quota_leases":    "INGEST_QUOTA blocks taken by each instance",
	}
	// SQLite's hot rollup tables: on PostgreSQL a table with a slot in its
	// key, read through a view of SQLite's name that sums the slots.
	pgSlotTables = map[string]string{
		"daily_events":     "daily_events_slots",
		"daily_dimensions": "daily_dimensions_slots",
		"daily_sessions":   "daily_sessions_slots",
		"site_usage":       "site_usage_slots",
	}
	// Columns PostgreSQL adds, as table.column.
	pgOnlyColumns = map[string]string{
		"events.path":           "the page path, computed in Go at ingest (tally_page_path on SQLite)",
		"events.props":          "the properties as sent, written in Go at ingest (tally_prop on SQLite)",
		"events.received_ms":    "the arrival time, written at ingest (event_received_at on SQLite)",
		"sites.deleting_since":  "a site being deleted stays hidden on every instance",
		"dlq.seq":               "the erasure sweep's row handle (the rowid on SQLite)",
		"dlq.replay_until":      "a replay's claim, so two instances do not both send it",
		"webhook_secrets.rowid": "the secret's id, SQLite's rowid of the table",
	}
	// Unique constraints and foreign keys PostgreSQL adds.
	pgOnlyUniques = map[string]string{
		"dlq(seq)":               "the erasure sweep's row handle names one row",
		"webhook_secrets(rowid)": "the secret's id names one row",
	}
	// None since PG 0012: event_pages follows events by statement
	// triggers (TestPostgresEventPagesFollowEvents).
	pgOnlyForeignKeys = map[string]string{}
	// Indexes that carry a column SQLite's index holds without naming it
	// (every SQLite index holds the rowid): PostgreSQL's definition, why.
	pgIndexIncludes = map[string][2]string{
		"events_site_anon_ts": {"events(site_id, anon_id, ts_ms, seq)",
			"the timeline ranks a user's events from the index alone (docs/postgresql.md#reads-at-10m)"},
	}
	// Defaults written differently.
	pgDefaultChanges = map[string]string{
		"webhook_secrets.created_at": "now in the same layout; SQLite's strftime('%Y-%m-%dT%H:%M:%fZ', 'now') is not PostgreSQL's",
	}
	// Columns whose PostgreSQL type is not the one SQLite's declared type maps to.
	pgTypeChanges = map[string]string{
		"events.raw":        "bytea: compressed bytes in SQLite's TEXT column",
		"events.credential": "bigint: the code the writer passes as an integer (SQLite's TEXT affinity makes it text)",
		"imported_ids.id":   "text: ANY on SQLite (16 bytes or text); always the id's text on PostgreSQL",
	}
)

// pgTypeFits says whether PostgreSQL's data_type is what SQLite's declared
// type maps to.
func pgTypeFits(sqlite, pg string) bool {
	switch strings.ToUpper(sqlite) {
	case "INTEGER":
		return pg == "smallint" || pg == "integer" || pg == "bigint"
	case "TEXT":
		return pg == "text"
	case "BLOB":
		return pg == "bytea"
	case "":
		return true // a view's computed column: SQLite declares no type
	}
	return false
}

// catalogue is what the drift guard compares of one schema. Indexes,
// unique constraints and foreign keys are keyed by a definition such as
// "dlq(site_id, user_id)" or "sites(workspace_id) -> workspaces(id) ON
// DELETE NO ACTION"; indexes also by name, since the code names some
// (INDEXED BY on SQLite).
type catalogue struct {
	rels    map[string]string // "table" or "view"
	cols    map[string]map[string]pgColumn
	idx     map[string]string // name -> definition
	uniques map[string]bool
	fks     map[string]bool
}

func newCatalogue() catalogue {
	return catalogue{rels: map[string]string{}, cols: map[string]map[string]pgColumn{}, idx: map[string]string{},
		uniques: map[string]bool{}, fks: map[string]bool{}}
}

func (c catalogue) column(rel, col string, p pgColumn) {
	if c.cols[rel] == nil {
		c.cols[rel] = map[string]pgColumn{}
	}
	c.cols[rel][col] = p
}

// keyed collects rows of (name, table, column, ...) in order into
// "table(col, ...)" per name.
type keyed struct {
	order []string
	table map[string]string
	cols  map[string][]string
}

func (k *keyed) add(name, table, col string) {
	if k.table == nil {
		k.table, k.cols = map[string]string{}, map[string][]string{}
	}
	if _, ok := k.table[name]; !ok {
		k.order = append(k.order, name)
	}
	k.table[name] = table
	k.cols[name] = append(k.cols[name], col)
}

func (k *keyed) def(name string) string {
	return k.table[name] + "(" + strings.Join(k.cols[name], ", ") + ")"
}

// scanAll runs f on every row of q.
func scanAll(t *testing.T, rows interface {
	Next() bool
	Err() error
	Close()
}, scan func(...any) error, f func(scan func(...any))) {
	t.Helper()
	defer rows.Close()
	for rows.Next() {
		f(func(dest ...any) {
			if err := scan(dest...); err != nil {
				t.Fatal(err)
			}
		})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// liteRows adapts *sql.Rows (whose Close returns an error) to scanAll.
type liteRows struct{ *sql.Rows }

func (r liteRows) Close() { r.Rows.Close() }

func sqliteCatalogue(t *testing.T, db *DB) catalogue {
	t.Helper()
	ctx := context.Background()
	c := newCatalogue()
	query := func(q string, f func(scan func(...any))) {
		t.Helper()
		rows, err := db.read.QueryContext(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		scanAll(t, liteRows{rows}, rows.Scan, f)
	}
	query(`SELECT m.name, m.type, c.name, c.type, c."notnull", c.pk, c.dflt_value
		FROM sqlite_schema m, pragma_table_xinfo(m.name) c
		WHERE m.type IN ('table', 'view') AND c.hidden <> 1`, func(scan func(...any)) {
		var rel, kind, col, typ string
		var notNull bool
		var pk int
		var dflt sql.NullString
		scan(&rel, &kind, &col, &typ, &notNull, &pk, &dflt)
		c.rels[rel] = kind
		c.column(rel, col, pgColumn{typ: typ, notNull: notNull, pk: pk, dflt: dflt.String})
	})
	// Indexes made by CREATE INDEX (origin c) and UNIQUE constraints (u).
	var idx, uniq keyed
	query(`SELECT l.name, l.origin, m.name, i.name
		FROM sqlite_schema m, pragma_index_list(m.name) l, pragma_index_info(l.name) i
		WHERE m.type = 'table' AND l.origin IN ('c', 'u') ORDER BY l.name, i.seqno`, func(scan func(...any)) {
		var name, origin, table, col string
		scan(&name, &origin, &table, &col)
		if origin == "c" {
			idx.add(name, table, col)
		} else {
			uniq.add(name, table, col)
		}
	})
	for _, n := range idx.order {
		c.idx[n] = idx.def(n)
	}
	for _, n := range uniq.order {
		c.uniques[uniq.def(n)] = true
	}
	var from, to keyed
	del := map[string]string{}
	query(`SELECT m.name, f.id, f."table", f."from", f."to", f.on_delete
		FROM sqlite_schema m, pragma_foreign_key_list(m.name) f
		WHERE m.type = 'table' ORDER BY m.name, f.id, f.seq`, func(scan func(...any)) {
		var table, ref, fromCol, toCol, onDelete string
		var id int
		scan(&table, &id, &ref, &fromCol, &toCol, &onDelete)
		name := fmt.Sprint(table, "#", id)
		from.add(name, table, fromCol)
		to.add(name, ref, toCol)
		del[name] = onDelete
	})
	for _, n := range from.order {
		c.fks[from.def(n)+" -> "+to.def(n)+" ON DELETE "+del[n]] = true
	}
	return c
}

func postgresCatalogue(t *testing.T, conn *pgx.Conn) catalogue {
	t.Helper()
	ctx := context.Background()
	c := newCatalogue()
	query := func(q string, f func(scan func(...any))) {
		t.Helper()
		rows, err := conn.Query(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		scanAll(t, rows, rows.Scan, f)
	}
	query(`SELECT t.table_name, t.table_type, c.column_name, c.data_type, c.is_nullable = 'NO',
			coalesce(c.collation_name, ''), coalesce(c.column_default, '')
		FROM information_schema.tables t JOIN information_schema.columns c USING (table_schema, table_name)
		WHERE t.table_schema = 'public'`, func(scan func(...any)) {
		var rel, kind, col, typ, collate, dflt string
		var notNull bool
		scan(&rel, &kind, &col, &typ, &notNull, &collate, &dflt)
		c.rels[rel] = map[string]string{"BASE TABLE": "table", "VIEW": "view"}[kind]
		c.column(rel, col, pgColumn{typ: typ, notNull: notNull, collate: collate, dflt: strings.TrimSuffix(dflt, "::text")})
	})
	var idx, uniq keyed
	query(`SELECT ci.relname, c.relname, a.attname, i.indisprimary, i.indisunique,
			EXISTS (SELECT 1 FROM pg_constraint WHERE conindid = i.indexrelid)
		FROM pg_index i
		JOIN pg_class c ON c.oid = i.indrelid
		JOIN pg_class ci ON ci.oid = i.indexrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
		CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
		ORDER BY ci.relname, k.ord`, func(scan func(...any)) {
		var name, table, col string
		var primary, unique, constraint bool
		scan(&name, &table, &col, &primary, &unique, &constraint)
		switch {
		case primary:
			cc := c.cols[table][col]
			n := 1
			for _, o := range c.cols[table] {
				n += min(o.pk, 1)
			}
			cc.pk = n
			c.cols[table][col] = cc
		case !constraint:
			idx.add(name, table, col)
		case unique:
			uniq.add(name, table, col)
		}
	})
	for _, n := range idx.order {
		c.idx[n] = idx.def(n)
	}
	for _, n := range uniq.order {
		c.uniques[uniq.def(n)] = true
	}
	var from, to keyed
	del := map[string]string{}
	query(`SELECT k.conname, c.relname, a.attname, r.relname, b.attname,
			CASE k.confdeltype WHEN 'a' THEN 'NO ACTION' WHEN 'r' THEN 'RESTRICT' WHEN 'c' THEN 'CASCADE'
				WHEN 'n' THEN 'SET NULL' WHEN 'd' THEN 'SET DEFAULT' END
		FROM pg_constraint k
		JOIN pg_class c ON c.oid = k.conrelid
		JOIN pg_class r ON r.oid = k.confrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
		CROSS JOIN LATERAL unnest(k.conkey, k.confkey) WITH ORDINALITY AS u(f, t, ord)
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = u.f
		JOIN pg_attribute b ON b.attrelid = r.oid AND b.attnum = u.t
		WHERE k.contype = 'f' ORDER BY k.conname, u.ord`, func(scan func(...any)) {
		var name, table, col, ref, refCol, onDelete string
		scan(&name, &table, &col, &ref, &refCol, &onDelete)
		from.add(name, table, col)
		to.add(name, ref, refCol)
		del[name] = onDelete
	})
	for _, n := range from.order {
		c.fks[from.def(n)+" -> "+to.def(n)+" ON DELETE "+del[n]] = true
	}
	return c
}

// TestPostgresSchemaMatchesSQLite is the drift guard between the two
// schemas: every table and view of a new SQLite database (all migrations,
// conversions done) exists on PostgreSQL with the same columns, types that
// fit, the same NOT NULLs, the same primary key and the same indexes, minus
// the differences declared above. A SQLite migration without its
// PostgreSQL twin fails it.
func TestPostgresSchemaMatchesSQLite(t *testing.T) {
	t.Parallel()
	base := startSchemaPostgres(t)
	pg := pgConnect(t, base, "tally")
	lite := openSQLite(t, filepath.Join(t.TempDir(), "a.db"))

	lc, pc := sqliteCatalogue(t, lite), postgresCatalogue(t, pg)
	lrels, lcols, lidx := lc.rels, lc.cols, lc.idx
	prels, pcols, pidx := pc.rels, pc.cols, pc.idx
	if lrels["events"] != "table" || prels["events"] != "table" {
		t.Fatalf("events: got a %q on SQLite and a %q on PostgreSQL, want tables: the catalogues were not read", lrels["events"], prels["events"])
	}

	seen := map[string]bool{}
	for rel, kind := range lrels {
		if _, ok := pgSkipsTables[rel]; ok {
			continue
		}
		seen[rel] = true
		pkind, ok := prels[rel]
		if !ok {
			t.Errorf("%s: on SQLite (a %s), not on PostgreSQL", rel, kind)
			continue
		}
		keyOf := rel // where the primary key is
		if slots, ok := pgSlotTables[rel]; ok {
			if pkind != "view" || prels[slots] != "table" {
				t.Errorf("%s: got a %s and %s a %q on PostgreSQL, want a view over the table %s", rel, pkind, slots, prels[slots], slots)
				continue
			}
			keyOf = slots
			seen[slots] = true
		} else if pkind != kind {
			t.Errorf("%s: got a %s on PostgreSQL, want a %s as on SQLite", rel, pkind, kind)
		}
		for col, l := range lcols[rel] {
			p, ok := pcols[rel][col]
			if !ok {
				t.Errorf("%s.%s: on SQLite, not on PostgreSQL", rel, col)
				continue
			}
			name := rel + "." + col
			if _, ok := pgTypeChanges[name]; !ok && !pgTypeFits(l.typ, p.typ) {
				t.Errorf("%s: got %s on PostgreSQL, want the type SQLite's %s maps to", name, p.typ, l.typ)
			}
			// A view's columns are nullable on PostgreSQL; SQLite's INTEGER
			// PRIMARY KEY reads as nullable in pragma_table_xinfo.
			if pkind == "table" && l.pk == 0 && l.notNull != p.notNull {
				t.Errorf("%s: got NOT NULL %v on PostgreSQL, want %v as on SQLite", name, p.notNull, l.notNull)
			}
			if _, ok := pgDefaultChanges[name]; !ok && pkind == "table" && l.dflt != p.dflt {
				t.Errorf("%s: got default %q on PostgreSQL, want %q as on SQLite", name, p.dflt, l.dflt)
			}
			if kp := pcols[keyOf][col].pk; kp != l.pk {
				t.Errorf("%s: got primary key position %d on PostgreSQL (%s), want %d as on SQLite", name, kp, keyOf, l.pk)
			}
		}
		for col, p := range pcols[rel] {
			if _, ok := lcols[rel][col]; !ok {
				if _, ok := pgOnlyColumns[rel+"."+col]; !ok {
					t.Errorf("%s.%s: on PostgreSQL, not on SQLite nor declared in pgOnlyColumns", rel, col)
				}
			}
			if pkind == "table" && p.typ == "text" && p.collate != "C" {
				t.Errorf("%s.%s: got collation %q, want \"C\" (byte order, as SQLite's BINARY)", rel, col, p.collate)
			}
		}
		if slots, ok := pgSlotTables[rel]; ok {
			for col, p := range pcols[slots] {
				if _, ok := lcols[rel][col]; !ok && col != "slot" {
					t.Errorf("%s.%s: not on SQLite's %s", slots, col, rel)
				}
				if p.typ == "text" && p.collate != "C" {
					t.Errorf("%s.%s: got collation %q, want \"C\"", slots, col, p.collate)
				}
			}
			n := 0
			for _, c := range lcols[rel] {
				n += min(c.pk, 1)
			}
			if got := pcols[slots]["slot"].pk; got != n+1 {
				t.Errorf("%s.slot: got primary key position %d, want %d (after SQLite's key)", slots, got, n+1)
			}
		}
	}
	for rel := range prels {
		if _, ok := pgOnlyTables[rel]; !seen[rel] && !ok {
			t.Errorf("%s: on PostgreSQL, not on SQLite nor declared in pgOnlyTables", rel)
		}
	}
	for name := range pgOnlyColumns {
		rel, col, _ := strings.Cut(name, ".")
		if _, ok := pcols[rel][col]; !ok {
			t.Errorf("%s: declared in pgOnlyColumns, not on PostgreSQL", name)
		}
	}
	for name, def := range lidx {
		if got, ok := pidx[name]; !ok {
			t.Errorf("index %s %s: on SQLite, not on PostgreSQL", name, def)
		} else if inc, ok := pgIndexIncludes[name]; ok && got != inc[0] {
			t.Errorf("index %s: got %s on PostgreSQL, want %s (%s)", name, got, inc[0], inc[1])
		} else if !ok && got != def {
			t.Errorf("index %s: got %s on PostgreSQL, want %s as on SQLite", name, got, def)
		}
	}
	for name, def := range pidx {
		if _, ok := lidx[name]; !ok {
			t.Errorf("index %s %s: on PostgreSQL, not on SQLite", name, def)
		}
	}
	for _, set := range []struct {
		what     string
		lite, pg map[string]bool
		pgOnly   map[string]string
	}{
		{"unique constraint", lc.uniques, pc.uniques, pgOnlyUniques},
		{"foreign key", lc.fks, pc.fks, pgOnlyForeignKeys},
	} {
		for def := range set.lite {
			if !set.pg[def] {
				t.Errorf("%s %s: on SQLite, not on PostgreSQL", set.what, def)
			}
		}
		for def := range set.pg {
			if _, ok := set.pgOnly[def]; !set.lite[def] && !ok {
				t.Errorf("%s %s: on PostgreSQL, not on SQLite nor declared", set.what, def)
			}
		}
		if len(set.lite) == 0 {
			t.Errorf("%ss: none read on SQLite", set.what)
		}
	}
}

// pgRefused runs q and wants it refused with want in the message.
func pgRefused(t *testing.T, c *pgx.Conn, who, q, want string) {
	t.Helper()
	_, err := c.Exec(context.Background(), q)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		t.Errorf("%s: %s: got %v, want refused (%s)", who, q, err, want)
		return
	}
	if !strings.Contains(pe.Message, want) {
		t.Errorf("%s: %s: got %q, want a message with %q", who, q, pe.Message, want)
	}
}

// TestPostgresAuditAppendOnly: audit_log takes inserts and refuses UPDATE,
// DELETE and TRUNCATE from a service role granted every privilege on it and
// from the role that owns it, by the database itself.
func TestPostgresAuditAppendOnly(t *testing.T) {
	t.Parallel()
	base := startSchemaPostgres(t)
	ctx := context.Background()
	super := pgConnect(t, base, "tally")
	pgCreateRole(t, super, "tally_service")
	for _, q := range []string{
		`GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON audit_log TO tally_service`,
	} {
		if _, err := super.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, role := range []string{"tally_service", "tally_owner"} {
		c := pgConnect(t, base, role)
		id := "a-" + role
		if _, err := c.Exec(ctx, `INSERT INTO audit_log(id, workspace_id, actor_kind, action, ts)
			VALUES ($1, 'w', 'admin', 'site.create', $2)`, id, "2026-01-31T09:05:00.120Z-"+role); err != nil {
			t.Fatalf("%s: insert: got %v, want it stored", role, err)
		}
		pgRefused(t, c, role, `UPDATE audit_log SET action = 'x' WHERE id = '`+id+`'`, "append-only")
		pgRefused(t, c, role, `DELETE FROM audit_log WHERE id = '`+id+`'`, "append-only")
		pgRefused(t, c, role, `TRUNCATE audit_log`, "append-only")
	}
	var n int
	if err := super.QueryRow(ctx, `SELECT COUNT(*) FROM audit_log WHERE action = 'site.create'`).Scan(&n); err != nil || n != 2 {
		t.Errorf("rows left: got %d (%v), want 2", n, err)
	}
	// No default privilege lets any other role change it.
	var public bool
	if err := super.QueryRow(ctx, `SELECT has_table_privilege('public', 'audit_log', 'UPDATE, DELETE, TRUNCATE')`).Scan(&public); err != nil || public {
		t.Errorf("PUBLIC may UPDATE, DELETE or TRUNCATE audit_log: got %v (%v), want false", public, err)
	}
}

// TestPostgresRollupViewsSumSlots: each hot rollup reads, under SQLite's
// name, the sum of its slots; a key whose sums are all zero is not there.
func TestPostgresRollupViewsSumSlots(t *testing.T) {
	t.Parallel()
	base := startSchemaPostgres(t)
	ctx := context.Background()
	c := pgConnect(t, base, "tally_owner")
	for _, tc := range []struct {
		name   string
		insert []string
		read   string
		want   []string
	}{
		{"daily_events", []string{
			`INSERT INTO daily_events_slots VALUES ('s', '2026-01-01', 'pageview', 0, 3), ('s', '2026-01-01', 'pageview', 1, 4)`,
			`INSERT INTO daily_events_slots VALUES ('s', '2026-01-02', 'pageview', 0, 2), ('s', '2026-01-02', 'pageview', 1, -2)`,
		}, `SELECT day || ' ' || type || ' ' || count FROM daily_events WHERE site_id = 's' ORDER BY day`,
			[]string{"2026-01-01 pageview 7"}},
		{"daily_dimensions", []string{
			`INSERT INTO daily_dimensions_slots VALUES ('s', '2026-01-01', 'url', '/a', 0, 1), ('s', '2026-01-01', 'url', '/a', 5, 2)`,
			`INSERT INTO daily_dimensions_slots VALUES ('s', '2026-01-01', 'url', '/b', 0, 1), ('s', '2026-01-01', 'url', '/b', 5, -1)`,
		}, `SELECT value || ' ' || count FROM daily_dimensions WHERE site_id = 's' AND day = '2026-01-01' ORDER BY value`,
			[]string{"/a 3"}},
		{"daily_sessions", []string{
			`INSERT INTO daily_sessions_slots VALUES ('s', '2026-01-01', 0, 2, 1000, 5, 1), ('s', '2026-01-01', 1, 1, 500, 1, 1)`,
			`INSERT INTO daily_sessions_slots VALUES ('s', '2026-01-02', 0, 1, 10, 2, 0), ('s', '2026-01-02', 1, -1, -10, -2, 0)`,
			// A merge may leave a duration with no session: still shown.
			`INSERT INTO daily_sessions_slots VALUES ('s', '2026-01-03', 0, 1, 10, 2, 1), ('s', '2026-01-03', 1, -1, 0, -2, -1)`,
		}, `SELECT day || ' ' || sessions || ' ' || duration_ms || ' ' || events || ' ' || bounces FROM daily_sessions WHERE site_id = 's' ORDER BY day`,
			[]string{"2026-01-01 3 1500 6 2", "2026-01-03 0 10 0 0"}},
		{"site_usage", []string{
			`INSERT INTO site_usage_slots VALUES ('s', '2026-01', 0, 10), ('s', '2026-01', 3, 5), ('t', '2026-01', 0, 0)`,
		}, `SELECT site_id || ' ' || accepted FROM site_usage WHERE month = '2026-01' ORDER BY site_id`,
			[]string{"s 15"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, q := range tc.insert {
				if _, err := c.Exec(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			rows, err := c.Query(ctx, tc.read)
			if err != nil {
				t.Fatal(err)
			}
			got, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestPostgresSchemaAppliesInOneTransaction: the schema applies to an empty
// database inside one transaction, and a rollback leaves nothing of it.
func TestPostgresSchemaAppliesInOneTransaction(t *testing.T) {
	t.Parallel()
	base := dbtest.SharedDatabase(t, "")
	ctx := context.Background()
	c := pgConnect(t, base, "tally")
	count := func(q pgx.Tx) (n int) {
		var err error
		if q != nil {
			err = q.QueryRow(ctx, pgObjects).Scan(&n)
		} else {
			err = c.QueryRow(ctx, pgObjects).Scan(&n)
		}
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count(nil)
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, body := range pgSchemaFiles(t) {
		if _, err := tx.Exec(ctx, body); err != nil {
			t.Fatalf("migration %d: %v", i+1, err)
		}
	}
	if in := count(tx); in <= before {
		t.Errorf("objects inside the transaction: got %d, want more than %d", in, before)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if after := count(nil); after != before {
		t.Errorf("objects after the rollback: got %d, want %d", after, before)
	}
}

// pgObjects counts the relations, functions and triggers outside the
// system's schemas.
const pgObjects = `SELECT
	(SELECT COUNT(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')) +
	(SELECT COUNT(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')) +
	(SELECT COUNT(*) FROM pg_trigger)`

// TestPostgresGeneratedColumnsMatchSQLite: the columns SQLite computes when
// read (VIRTUAL) and PostgreSQL stores, from the same written columns,
// read the same on both, for rows of the new form and of the old, times
// before 1970 included.
func TestPostgresGeneratedColumnsMatchSQLite(t *testing.T) {
	t.Parallel()
	base := startSchemaPostgres(t)
	ctx := context.Background()
	pg := pgConnect(t, base, "tally_owner")
	lite := openSQLite(t, filepath.Join(t.TempDir(), "a.db"))

	agent := func(browser, os, device int) int { return browser + 32*os + 512*device }
	type session struct {
		start, end      string // start_text, end_text
		startMS, durMS  any
		referrer, utm   any
		sourceText      any
		agent           any
		browserText, os any
	}
	sessions := []session{
		{"", "", int64(1769850300120), int64(65000), "example.com/a/b", nil, nil, agent(1, 2, 1), nil, nil},
		{"2026-01-31T09:05:00.120Z", "2026-01-31T09:06:00.999Z", nil, nil, "example.com", nil, nil, nil, "Lynx", "Plan 9"},
		{"", "", int64(-1), int64(1), "android-app://com.google.android.gm/x", nil, nil, agent(16, 8, 4), nil, nil},
		{"", "", int64(0), int64(0), "android-app://", nil, nil, agent(17, 0, 0), nil, nil},
		{"", "", int64(951868799000), int64(999), "", "news", nil, agent(0, 9, 0), nil, nil},
		{"", "", int64(951868799000), int64(0), nil, nil, "kept", nil, nil, nil},
		{"1969-12-31T23:59:59.999Z", "2000-02-29T23:59:59.000Z", nil, nil, "/path-only", nil, nil, nil, nil, nil},
	}
	for i, s := range sessions {
		args := []any{i + 1, s.start, s.end, s.startMS, s.durMS, s.referrer, s.utm, s.sourceText, s.agent, s.browserText, s.os}
		if _, err := lite.write.ExecContext(ctx, `INSERT INTO sessions(id, site_id, anon_id, start_text, end_text, event_count,
			start_ms, duration_ms, referrer, utm_source, source_text, agent, browser_text, os_text)
			VALUES (?, 's', 'a', ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?)`, args...); err != nil {
			t.Fatalf("sqlite session %d: %v", i+1, err)
		}
		if _, err := pg.Exec(ctx, `INSERT INTO sessions(id, site_id, anon_id, start_text, end_text, event_count,
			start_ms, duration_ms, referrer, utm_source, source_text, agent, browser_text, os_text)
			VALUES ($1, 's', 'a', $2, $3, 1, $4, $5, $6, $7, $8, $9, $10, $11)`, args...); err != nil {
			t.Fatalf("postgres session %d: %v", i+1, err)
		}
	}
	events := []struct {
		ts    string
		agent any
	}{
		{"2026-01-31T09:05:00.120Z", agent(4, 5, 1)},
		{"1969-12-31T23:59:59.999Z", nil},
		{"2000-02-29T23:59:59.000Z", agent(2, 3, 2)},
		{"1970-01-01T00:00:00.000Z", agent(31, 15, 7)},
	}
	for i, e := range events {
		args := []any{i + 1, fmt.Sprintf("id-%d", i+1), e.ts, e.agent}
		if _, err := lite.write.ExecContext(ctx, `INSERT INTO events(seq, id_text, site_id, type, ts, anon_id, raw, received_at, agent, browser_text)
			VALUES (?, ?, 's', 'pageview', ?, 'a', x'00', '', ?, 'Lynx')`, args...); err != nil {
			t.Fatalf("sqlite event %d: %v", i+1, err)
		}
		if _, err := pg.Exec(ctx, `INSERT INTO events(seq, id_text, site_id, type, ts, anon_id, raw, received_at, agent, browser_text)
			VALUES ($1, $2, 's', 'pageview', $3, 'a', '\x00', '', $4, 'Lynx')`, args...); err != nil {
			t.Fatalf("postgres event %d: %v", i+1, err)
		}
	}

	for _, q := range []string{
		`SELECT id, started_ms, ended_ms, started_at, ended_at, source, browser, os, device FROM sessions ORDER BY id`,
		`SELECT seq, ts_ms, id, browser, os, device_type FROM events ORDER BY seq`,
	} {
		want := readLiteRows(t, lite, q)
		got := readPGRows(t, pg, q)
		if len(want) == 0 || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s\n got %q on PostgreSQL,\nwant %q as on SQLite", q, got, want)
		}
	}
}

// readLiteRows reads q's rows as text, NULL as "NULL".
func readLiteRows(t *testing.T, db *DB, q string) [][]string {
	t.Helper()
	rows, err := db.read.QueryContext(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, asText(vals))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// readPGRows reads q's rows as text, NULL as "NULL".
func readPGRows(t *testing.T, c *pgx.Conn, q string) [][]string {
	t.Helper()
	rows, err := c.Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, asText(vals))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func asText(vals []any) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		switch v := v.(type) {
		case nil:
			out[i] = "NULL"
		case []byte:
			out[i] = string(v)
		default:
			out[i] = fmt.Sprint(v)
		}
	}
	return out
}

// TestPostgresEventPagesFollowEvents: on PostgreSQL no trigger writes
// event_pages (the ingest statement does), but deleting an event still
// deletes its row, whoever deletes it, as SQLite's delete trigger does, and
// a TRUNCATE of events empties it (PG migration 0012's statement triggers,
// which replaced the foreign key).
func TestPostgresEventPagesFollowEvents(t *testing.T) {
	t.Parallel()
	base := startSchemaPostgres(t)
	ctx := context.Background()
	c := pgConnect(t, base, "tally_owner")
	for _, q := range []string{
		`INSERT INTO events(seq, id_text, site_id, type, ts, anon_id, raw, received_at) VALUES
			(1, 'a', 's', 'pageview', '2026-01-31T09:05:00.120Z', 'x', '\x00', ''),
			(2, 'b', 's', 'signup', '2026-01-31T09:05:00.120Z', 'x', '\x00', '')`,
		`INSERT INTO event_pages(seq, name, path) VALUES (1, NULL, '/a'), (2, 'signup', '/b')`,
		`DELETE FROM events WHERE seq = 1`,
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	rows, err := c.Query(ctx, `SELECT seq FROM event_pages ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[2]" {
		t.Errorf("event_pages after deleting event 1: got seqs %v, want [2]", got)
	}
	if _, err := c.Exec(ctx, `TRUNCATE events`); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := c.QueryRow(ctx, `SELECT count(*) FROM event_pages`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("event_pages after TRUNCATE events: got %d rows, want 0", left)
	}
}

// TestPostgresEventCredentials: events.credential takes the code as the
// writer passes it (an int64, through database/sql and pgx's driver, as
// the service does), and event_credentials gives every event's credential
// as text, as on SQLite.
func TestPostgresEventCredentials(t *testing.T) {
	t.Parallel()
	base := startSchemaPostgres(t)
	ctx := context.Background()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User("tally_owner")
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var code int64
	if err := db.QueryRowContext(ctx, `INSERT INTO credentials(credential) VALUES ($1) RETURNING code`, "key:k1").Scan(&code); err != nil {
		t.Fatal(err)
	}
	for i, cred := range []any{code, nil} {
		if _, err := db.ExecContext(ctx, `INSERT INTO events(seq, id_text, site_id, type, ts, anon_id, raw, received_at, credential)
			VALUES ($1, $2, 's', 'pageview', '2026-01-31T09:05:00.120Z', 'a', $3, '', $4)`, i+1, fmt.Sprint("e", i), []byte{1}, cred); err != nil {
			t.Fatalf("insert with credential %v: got %v, want it stored", cred, err)
		}
	}
	var got []string
	rows, err := db.QueryContext(ctx, `SELECT seq, coalesce(credential, 'NULL') FROM event_credentials ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var cred string
		if err := rows.Scan(&seq, &cred); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprint(seq, " ", cred))
	}
	if fmt.Sprint(got) != "[1 key:k1 2 NULL]" {
		t.Errorf("event_credentials: got %q, want [1 key:k1 2 NULL]", got)
	}
}

// TestPostgresRollupViewsPushKeysDown: a read of a rollup view by site and
// day range reaches the slots table through its primary key, bounded by
// those keys (PostgreSQL pushes the conditions on grouped columns below the
// GROUP BY), rather than summing the whole table first.
func TestPostgresRollupViewsPushKeysDown(t *testing.T) {
	t.Parallel()
	base := startSchemaPostgres(t)
	ctx := context.Background()
	c := pgConnect(t, base, "tally_owner")
	if _, err := c.Exec(ctx, `SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ view, read, want string }{
		{"daily_events", `SELECT day, count FROM daily_events WHERE site_id = 's' AND type = 'pageview' AND day >= '2026-01-01' AND day <= '2026-01-31'`,
			"daily_events_slots_pkey"},
		{"daily_dimensions", `SELECT value, SUM(count) FROM daily_dimensions WHERE site_id = 's' AND dimension = 'url' AND day >= '2026-01-01' AND day <= '2026-01-31' GROUP BY value`,
			"daily_dimensions_slots_pkey"},
		{"daily_sessions", `SELECT SUM(sessions) FROM daily_sessions WHERE site_id = 's' AND day >= '2026-01-01' AND day <= '2026-01-31'`,
			"daily_sessions_slots_pkey"},
		{"site_usage", `SELECT accepted FROM site_usage WHERE site_id = 's' AND month = '2026-01'`, "site_usage_slots_pkey"},
	} {
		t.Run(tc.view, func(t *testing.T) {
			rows, err := c.Query(ctx, "EXPLAIN "+tc.read)
			if err != nil {
				t.Fatal(err)
			}
			lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			plan := strings.Join(lines, "\n")
			if !strings.Contains(plan, tc.want) || !strings.Contains(plan, "Index Cond: ((site_id = 's'") {
				t.Errorf("plan:\n%s\nwant an index scan of %s with the site in its Index Cond", plan, tc.want)
			}
		})
	}
}
