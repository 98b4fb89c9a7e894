package cli

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tally-analytics/tally/internal/dbtest"
	"github.com/tally-analytics/tally/storage"
)

// sqlRaws are the wire texts of the events sqlDatabase stores.
var sqlRaws = []string{
	`{"id":"e-1","site_id":"web","type":"pageview","anon_id":"v1","url":"https://acme.test/pricing?ref=x&y=<1>"}`,
	`{"id":"e-2","site_id":"web","type":"signup","anon_id":"v1","url":"https://acme.test/join","properties":{"plan":"pro\tplus"}}`,
}

// sqlDatabase stores sqlRaws in a new database (a SQLite file at path, or
// the PostgreSQL database at url) and closes it, as a stopped server
// leaves it.
func sqlDatabase(t *testing.T, path, url string) {
	t.Helper()
	ctx := context.Background()
	db, err := storage.Open(ctx, storage.Options{Path: path, DatabaseURL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sys := storage.Actor{Kind: storage.ActorSystem}
	ws, err := db.CreateWorkspace(ctx, sys, "Acme", "acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateSite(ctx, sys, ws, "web", "Web"); err != nil {
		t.Fatal(err)
	}
	var events []storage.IngestEvent
	for _, raw := range sqlRaws {
		var e struct{ ID, Type, URL string }
		json.Unmarshal([]byte(raw), &e)
		events = append(events, storage.IngestEvent{ID: e.ID, SiteID: "web", Type: e.Type, AnonID: "v1", URL: &e.URL,
			TS: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Raw: []byte(raw)})
	}
	if _, err := db.Ingest(ctx, events, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// tallySQL runs `tally sql args...` with the environment env and standard
// input stdin.
func tallySQL(t *testing.T, env map[string]string, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut strings.Builder
	code = runSQL(args, func(k string) string { return env[k] }, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// eventRows runs query, one row an event of sqlRaws, with `tally sql
// --format json` and returns its rows.
func eventRows(t *testing.T, env map[string]string, query string) []map[string]any {
	t.Helper()
	code, out, errOut := tallySQL(t, env, "", "--format", "json", query)
	if code != 0 {
		t.Fatalf("got exit %d: %s", code, errOut)
	}
	rows := jsonRows(t, out)
	if len(rows) != len(sqlRaws) {
		t.Fatalf("got %d rows, want %d: %s", len(rows), len(sqlRaws), out)
	}
	return rows
}

// jsonRows decodes `tally sql --format json` output.
func jsonRows(t *testing.T, out string) []map[string]any {
	t.Helper()
	var rows []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("got %q, want one JSON object a line: %v", line, err)
		}
		rows = append(rows, m)
	}
	return rows
}

// `tally sql` reads a stopped or running server's SQLite file with the
// service's SQL functions (event_raw, tally_page_path), prints tables,
// TSV and JSON, takes SQL from the arguments or standard input, and
// refuses writes unless --write.
func TestSQLCommandReads(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "analytics.db")
	sqlDatabase(t, path, "")
	env := map[string]string{"DATABASE_PATH": path}

	// event_raw gives the wire text back, byte for byte.
	rows := eventRows(t, env, "SELECT event_raw(raw, id, site_id, type, anon_id, user_id, url, referrer) AS wire FROM events ORDER BY seq")
	for i, r := range rows {
		if r["wire"] != sqlRaws[i] {
			t.Errorf("got event_raw %q, want %q", r["wire"], sqlRaws[i])
		}
	}
	// SELECT * decodes raw too (the way PostgreSQL reads it), and the
	// JSON keeps <, > and & as they are.
	code, out, errOut := tallySQL(t, env, "", "--format", "json", "SELECT * FROM events ORDER BY seq")
	if code != 0 || !strings.Contains(out, `"raw":"{\"id\":\"e-1\"`) || !strings.Contains(out, `y=<1>`) {
		t.Fatalf("got exit %d, %s, want raw as the wire text", code, out)
	}
	// An ad-hoc report with the service's functions, from standard input.
	code, out, errOut = tallySQL(t, env, "SELECT tally_page_path(url) AS page, COUNT(*) AS n FROM events GROUP BY 1 ORDER BY 1;\n")
	want := "page      n\n--------  -\n/join     1\n/pricing  1\n(2 rows)\n"
	if code != 0 || out != want {
		t.Fatalf("got exit %d, stdout %q, stderr %q, want %q", code, out, errOut, want)
	}
	// TSV: a header, one line a row, tabs escaped, NULL.
	code, out, _ = tallySQL(t, env, "", "--format", "tsv",
		"SELECT id, json_extract(event_raw(raw, id, site_id, type, anon_id, user_id, url, referrer), '$.properties.plan') AS plan, user_id FROM events ORDER BY seq")
	want = "id\tplan\tuser_id\ne-1\tNULL\tNULL\ne-2\tpro\\tplus\tNULL\n"
	if code != 0 || out != want {
		t.Fatalf("got exit %d, %q, want %q", code, out, want)
	}

	// Read-only: a write is refused and changes nothing.
	for _, q := range []string{"DELETE FROM events", "UPDATE sites SET name = 'x'", "CREATE TABLE t(a)"} {
		code, _, errOut = tallySQL(t, env, "", q)
		if code != 1 || !strings.Contains(errOut, "readonly") {
			t.Errorf("%s: got exit %d, %q, want 1 and a read-only refusal", q, code, errOut)
		}
	}
	if code, out, _ := tallySQL(t, env, "", "--format", "tsv", "SELECT COUNT(*) FROM events"); code != 0 || out != "COUNT(*)\n2\n" {
		t.Fatalf("got exit %d, %q after refused writes, want the 2 events", code, out)
	}

	// While a server has the file open, reads work.
	db, err := storage.Open(context.Background(), storage.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if code, out, errOut := tallySQL(t, env, "", "--format", "tsv", "SELECT COUNT(*) AS n FROM events"); code != 0 || out != "n\n2\n" {
		t.Fatalf("got exit %d, %q, %q with the server running, want the 2 events", code, out, errOut)
	}
}

func TestSQLCommandMistakes(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "analytics.db")
	sqlDatabase(t, path, "")
	env := map[string]string{"DATABASE_PATH": path}
	missing := filepath.Join(t.TempDir(), "none.db")
	for _, tt := range []struct {
		name  string
		env   map[string]string
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"no SQL", env, "  \n", nil, 2, "no SQL"},
		{"unknown format", env, "", []string{"--format", "csv", "SELECT 1"}, 2, `unknown --format "csv"`},
		{"unknown flag", env, "", []string{"--nope", "SELECT 1"}, 2, "-nope (see 'tally sql -h')"},
		{"no database", map[string]string{"DATABASE_PATH": missing}, "", []string{"SELECT 1"}, 1, "no database at"},
		{"SQL error", env, "", []string{"SELECT nosuch FROM events"}, 1, "no such column: nosuch"},
		{"write on PostgreSQL", map[string]string{"DATABASE_URL": "postgres://x@/y"}, "", []string{"--write", "DELETE FROM events"}, 2, "use psql"},
		{"timeout", env, "", []string{"--timeout", "50ms", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"}, 1, "cancelled after --timeout 50ms"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := tallySQL(t, tt.env, tt.stdin, tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.want) {
				t.Fatalf("got exit %d, stderr %q, want %d and %q", code, errOut, tt.code, tt.want)
			}
		})
	}
	// The database file was not created where there was none.
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("got a database file created by a read, want none")
	}
}

