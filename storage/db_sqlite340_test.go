package storage

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOlderSQLiteShellReadsTheDatabase opens a database this package wrote
// with the system's sqlite3 shell (Debian's is 3.40, the oldest version
// docs/storage.md promises), reads it, inserts a webhook secret the way an
// operator would, and sees the audit log refuse changes.
func TestOlderSQLiteShellReadsTheDatabase(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "SQLite's file format for an older shell")
	shell, err := exec.LookPath("sqlite3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("sqlite3 is not installed; .ci/run installs Debian's sqlite3 package")
		}
		t.Skip("no sqlite3 shell")
	}
	path := filepath.Join(t.TempDir(), "a.db")
	db, err := openTestDB(t, context.Background(), Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ws, err := db.CreateWorkspace(ctx, Actor{Kind: ActorSystem}, "A", "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateSite(ctx, Actor{Kind: ActorSystem}, ws, "web", "W"); err != nil {
		t.Fatal(err)
	}
	u, ref := "https://a.test/p", "https://www.news.test/x"
	at := time.Date(2026, 3, 1, 9, 5, 0, 120e6, time.UTC)
	// The events' ids and agents in both stored forms (migration 0020): a
	// UUID as 16 bytes and a coded agent, other text and an agent off the
	// lists as text.
	if _, err := db.Ingest(ctx, []IngestEvent{{ID: "6f1c2a3e-0b4d-4e5f-8a9b-0c1d2e3f4a5b", SiteID: "web", Type: "pageview", AnonID: "v", URL: &u, Referrer: &ref,
		TS: at, Raw: []byte(`{}`), Browser: "Firefox", OS: "Linux", DeviceType: "desktop"},
		{ID: "e2", SiteID: "web", Type: "click", AnonID: "v", TS: at, Raw: []byte(`{}`), Browser: "ZqBrowser", OS: "Linux"}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	var want string
	if err := db.read.QueryRow(`SELECT started_at || ' ' || ended_at || ' ' || started_ms || ' ' || source || ' ' || browser || ' ' || os || ' ' || device
		FROM sessions`).Scan(&want); err != nil {
		t.Fatal(err)
	}
	const eventsSQL = `SELECT group_concat(id || ' ' || coalesce(browser, '-') || ' ' || coalesce(os, '-') || ' ' || coalesce(device_type, '-'), ';') FROM events`
	var wantEvents string
	if err := db.read.QueryRow(eventsSQL).Scan(&wantEvents); err != nil {
		t.Fatal(err)
	}
	if wantEvents != "6f1c2a3e-0b4d-4e5f-8a9b-0c1d2e3f4a5b Firefox Linux desktop;e2 ZqBrowser Linux -" {
		t.Fatalf("got events %q in the service", wantEvents)
	}
	db.Close()

	run := func(sql string) (string, error) {
		out, err := exec.Command(shell, path, sql).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	version, _ := exec.Command(shell, "--version").Output()
	t.Logf("sqlite3 shell %s", strings.Fields(string(version))[0])
	if out, err := run(`PRAGMA integrity_check; PRAGMA journal_mode; SELECT COUNT(*) FROM sqlite_master;`); err != nil || !strings.HasPrefix(out, "ok\nwal\n") {
		t.Fatalf("the shell cannot read the schema: %v %s", err, out)
	}
	if out, err := run(`SELECT type || ' ' || url FROM events WHERE url IS NOT NULL; SELECT sessions FROM daily_sessions;`); err != nil || out != "pageview https://a.test/p\n1" {
		t.Fatalf("got %q %v", out, err)
	}
	// The generated columns of events (migration 0020) too.
	if out, err := run(eventsSQL + ";"); err != nil || out != wantEvents {
		t.Fatalf("events in the shell: got %q %v, want %q", out, err, wantEvents)
	}
	// The generated columns of sessions (migration 0016) read in the
	// shell as in the service.
	if out, err := run(`SELECT started_at || ' ' || ended_at || ' ' || started_ms || ' ' || source || ' ' || browser || ' ' || os || ' ' || device
		FROM sessions;`); err != nil || out != want || !strings.HasPrefix(out, "2026-03-01T09:05:00.120Z 2026-03-01T09:05:00.120Z ") {
		t.Fatalf("sessions in the shell: got %q %v, want %q", out, err, want)
	}
	if out, err := run(`INSERT INTO webhook_secrets(site_id, adapter, secret) VALUES ('web', 'payments', 's'); SELECT length(created_at) FROM webhook_secrets;`); err != nil || out != "24" {
		t.Fatalf("operator insert: got %q %v", out, err)
	}
	for _, stmt := range []string{`UPDATE audit_log SET action = 'x';`, `DELETE FROM audit_log;`} {
		if out, err := run(stmt); err == nil || !strings.Contains(out, "append-only") {
			t.Errorf("%s: got %q %v, want the trigger's refusal", stmt, out, err)
		}
	}
}
