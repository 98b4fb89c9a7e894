package storage

import (
	"context"
	"testing"
	"time"

	"github.com/tally-analytics/tally/storage/internal/engine"
)

// TestPostgresDatabaseBytes: on PostgreSQL the database's size is the
// server's figure, measured again only once it is engine.PGSizeEvery old.
func TestPostgresDatabaseBytes(t *testing.T) {
	t.Parallel()
	onlyPostgres(t, "pg_database_size")
	ctx := context.Background()
	db, err := openTestDB(t, ctx, Options{Path: ":memory:"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	db.pg.size.Now = func() time.Time { return now }
	first := db.DiskUsage()
	if first.DatabaseBytes <= 0 || first.WALBytes != 0 || first.FreeBytes != 0 {
		t.Fatalf("got %+v, want a database size and no WAL or free figure", first)
	}
	// A table of about 8 MB makes the database larger.
	if _, err := db.write.ExecContext(ctx, `CREATE TABLE size_probe AS SELECT repeat('x', 1000) AS s FROM generate_series(1, 8000)`); err != nil {
		t.Fatal(err)
	}
	now = now.Add(engine.PGSizeEvery - time.Second)
	if got := db.DiskUsage().DatabaseBytes; got != first.DatabaseBytes {
		t.Errorf("within %v: got %d bytes, want the cached %d", engine.PGSizeEvery, got, first.DatabaseBytes)
	}
	now = now.Add(time.Second)
	if got := db.DiskUsage().DatabaseBytes; got <= first.DatabaseBytes {
		t.Errorf("after %v: got %d bytes, want more than %d", engine.PGSizeEvery, got, first.DatabaseBytes)
	}
}