// --write runs in one transaction on a stopped server's file only: while a
// server has it open it refuses and writes nothing; stopped, an INSERT
// into events works (its trigger calls tally_page_path, which a sqlite3
// shell lacks), a failing statement rolls back the ones before it, and a
// write that changed rows drops the kept report partials.
func TestSQLCommandWrites(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "analytics.db")
	sqlDatabase(t, path, "")
	env := map[string]string{"DATABASE_PATH": path}
	count := func(q string) string {
		t.Helper()
		code, out, errOut := tallySQL(t, env, "", "--format", "tsv", q)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", q, code, errOut)
		}
		return strings.Split(strings.TrimSpace(out), "\n")[1]
	}

	db, err := storage.Open(context.Background(), storage.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	code, _, errOut := tallySQL(t, env, "", "--write", "DELETE FROM events")
	if code != 1 || !strings.Contains(errOut, "open in another process") {
		t.Fatalf("got exit %d, %q with the server running, want 1: in use", code, errOut)
	}
	db.Close()
	if got := count("SELECT COUNT(*) FROM events"); got != "2" {
		t.Fatalf("got %s events after a refused write, want 2", got)
	}

	insert := `INSERT INTO events(id_text, site_id, type, url, ts, anon_id, raw, received_at)
		VALUES ('op-1', 'web', 'pageview', 'https://acme.test/added?x=1', '2026-01-02T03:04:06.000Z', 'v2', '{"id":"op-1"}', '2026-01-02T03:04:06.000Z')`
	// A failing statement after it: nothing of the run is kept.
	code, _, errOut = tallySQL(t, env, "", "--write", insert+"; SELECT nosuch FROM events")
	if code != 1 || !strings.Contains(errOut, "nothing was written") {
		t.Fatalf("got exit %d, %q, want 1 and nothing written", code, errOut)
	}
	if got := count("SELECT COUNT(*) FROM events"); got != "2" {
		t.Fatalf("got %s events after a failed run, want 2", got)
	}

	// A kept partial, as reports leave them.
	op, err := sql.Open("sqlite", storage.FileURI(path))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := op.Exec(`INSERT INTO day_partials VALUES ('web', 'UTC', '', 'events', 0, 86400000, x'00')`); err != nil {
		t.Fatal(err)
	}
	op.Close()
	code, _, errOut = tallySQL(t, env, "", "--write", insert)
	if code != 0 || !strings.Contains(errOut, "committed, 2 rows changed; 1 kept report partials dropped") || !strings.Contains(errOut, "skipped intake") {
		t.Fatalf("got exit %d, %q, want 0, the rows changed (the event and its page), the partial dropped and the risk", code, errOut)
	}
	if got := count("SELECT COUNT(*) FROM day_partials"); got != "0" {
		t.Fatalf("got %s kept partials after the write, want 0", got)
	}
	if got := count("SELECT path FROM event_pages JOIN events USING (seq) WHERE events.id = 'op-1'"); got != "/added" {
		t.Fatalf("got page %q for the inserted event, want /added", got)
	}
	if got := count("SELECT event_raw(raw, id, site_id, type, anon_id, user_id, url, referrer) FROM events WHERE id = 'op-1'"); got != `{"id":"op-1"}` {
		t.Fatalf("got raw %s, want the inserted text", got)
	}
	// The server starts on the file afterwards and reads the event.
	db, err = storage.Open(context.Background(), storage.Options{Path: path})
	if err != nil {
		t.Fatalf("open after a write: %v", err)
	}
	defer db.Close()
	recs, err := db.EventRecords(context.Background(), "web")
	if err != nil || len(recs) != 3 || recs[2].Raw.String != `{"id":"op-1"}` {
		t.Fatalf("got %d events (%v), want 3 with the inserted one last", len(recs), err)
	}
}

