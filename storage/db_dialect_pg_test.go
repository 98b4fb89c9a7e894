package storage

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tally-analytics/tally/internal/dbtest"

	"github.com/tally-analytics/tally/storage/internal/engine"
)

func TestPostgresClassifyCodes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		code string
		want engine.ErrClass
	}{
		{"53100", engine.ClassFull}, {"25006", engine.ClassReadOnly}, {"57P01", engine.ClassUnavailable}, {"57P03", engine.ClassUnavailable},
		{"08006", engine.ClassUnavailable}, {"40P01", engine.ClassRetry}, {"40001", engine.ClassRetry}, {"23505", engine.ClassUnique},
		{"23503", engine.ClassOther}, {"42601", engine.ClassOther},
	} {
		err := fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: c.code})
		if got := (pgDialect{}).Classify(err); got != c.want {
			t.Errorf("%s: got class %d, want %d", c.code, got, c.want)
		}
	}
	if got := (pgDialect{}).Classify(context.Canceled); got != engine.ClassOther {
		t.Errorf("context.Canceled: got class %d, want engine.ClassOther", got)
	}
	// A commit on a connection the driver closed when its socket went away
	// (PostgreSQL stopped in immediate mode under load, TestFailoverBehindHAProxy):
	// the server is unreachable, a 503, not an internal error.
	if got := (pgDialect{}).Classify(fmt.Errorf("commit: %w", pgconn.ErrConnClosed)); got != engine.ClassUnavailable {
		t.Errorf("commit: conn closed: got class %d, want engine.ClassUnavailable", got)
	}
}

// TestPostgresClassify has a real server say each condition it can be
// made to say here.
func TestPostgresClassify(t *testing.T) {
	t.Parallel()
	url := dbtest.SharedDatabase(t, "")
	db, err := sql.Open(engine.PGDriverName, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE u (k integer PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	_, err = db.ExecContext(ctx, `INSERT INTO u VALUES (1), (1)`)
	if got := (pgDialect{}).Classify(err); got != engine.ClassUnique {
		t.Errorf("duplicate key (%v): got class %d, want engine.ClassUnique", err, got)
	}
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO u VALUES (2)`)
	tx.Rollback()
	if got := engine.Unwritable(pgDialect{}, err); got != engine.ErrReadOnly {
		t.Errorf("write in a read-only transaction (%v): got %v, want engine.ErrReadOnly", err, got)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	gone, err := sql.Open(engine.PGDriverName, "postgres://tally@"+addr+"/postgres?sslmode=disable&connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	defer gone.Close()
	err = gone.PingContext(ctx)
	if got := engine.Unwritable(pgDialect{}, err); got != engine.ErrUnreachable {
		t.Errorf("refused connection (%v): got %v, want engine.ErrUnreachable", err, got)
	}
}
