package storage

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// endlessRead counts rows that never end, on either backend; its comment
// finds it in pg_stat_activity.
const endlessRead = `/* tally-endless-read */ WITH RECURSIVE c(x) AS (SELECT CAST(1 AS BIGINT) UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c`

// TestReadStopsAtItsDeadline: a read whose context ends stops in the
// database too, and the pool serves the next reads: SQLite's driver
// interrupts the statement (sqlite3_interrupt), pgx sends PostgreSQL a
// cancel request and drops the connection. The query API's deadlines
// (server/read_deadline.go) rest on it.
func TestReadStopsAtItsDeadline(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "c.db"))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		var n int64
		done <- db.read.QueryRowContext(ctx, endlessRead).Scan(&n)
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("got an endless read answered, want it stopped")
		}
	case <-time.After(time.Minute):
		t.Fatal("got the read running a minute after its deadline, want it stopped")
	}
	if db.d.Name() == "postgres" {
		// The server stops the statement: wait for it to leave.
		deadline := time.Now().Add(time.Minute)
		for {
			var running int
			err := db.write.QueryRow(`SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND query LIKE '/* tally-endless-read */%'`).Scan(&running)
			if err != nil {
				t.Fatal(err)
			}
			if running == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("got the statement still running on the server a minute after its deadline, want it cancelled")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Every connection of the pool still reads.
	for range db.readConns {
		var one int
		if err := db.read.QueryRow(`SELECT 1`).Scan(&one); err != nil || one != 1 {
			t.Fatalf("got %d, %v after the cancelled read, want 1", one, err)
		}
	}
}
