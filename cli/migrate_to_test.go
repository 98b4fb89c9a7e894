package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tally-analytics/tally/storage"
)

// TestMigrateToRefuses runs `tally migrate-to` where it must not copy:
// each case ends with its exit code and a message naming the cause, and
// never prints the URL's password.
func TestMigrateToRefuses(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	url, password := postgresURL(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "src.db")
	db, err := storage.Open(context.Background(), storage.Options{Path: file})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateWorkspace(context.Background(), storage.Actor{Kind: storage.ActorAdmin}, "Acme", "acme"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	busy := filepath.Join(dir, "busy.db")
	startLogged(t, bin, "DATABASE_PATH="+busy, "ADMIN_TOKEN=tok")

	// The first copy fills the target: every later one finds it not empty.
	if code, out, errOut := runBinary(t, bin, []string{"migrate-to", "--database-path", file, url}); code != 0 || !strings.Contains(out, "every count and sum matches") {
		t.Fatalf("first copy: got %d %s %s, want 0 and every count matching", code, out, errOut)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"target not empty", []string{"--database-path", file, url}, 1, "not empty"},
		{"server running", []string{"--database-path", busy, url}, 1, busy},
		{"no file", []string{"--database-path", filepath.Join(dir, "none.db"), url}, 1, "no database at"},
		{"not a PostgreSQL URL", []string{"--database-path", file, "mysql://u:" + password + "@h/db"}, 2, "one PostgreSQL URL"},
		{"no URL", []string{"--database-path", file}, 2, "one PostgreSQL URL"},
		{"unreachable", []string{"--database-path", file, "postgres://owner-q7x:" + password + "@127.0.0.1:1/tally?connect_timeout=5"}, 1, "connect to postgres 127.0.0.1:1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runBinary(t, bin, append([]string{"migrate-to"}, c.args...))
			if code != c.code || !strings.Contains(errOut, c.want) {
				t.Errorf("got %d %q, want %d and %q", code, errOut, c.code, c.want)
			}
			if strings.Contains(out+errOut, password) || strings.Contains(out+errOut, "owner-q7x") {
				t.Errorf("the output holds the URL's password or user: %s %s", out, errOut)
			}
		})
	}
}

// TestMigrateToPrintsMerges: rows the copy merged (keys equal once stored
// on PostgreSQL) count as matching and are said; a real difference is
// still a mismatch.
func TestMigrateToPrintsMerges(t *testing.T) {
	t.Parallel()
	merged := []storage.TableCheck{{Table: "daily_events_slots", SQLite: 3, Postgres: 2, Merged: 1,
		Sums: []storage.SumCheck{{Column: "count", SQLite: 7, Postgres: 7}}}}
	var out, errOut strings.Builder
	if code := printChecks(&out, &errOut, merged, 0); code != 0 || !strings.Contains(out.String(), "ok, 1 merged") ||
		!strings.Contains(out.String(), "1 rows merged") || errOut.Len() != 0 {
		t.Errorf("merged rows: got %d %q %q, want 0, the merge said, no error", code, out.String(), errOut.String())
	}
	merged[0].Postgres = 1
	out.Reset()
	if code := printChecks(&out, &errOut, merged, 0); code != 1 || !strings.Contains(out.String(), "MISMATCH") {
		t.Errorf("a row missing besides the merge: got %d %q, want 1 and a mismatch", code, out.String())
	}
}
