package engine

import (
	"context"
	"database/sql"
	"testing"

	"github.com/tally-analytics/tally/internal/dbtest"
)

func TestRebind(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, in, want string }{
		{"none", `SELECT 1`, `SELECT 1`},
		{"plain", `SELECT a FROM t WHERE b = ? AND c = ?`, `SELECT a FROM t WHERE b = $1 AND c = $2`},
		{"numbered", `UPDATE t SET a = ?2 WHERE id = ?1 OR p = ?1`, `UPDATE t SET a = $2 WHERE id = $1 OR p = $1`},
		{"two digits", `VALUES (?12, ?3)`, `VALUES ($12, $3)`},
		{"plain after numbered", `SELECT ?2, ?, ?1, ?`, `SELECT $2, $3, $1, $4`},
		{"literal", `SELECT '?', ? WHERE x = 'a?b'`, `SELECT '?', $1 WHERE x = 'a?b'`},
		{"escaped quote", `SELECT 'it''s ?', ?`, `SELECT 'it''s ?', $1`},
		{"empty literal", `SELECT '', ?, ''''`, `SELECT '', $1, ''''`},
		{"backslash literal", `SELECT E'\'?', ?`, `SELECT E'\'?', $1`},
		{"standard literal keeps backslash", `SELECT '\', ?`, `SELECT '\', $1`},
		{"identifier", `SELECT "?", "a""?" FROM t WHERE c = ?`, `SELECT "?", "a""?" FROM t WHERE c = $1`},
		{"line comment", "SELECT ? -- why ?\n, ?", "SELECT $1 -- why ?\n, $2"},
		{"line comment at end", "SELECT ? -- ?", "SELECT $1 -- ?"},
		{"block comment", `SELECT /* ? */ ?`, `SELECT /* ? */ $1`},
		{"nested block comment", `SELECT /* a /* ? */ ? */ ?`, `SELECT /* a /* ? */ ? */ $1`},
		{"dollar quoted", `SELECT $$?$$, $x$ ? $x$, ?`, `SELECT $$?$$, $x$ ? $x$, $1`},
		{"pg parameter untouched", `SELECT $1, ?2`, `SELECT $1, $2`},
		{"minus alone", `SELECT 3 - ?`, `SELECT 3 - $1`},
		{"slash alone", `SELECT 4 / ?`, `SELECT 4 / $1`},
		{"unclosed literal", `SELECT '?`, `SELECT '?`},
		{"mixed", "INSERT INTO t(a, \"b?\") SELECT ?1, 'x''?' /* ? */ WHERE NOT EXISTS (SELECT 1 FROM u WHERE a = ?1 AND c = ?) -- ?",
			"INSERT INTO t(a, \"b?\") SELECT $1, 'x''?' /* ? */ WHERE NOT EXISTS (SELECT 1 FROM u WHERE a = $1 AND c = $2) -- ?"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := rebind(c.in); got != c.want {
				t.Errorf("got %s, want %s", got, c.want)
			}
			if got := rebind(c.in); got != c.want { // from the cache
				t.Errorf("cached: got %s, want %s", got, c.want)
			}
		})
	}
}

// TestPostgresRebindInTx runs SQLite-style placeholders through a
// transaction of the driver, over Exec, Query and a prepared statement,
// against a real PostgreSQL.
func TestPostgresRebindInTx(t *testing.T) {
	t.Parallel()
	url := dbtest.StartPostgres(t, "tally")
	db, err := sql.Open(PGDriverName, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var sum, first int64
	// The casts: PostgreSQL prepares the statement before it sees the
	// arguments, and cannot choose a + for two parameters of unknown type.
	if err := tx.QueryRowContext(ctx, `SELECT ?1::bigint + ?2::bigint, ?1::bigint`, int64(40), int64(2)).Scan(&sum, &first); err != nil {
		t.Fatal(err)
	}
	if sum != 42 || first != 40 {
		t.Errorf("got %d, %d, want 42, 40", sum, first)
	}
	var level string
	if err := tx.QueryRowContext(ctx, `SHOW transaction_isolation`).Scan(&level); err != nil {
		t.Fatal(err)
	}
	if level != "repeatable read" {
		t.Errorf("got isolation %q, want repeatable read (BeginTx's options reach pgx)", level)
	}
	if _, err := tx.ExecContext(ctx, `CREATE TEMP TABLE t (a text, "b?" text)`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO t(a, "b?") VALUES (?, '?') -- ?`, "x"); err != nil {
		t.Fatal(err)
	}
	st, err := tx.PrepareContext(ctx, `SELECT "b?" || ?2 || a FROM t WHERE a = ?1`)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := st.QueryRowContext(ctx, "x", "-").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "?-x" {
		t.Errorf("got %q, want ?-x", got)
	}
}
