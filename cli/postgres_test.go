package cli

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tally-analytics/tally/internal/dbtest"
)

// postgresURL starts a throw-away PostgreSQL, creates an empty database
// tally on it and returns its URL with a password in it: the cluster
// trusts every local connection, so the password is ignored there, and
// tests can look for it where it must never appear.
func postgresURL(t *testing.T) (url, password string) {
	t.Helper()
	cluster := dbtest.StartPostgres(t, "tally")
	admin, err := sql.Open("pgx", cluster)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(`CREATE DATABASE tally`); err != nil {
		t.Fatal(err)
	}
	password = "pw-s3cret-" + randomHex(4)
	url = strings.Replace(strings.Replace(cluster, "/postgres?", "/tally?", 1), "tally@", "tally:"+password+"@", 1)
	return url, password
}

// syncBuffer is a log the server writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startLogged starts the binary on free ports and waits for its
// "listening" line, keeping every line it logs.
func startLogged(t *testing.T, bin string, env ...string) (cmd *exec.Cmd, collector, query string, log *syncBuffer, exited <-chan error) {
	t.Helper()
	cmd = exec.Command(bin)
	cmd.Env = append(os.Environ(), append([]string{"COLLECTOR_ADDR=127.0.0.1:0", "QUERY_ADDR=127.0.0.1:0"}, env...)...)
	log = &syncBuffer{}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	exit := make(chan error, 1)
	go func() { <-done; exit <- waitErr }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, line := range strings.Split(log.String(), "\n") {
			var l map[string]any
			if json.Unmarshal([]byte(line), &l) == nil && l["msg"] == "listening" {
				return cmd, l["collector"].(string), l["query"].(string), log, exit
			}
		}
		select {
		case <-done:
			t.Fatalf("the server exited before listening:\n%s", log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not listen within 60 s:\n%s", log.String())
		}
		time.Sleep(20 * time.Millisecond) // polling the log for a condition, not ordering
	}
}

// pgCall sends a JSON request with a bearer token and decodes the answer.
func pgCall(t *testing.T, method, url, token, body string) (int, map[string]any) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(res.Body)
	json.Unmarshal(b, &out)
	if out == nil {
		out = map[string]any{"body": string(b)}
	}
	return res.StatusCode, out
}

