package storage

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tally-analytics/tally/internal/dbtest"
)

func TestPostgresClassifyCodes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		code string
		want errClass
	}{
		{"53100", errFull}, {"25006", errReadOnlyDB}, {"57P01", errUnavailable}, {"57P03", errUnavailable},
		{"08006", errUnavailable}, {"40P01", errRetry}, {"40001", errRetry}, {"23505", errUnique},
		{"23503", errOther}, {"42601", errOther},
	} {
		err := fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: c.code})
		if got := (pgDialect{}).classify(err); got != c.want {
			t.Errorf("%s: got class %d, want %d", c.code, got, c.want)
		}
	}
	if got := (pgDialect{}).classify(context.Canceled); got != errOther {
		t.Errorf("context.Canceled: got class %d, want errOther", got)
	}
}

// TestPostgresClassify has a real server say each condition it can be
// made to say here.
func TestPostgresClassify(t *testing.T) {
	t.Parallel()
	url := dbtest.StartPostgres(t, "tally")
	db, err := sql.Open(pgDriverName, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE u (k integer PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	_, err = db.ExecContext(ctx, `INSERT INTO u VALUES (1), (1)`)
	if got := (pgDialect{}).classify(err); got != errUnique {
		t.Errorf("duplicate key (%v): got class %d, want errUnique", err, got)
	}
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO u VALUES (2)`)
	tx.Rollback()
	if got := unwritable(pgDialect{}, err); got != errReadOnly {
		t.Errorf("write in a read-only transaction (%v): got %v, want errReadOnly", err, got)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	gone, err := sql.Open(pgDriverName, "postgres://tally@"+addr+"/postgres?sslmode=disable&connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	defer gone.Close()
	err = gone.PingContext(ctx)
	if got := unwritable(pgDialect{}, err); got != errUnreachable {
		t.Errorf("refused connection (%v): got %v, want errUnreachable", err, got)
	}
}
