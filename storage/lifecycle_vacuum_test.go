package storage

import (
	"context"
	"errors"
	"testing"
)

// Vacuum refuses a database another connection has open, and shrinks one
// with free pages to its data, which stays whole.
func TestVacuumShrinksAndRefusesAnOpenDatabase(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "SQLite's VACUUM of the file")
	ctx := context.Background()
	db, _, path := twentyDays(t, 300)
	if _, err := db.Purge(ctx, 5); err != nil {
		t.Fatal(err)
	}
	kept := count(t, db, `SELECT COUNT(*) FROM events`)
	if _, err := Vacuum(ctx, path); !errors.Is(err, ErrInUse) {
		t.Fatalf("got %v vacuuming a database the server has open, want ErrInUse", err)
	}
	db.Close()
	res, err := Vacuum(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d bytes before, %d after, in %v", res.Before, res.After, res.Took)
	if res.After >= res.Before*2/3 {
		t.Errorf("got %d bytes after vacuum from %d, want under two thirds: three quarters of the events were purged", res.After, res.Before)
	}
	db = openTest(t, path)
	if n := count(t, db, `SELECT COUNT(*) FROM events`); n != kept {
		t.Errorf("got %d events after vacuum, want %d", n, kept)
	}
}
