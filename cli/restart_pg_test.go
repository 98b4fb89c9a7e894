package cli

import (
	"database/sql"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tally-analytics/tally/internal/dbtest"
)

// TestPostgresRestartRecovers: the database goes away under a running
// instance (a primary stopped, as in a failover) and comes back. Meanwhile
// /healthz and intake answer 503 with the ordinary error envelope, never
// 2xx for an event not stored and never a 500; once the database is back
// the same process serves again, without a restart, and stores what it is
// sent. docs/postgresql.md#running-n-instances-on-postgresql.
func TestPostgresRestartRecovers(t *testing.T) {
	t.Parallel()
	pg, url := startTallyDatabase(t)
	bin := buildBinary(t)
	cmd, collector, query, log, exited := startLogged(t, bin, "DATABASE_URL="+url, "ADMIN_TOKEN=tok")
	if code, out := pgCall(t, "POST", query+"/v1/workspaces", "tok", `{"name":"Acme","slug":"acme"}`); code != 201 {
		t.Fatalf("create workspace: got %d %v, want 201", code, out)
	}
	if code, out := pgCall(t, "POST", query+"/v1/workspaces/acme/sites", "tok", `{"id":"site1","name":"Site"}`); code != 201 {
		t.Fatalf("create site: got %d %v, want 201", code, out)
	}
	event := func(n int) string {
		return fmt.Sprintf(`{"id":"0b5e7c1e-8a3f-4c1e-9d2b-0c7a1d2e3f%02d","site_id":"site1","anon_id":"a1","type":"pageview","url":"https://a.example/"}`, n)
	}
	if code, out := pgCall(t, "POST", collector+"/v1/events", "site1", event(1)); code != 202 {
		t.Fatalf("intake before: got %d %v, want 202", code, out)
	}
	code, key := pgCall(t, "POST", query+"/v1/workspaces/acme/keys", "tok", `{"label":"r","scopes":["query:read"]}`)
	if code != 201 {
		t.Fatalf("create key: got %d %v, want 201", code, key)
	}
	plaintext, _ := key["key"].(string)
	if plaintext == "" {
		plaintext, _ = key["plaintext"].(string)
	}
	if code, out := pgCall(t, "GET", query+"/v1/sites/site1", plaintext, ""); code != 200 {
		t.Fatalf("a key's request: got %d %v, want 200", code, out)
	}

	pg.Stop()
	for _, c := range []struct{ name, method, url, token, body string }{
		{"collector /healthz", "GET", collector + "/healthz", "", ""},
		{"query /healthz", "GET", query + "/healthz", "", ""},
		{"intake", "POST", collector + "/v1/events", "site1", event(2)},
		{"intake again", "POST", collector + "/v1/events", "site1", event(3)},
		{"a report", "GET", query + "/v1/sites/site1/events?from=2026-01-01&to=2026-01-02", "tok", ""},
	} {
		code, out := pgCall(t, c.method, c.url, c.token, c.body)
		if code != 503 {
			t.Errorf("%s, database stopped: got %d %v, want 503", c.name, code, out)
		}
		if !strings.HasSuffix(c.url, "/healthz") {
			e, _ := out["error"].(map[string]any)
			if e == nil || e["code"] != "unavailable" || e["message"] == "" {
				t.Errorf("%s, database stopped: got %v, want the error envelope with code unavailable", c.name, out)
			}
		}
	}

	// Once its listener has been away 500 ms, an instance checks API keys
	// in the database: a valid key is then answered 503, never 401.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code, out := pgCall(t, "GET", query+"/v1/sites/site1", plaintext, "")
		if code == 200 && time.Now().Before(deadline) {
			continue // still within the listener's grace: the key is in memory
		}
		if e, _ := out["error"].(map[string]any); code != 503 || e == nil || e["code"] != "unavailable" {
			t.Errorf("a key's request, database stopped: got %d %v, want 503 unavailable", code, out)
		}
		break
	}

	pg.Start()
	// The instance reconnects by itself: wait for the condition, an
	// event answered 202, for at most a minute.
	back := time.Now()
	deadline := back.Add(60 * time.Second)
	for tries := 1; ; tries++ {
		code, out := pgCall(t, "POST", collector+"/v1/events", "site1", event(4))
		if code == 202 {
			// A figure for docs/postgresql.md#running-n-instances-on-postgresql,
			// not an assertion.
			t.Logf("intake recovered %v after the database answered again (%d tries)", time.Since(back).Round(time.Millisecond), tries)
			break
		}
		if code != 503 {
			t.Fatalf("intake while reconnecting: got %d %v, want 503 until it works, then 202", code, out)
		}
		if time.Now().After(deadline) {
			t.Fatalf("intake did not recover within 60 s of the database's return: %d %v\n%s", code, out, log.String())
		}
		time.Sleep(50 * time.Millisecond) // polling for a condition, not ordering
	}
	// /healthz stays 503 for 5 s after the last refused write
	// (docs/storage.md#disk-full-read-only-database), then answers 200.
	for _, base := range []string{collector, query} {
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			code, body := get(t, base+"/healthz")
			if code == 200 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s/healthz 20 s after recovery: got %d %s, want 200", base, code, body)
			}
		}
	}
	// Events 1 and 4 were stored; 2 and 3 were answered 503 and are not.
	day := time.Now().UTC().Format("2006-01-02")
	if code, out := pgCall(t, "GET", query+"/v1/sites/site1/events?from="+day+"&to="+day, "tok", ""); code != 200 || !strings.Contains(jsonText(out), `"count":2`) {
		t.Errorf("events after recovery: got %d %v, want a count of 2", code, out)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	waitExit(t, exited)
	if logs := log.String(); strings.Contains(logs, `"level":"ERROR","msg":"internal error"`) {
		t.Errorf("the outage was logged as an internal error:\n%s", logs)
	}
}

// startTallyDatabase starts a PostgreSQL server of the test's own (one the
// test may stop and start) with an empty database tally, and returns it
// with the DATABASE_URL of that database (connect_timeout 2 s, so that an
// instance notices a server gone within the test's waits).
func startTallyDatabase(t *testing.T) (*dbtest.PostgresServer, string) {
	t.Helper()
	pg := dbtest.StartPostgresServer(t, "tally")
	admin, err := sql.Open("pgx", pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(`CREATE DATABASE tally`); err != nil {
		t.Fatal(err)
	}
	return pg, strings.Replace(pg.URL, "/postgres?", "/tally?", 1) + "&connect_timeout=2"
}
