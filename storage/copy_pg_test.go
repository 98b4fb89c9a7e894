package storage

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
)

// TestCopyToPostgresRefusesAStoppedConversion: a conversion that stopped
// on an error keeps its progress row; the copy, which needs every row in
// its final form, refuses the file and names the conversion.
func TestCopyToPostgresRefusesAStoppedConversion(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "src.db")
	db, err := Open(context.Background(), Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	lite, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	if err := conversionsDone(context.Background(), lite); err != nil {
		t.Fatalf("a finished file: got %v, want no refusal", err)
	}
	if _, err := lite.Exec(`INSERT INTO visit_backfill(id, next_id, end_id) VALUES (1, 5, 9)`); err != nil {
		t.Fatal(err)
	}
	err = conversionsDone(context.Background(), lite)
	if err == nil || !strings.Contains(err.Error(), "visit_backfill has not finished") {
		t.Errorf("got %v, want a refusal naming visit_backfill", err)
	}
}
