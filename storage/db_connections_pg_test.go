package storage

import (
	"context"
	"database/sql"
	"testing"
	"time"
)

// TestPostgresConnectionsPerInstance: an instance holds the writer's, the
// listener's and the rollup slot's connections plus at most its read pool
// (docs/postgresql.md#running-n-instances-on-postgresql: max_connections).
func TestPostgresConnectionsPerInstance(t *testing.T) {
	t.Parallel()
	onlyPostgres(t, "PostgreSQL's connections")
	ctx := context.Background()
	const pool = 3
	db, err := openTestDB(t, ctx, Options{Path: ":memory:", ReadConns: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	co := db.pg.co.(*pgCoord)
	for deadline := time.Now().Add(30 * time.Second); !co.l.Up(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the listener did not connect within 30 s")
		}
	}
	// Hold every read connection, and one more asked for, which waits.
	var conns []*sql.Conn
	for range pool {
		c, err := db.read.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if c, err := db.read.Conn(wctx); err == nil {
		c.Close()
		t.Fatalf("got a read connection beyond the pool of %d, want a wait", pool)
	}
	var n int
	if err := conns[0].QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if want := 3 + pool; n != want {
		t.Errorf("got %d connections to the database, want %d (writer, listener, slot and %d reads)", n, want, pool)
	}
}