// TestServeOnPostgres runs the binary with DATABASE_URL on an empty
// database: it migrates it, answers its health checks, and serves the
// tenancy endpoints; a restart finds what was made.
func TestServeOnPostgres(t *testing.T) {
	t.Parallel()
	url, password := postgresURL(t)
	bin := buildBinary(t)
	cmd, collector, query, log, exited := startLogged(t, bin, "DATABASE_URL="+url, "ADMIN_TOKEN=tok", "DATABASE_PATH=/nonexistent/ignored.db")
	for _, base := range []string{collector, query} {
		if code, body := get(t, base+"/healthz"); code != 200 || strings.TrimSpace(body) != `{"status":"ok"}` {
			t.Fatalf("%s/healthz: got %d %s, want 200 ok", base, code, body)
		}
	}
	if code, _ := get(t, collector+"/metrics"); code != 200 {
		t.Errorf("/metrics: got %d, want 200", code)
	}
	if code, out := pgCall(t, "POST", query+"/v1/workspaces", "tok", `{"name":"Acme","slug":"acme"}`); code != 201 {
		t.Fatalf("create workspace: got %d %v, want 201", code, out)
	}
	if code, out := pgCall(t, "POST", query+"/v1/workspaces/acme/sites", "tok", `{"id":"site1","name":"Site"}`); code != 201 {
		t.Fatalf("create site: got %d %v, want 201", code, out)
	}
	code, key := pgCall(t, "POST", query+"/v1/workspaces/acme/keys", "tok", `{"label":"reader","scopes":["query:read","admin"]}`)
	if code != 201 {
		t.Fatalf("create key: got %d %v, want 201", code, key)
	}
	plaintext, _ := key["key"].(string)
	if plaintext == "" {
		plaintext, _ = key["plaintext"].(string)
	}
	for _, c := range []struct {
		method, path, token, body string
		want                      int
	}{
		{"GET", "/v1/workspaces", "tok", "", 200},
		{"GET", "/v1/workspaces/acme", "tok", "", 200},
		{"GET", "/v1/workspaces/acme/sites", "tok", "", 200},
		{"GET", "/v1/workspaces/acme/keys", "tok", "", 200},
		{"GET", "/v1/workspaces/acme/audit", "tok", "", 200},
		{"GET", "/v1/sites/site1", plaintext, "", 200},
		{"GET", "/v1/sites/nosuch", plaintext, "", 404},
		{"PATCH", "/v1/workspaces/acme", "tok", `{"name":"Acme 2"}`, 200},
		{"PATCH", "/v1/sites/site1", "tok", `{"name":"S","time_zone":"Europe/Paris","retention_days":30}`, 200},
		{"GET", "/v1/sites/site1/pageviews?from=2026-11-01&to=2026-11-30", plaintext, "", 200},
		{"GET", "/v1/sites/site1/sessions?from=2026-11-01&to=2026-11-30", plaintext, "", 200},
		{"GET", "/v1/sites/site1/goals", plaintext, "", 200},
		{"GET", "/v1/sites/site1/imports", plaintext, "", 200},
		{"GET", "/", "", "", 200},
		{"DELETE", "/v1/workspaces/acme/keys/" + keyID(key), "tok", "", 204},
		{"POST", "/v1/backup", "tok", "{}", 400},
	} {
		if got, out := pgCall(t, c.method, query+c.path, c.token, c.body); got != c.want {
			t.Errorf("%s %s: got %d %v, want %d", c.method, c.path, got, out, c.want)
		}
	}
	// Intake runs on PostgreSQL: the event is answered 202 and counted
	// back through the rollups (GET .../events reads daily_events, the
	// view over the instance's slot rows).
	event := `{"id":"0b5e7c1e-8a3f-4c1e-9d2b-0c7a1d2e3f40","site_id":"site1","anon_id":"a1","type":"pageview","url":"https://a.example/"}`
	if code, out := pgCall(t, "POST", collector+"/v1/events", "site1", event); code != 202 {
		t.Errorf("intake: got %d %v, want 202", code, out)
	}
	day := time.Now().UTC().Format("2006-01-02")
	if code, out := pgCall(t, "GET", query+"/v1/sites/site1/events?from="+day+"&to="+day, "tok", ""); code != 200 || !strings.Contains(jsonText(out), `"count":1`) {
		t.Errorf("events read back: got %d %v, want 200 with a count of 1", code, out)
	}
	if _, out := pgCall(t, "POST", query+"/v1/backup", "tok", "{}"); out["error"] == nil || !strings.Contains(jsonText(out), "unsupported_backend") {
		t.Errorf("backup: got %v, want code unsupported_backend", out)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitExit(t, exited)
	logs := log.String()
	if strings.Contains(logs, password) {
		t.Errorf("the log holds DATABASE_URL's password:\n%s", logs)
	}
	if !strings.Contains(logs, `"database":"postgres 127.0.0.1:`) {
		t.Errorf("the log does not name the database by host:\n%s", logs)
	}

	// A second start: migrations recorded, the workspace kept.
	_, _, query, _, _ = startLogged(t, bin, "DATABASE_URL="+url, "ADMIN_TOKEN=tok")
	if code, out := pgCall(t, "GET", query+"/v1/workspaces/acme", "tok", ""); code != 200 {
		t.Errorf("after restart: got %d %v, want the workspace", code, out)
	}
}

// keyID is the id of a key create answered.
func keyID(key map[string]any) string {
	id, _ := key["id"].(string)
	return id
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// waitExit waits for the exit startLogged reports, and wants it clean.
func waitExit(t *testing.T, exited <-chan error) {
	t.Helper()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("got exit %v after SIGTERM, want 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not stop within 30 s of SIGTERM")
	}
}

func TestPostgresSettings(t *testing.T) {
	t.Parallel()
	const secret = "hunter2-secret"
	t.Run("dev mode refused", func(t *testing.T) {
		code, stderr := runRefused(t, []string{"serve"}, map[string]string{"DEV": "true", "DATABASE_URL": "postgres://u:" + secret + "@127.0.0.1:1/x"})
		if code != 2 || !strings.Contains(stderr, "dev mode is single-instance SQLite") {
			t.Errorf("got exit %d, %q, want 2 and dev mode refused", code, stderr)
		}
	})
	t.Run("not a postgres URL", func(t *testing.T) {
		code, stderr := runRefused(t, []string{"serve"}, map[string]string{"DATABASE_URL": "mysql://u:" + secret + "@h/x"})
		if code != 2 || !strings.Contains(stderr, "DATABASE_URL must start with postgres://") || strings.Contains(stderr, secret) {
			t.Errorf("got exit %d, %q, want 2 and the scheme refused, without the password", code, stderr)
		}
	})
	t.Run("unreachable server", func(t *testing.T) {
		var stdout, stderr strings.Builder
		env := map[string]string{"DATABASE_URL": "postgres://u:" + secret + "@127.0.0.1:1/x?connect_timeout=5",
			"COLLECTOR_ADDR": "127.0.0.1:0", "QUERY_ADDR": "127.0.0.1:0"}
		code := Run([]string{"serve"}, func(k string) string { return env[k] }, &stdout, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), "cannot open the database") || strings.Contains(stderr.String(), secret) {
			t.Errorf("got exit %d, %q, want 1, the failure logged without the password", code, stderr.String())
		}
	})
	for _, command := range []string{"backup", "vacuum"} {
		t.Run(command+" refused", func(t *testing.T) {
			var stdout, stderr strings.Builder
			args := []string{command}
			if command == "backup" {
				args = append(args, t.TempDir()+"/copy.db")
			}
			code := Run(args, func(k string) string {
				if k == "DATABASE_URL" {
					return "postgres://u:" + secret + "@127.0.0.1:1/x"
				}
				return ""
			}, &stdout, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), "use pg_dump or your provider's point-in-time recovery") {
				t.Errorf("got exit %d, %q, want 2 and pg_dump advised", code, stderr.String())
			}
		})
	}
}