// On PostgreSQL `tally sql` reads in a READ ONLY transaction, bounded by
// --timeout, and decodes raw in Go where the row holds the columns
// event_raw takes (PostgreSQL cannot call Go); --write is refused.
func TestSQLCommandOnPostgres(t *testing.T) {
	t.Parallel()
	if os.Getenv(dbtest.URLEnv) == "" {
		t.Skip("PostgreSQL only: set TEST_DATABASE_URL to a PostgreSQL 15 server (docs/development.md#both-backends)")
	}
	url := multiDatabase(t)
	sqlDatabase(t, "", url)
	env := map[string]string{"DATABASE_URL": url, "DATABASE_PATH": filepath.Join(t.TempDir(), "not-used.db")}
	for i, r := range eventRows(t, env, "SELECT * FROM events ORDER BY seq") {
		if r["raw"] != sqlRaws[i] || r["path"] == nil {
			t.Errorf("got raw %q and path %v, want %q and the page path", r["raw"], r["path"], sqlRaws[i])
		}
	}
	code, out, errOut := tallySQL(t, env, "", "--format", "tsv", "SELECT path, props->>'plan' AS plan FROM events ORDER BY seq")
	if want := "path\tplan\n/pricing\tNULL\n/join\tpro\\tplus\n"; code != 0 || out != want {
		t.Fatalf("got exit %d, %q, want %q", code, out, want)
	}
	code, _, errOut = tallySQL(t, env, "", "DELETE FROM events")
	if code != 1 || !strings.Contains(errOut, "read-only transaction") {
		t.Fatalf("got exit %d, %q for a DELETE, want 1 and the read-only refusal", code, errOut)
	}
	code, _, errOut = tallySQL(t, env, "", "--timeout", "100ms", "SELECT pg_sleep(10)")
	if code != 1 || !strings.Contains(errOut, "cancelled after --timeout 100ms") {
		t.Fatalf("got exit %d, %q, want 1 and the timeout", code, errOut)
	}
	if code, out, _ := tallySQL(t, env, "", "--format", "tsv", "SELECT COUNT(*) AS n FROM events"); code != 0 || out != "n\n2\n" {
		t.Fatalf("got exit %d, %q after the refused write, want the 2 events", code, out)
	}
}