// TestCheckConfigAndVersionOnPostgres: check-config connects and reports
// the server and schema, version prints the server's version; neither
// shows the password.
func TestCheckConfigAndVersionOnPostgres(t *testing.T) {
	t.Parallel()
	url, password := postgresURL(t)
	env := func(k string) string {
		return map[string]string{"DATABASE_URL": url, "DATABASE_PATH": "/elsewhere.db"}[k]
	}
	var stdout, stderr strings.Builder
	if code := Run([]string{"check-config"}, env, &stdout, &stderr); code != 0 {
		t.Fatalf("check-config: got exit %d, %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"postgres 127.0.0.1:", "/tally: PostgreSQL 15", "schema version 0 of ", "DATABASE_PATH is ignored"} {
		if !strings.Contains(out, want) {
			t.Errorf("check-config: got %q, want %q in it", out, want)
		}
	}
	stdout.Reset()
	if code := Run([]string{"version"}, env, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "\npostgres 15") {
		t.Errorf("version: got exit %d, %q, want a line postgres 15...", code, stdout.String())
	}
	if strings.Contains(stdout.String()+out+stderr.String(), password) {
		t.Errorf("the password was printed")
	}
	// A failed connection names the host, port and database, never the
	// user or password, on one line (docs/configuration.md).
	const user = "owner-" + "q7x"
	host := url[strings.Index(url, "@")+1:]
	host = host[:strings.Index(host, "/")]
	for _, tt := range []struct{ name, url, want string }{
		{"no server", "postgres://" + user + ":" + password + "@127.0.0.1:1/tally?connect_timeout=5",
			"tally check-config: DATABASE_URL (postgres 127.0.0.1:1/tally): connect to PostgreSQL: 127.0.0.1:1 (127.0.0.1): dial error"},
		{"unknown role", "postgres://" + user + ":" + password + "@" + host + "/tally?sslmode=disable",
			"tally check-config: DATABASE_URL (postgres " + host + "/tally): connect to PostgreSQL: "},
		{"bad setting", "postgres://" + user + ":" + password + "@" + host + "/tally?connect_timeout=soon",
			"tally check-config: DATABASE_URL (postgres " + host + "/tally): connection settings: invalid connect_timeout"},
	} {
		stdout.Reset()
		stderr.Reset()
		env := func(k string) string { return map[string]string{"DATABASE_URL": tt.url}[k] }
		code := Run([]string{"check-config"}, env, &stdout, &stderr)
		got := stderr.String()
		if code != 1 || !strings.HasPrefix(got, tt.want) || strings.Count(got, "\n") != 1 {
			t.Errorf("check-config, %s: got exit %d, %q, want 1 and one line starting %q", tt.name, code, got, tt.want)
		}
		if strings.Contains(got, user) || strings.Contains(got, password) {
			t.Errorf("check-config, %s: got %q, want neither the user nor the password", tt.name, got)
		}
	}
}
