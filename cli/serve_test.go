package cli

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tally-analytics/tally/privacy"
	"github.com/tally-analytics/tally/server"
	"github.com/tally-analytics/tally/storage"
)

// process is the server binary running on free loopback ports.
type process struct {
	cmd              *exec.Cmd
	collector, query string
	https, http      string // with TLS (docs/operations.md#https)
	logs             chan map[string]any
}

func start(t testing.TB, bin string, env ...string) *process {
	t.Helper()
	return startArgs(t, bin, nil, env...)
}

// startArgs is start with command-line arguments.
func startArgs(t testing.TB, bin string, args []string, env ...string) *process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), append([]string{"COLLECTOR_ADDR=127.0.0.1:0", "QUERY_ADDR=127.0.0.1:0"}, env...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, logs: make(chan map[string]any, 100)}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil {
				select {
				case p.logs <- line:
				default:
				}
			}
		}
		close(p.logs)
	}()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case line, ok := <-p.logs:
			if !ok {
				t.Fatal("server exited before listening")
			}
			if line["msg"] == "listening" {
				p.collector = line["collector"].(string)
				p.query = line["query"].(string)
				p.https, _ = line["https"].(string)
				p.http, _ = line["http"].(string)
				return p
			}
		case <-deadline:
			t.Fatal("server did not log its listening addresses")
		}
	}
}

// interruptSignal stops the server cleanly.
var interruptSignal = syscall.SIGTERM

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestBinaryServesAndStopsOnSIGTERM(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	dbPath := filepath.Join(t.TempDir(), "data", "analytics.db")
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			p := start(t, bin, "DATABASE_PATH="+dbPath, "ADMIN_TOKEN=tok")
			for _, base := range []string{p.collector, p.query} {
				if code, body := get(t, base+"/healthz"); code != 200 || strings.TrimSpace(body) != `{"status":"ok"}` {
					t.Fatalf("%s/healthz: got %d %s", base, code, body)
				}
			}
			slug := map[syscall.Signal]string{syscall.SIGTERM: "term", syscall.SIGINT: "int"}[sig]
			req, _ := http.NewRequest("POST", p.query+"/v1/workspaces", strings.NewReader(`{"name":"x","slug":"`+slug+`"}`))
			req.Header.Set("Authorization", "Bearer tok")
			res, err := http.DefaultClient.Do(req)
			if err != nil || res.StatusCode != 201 {
				t.Fatalf("create workspace: %v %v", err, res)
			}
			res.Body.Close()
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if err := p.cmd.Wait(); err != nil {
				t.Fatalf("got exit %v after %s, want 0", err, sig)
			}
		})
	}
	// Both workspaces survived the restarts: the database was closed cleanly.
	p := start(t, bin, "DATABASE_PATH="+dbPath, "ADMIN_TOKEN=tok")
	req, _ := http.NewRequest("GET", p.query+"/v1/workspaces", nil)
	req.Header.Set("Authorization", "Bearer tok")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Workspaces []map[string]any }
	json.NewDecoder(res.Body).Decode(&list)
	res.Body.Close()
	if len(list.Workspaces) != 2 {
		t.Fatalf("got %d workspaces after restart, want 2", len(list.Workspaces))
	}
}

func TestBadConfigurationExitsNonZero(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"unknown REQUIRE_API_KEY", nil, map[string]string{"REQUIRE_API_KEY": "maybe"}},
		{"negative rate limit", nil, map[string]string{"INGEST_RATE_LIMIT": "-1"}},
		{"quota not a number", nil, map[string]string{"INGEST_QUOTA": "lots"}},
		{"negative RETENTION_DAYS", nil, map[string]string{"RETENTION_DAYS": "-1"}},
		{"RETENTION_DAYS past a century", nil, map[string]string{"RETENTION_DAYS": "36501"}},
		{"--retention-days not a number", []string{"--retention-days", "month"}, nil},
		{"unknown flag", []string{"--no-such-flag"}, nil},
		{"unknown CONSENT_MODE", nil, map[string]string{"CONSENT_MODE": "sometimes"}},
		{"unknown DURABILITY", nil, map[string]string{"DURABILITY": "sometimes"}},
		{"unknown --durability", []string{"--durability", "disk"}, nil},
		{"SHUTDOWN_DRAIN past 90s", nil, map[string]string{"SHUTDOWN_DRAIN": "2m"}},
		{"--shutdown-drain without a unit", []string{"--shutdown-drain", "15"}, nil},
		{"QUERY_TIMEOUT past 55s", nil, map[string]string{"QUERY_TIMEOUT": "1m"}},
		{"TRUST_PROXY_HEADERS not a bool", nil, map[string]string{"TRUST_PROXY_HEADERS": "perhaps"}},
		{"missing GeoIP file", nil, map[string]string{"GEOIP_DB_PATH": "/does/not/exist.mmdb"}},
		{"missing plan file", nil, map[string]string{"SCHEMA_BUNDLE_PATH": "/does/not/exist.json"}},
		{"plan that is not JSON", nil, map[string]string{"SCHEMA_BUNDLE_PATH": writeFile(t, "{")}},
		{"plan with an unknown mode", nil, map[string]string{"SCHEMA_BUNDLE_PATH": writeFile(t, `{"mode":"drop","events":{}}`)}},
		{"plan with a broken schema", nil, map[string]string{"SCHEMA_BUNDLE_PATH": writeFile(t, `{"events":{"purchase":{"type":"objekt"}}}`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"DATABASE_PATH": ":memory:", "COLLECTOR_ADDR": "127.0.0.1:0", "QUERY_ADDR": "127.0.0.1:0"}
			for k, v := range tt.env {
				env[k] = v
			}
			var stderr strings.Builder
			if code := Run(tt.args, func(k string) string { return env[k] }, io.Discard, &stderr); code == 0 {
				t.Fatalf("got exit 0, want non-zero")
			}
			if stderr.Len() == 0 {
				t.Fatal("got no message")
			}
			if tt.name == "plan with a broken schema" && !strings.Contains(stderr.String(), `event "purchase"`) {
				t.Errorf("got %q, want the message to name the event", stderr.String())
			}
		})
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigFlagsOverrideEnvironment(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_PATH": "/env.db", "INGEST_RATE_LIMIT": "5", "REQUIRE_API_KEY": "tag"}
	c, err := loadConfig([]string{"--database-path", "/flag.db", "--collector-url", "http://x:1/"},
		func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.DatabasePath != "/flag.db" || c.IngestRateLimit != 5 || c.RequireAPIKey != "tag" || c.CollectorURL != "http://x:1" ||
		c.CollectorAddr != ":8080" || c.QueryAddr != ":8081" || c.IngestQuota != 0 {
		t.Fatalf("got %+v", c)
	}
	d, _ := loadConfig(nil, func(string) string { return "" }, io.Discard)
	if d.DatabasePath != "./data/analytics.db" || d.RequireAPIKey != "none" || d.IngestRateLimit != 1000 {
		t.Fatalf("got defaults %+v", d)
	}
}

func TestDurabilitySetting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		env  string
		want storage.Durability
	}{
		{nil, "", storage.DurabilityPower},
		{nil, "process", storage.DurabilityProcess},
		{nil, "power", storage.DurabilityPower},
		{[]string{"--durability", "process"}, "power", storage.DurabilityProcess},
		{[]string{"--durability", "power"}, "process", storage.DurabilityPower},
	}
	for _, tt := range tests {
		c, err := loadConfig(tt.args, func(k string) string { return map[string]string{"DURABILITY": tt.env}[k] }, io.Discard)
		if err != nil || c.Durability != tt.want {
			t.Errorf("args %v, DURABILITY=%q: got %q (%v), want %q", tt.args, tt.env, c.Durability, err, tt.want)
		}
	}
}

// TestQueryTimeoutSetting: QUERY_TIMEOUT is a duration from 1s to 55s,
// 30s by default, the flag winning over the variable.
func TestQueryTimeoutSetting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		env  string
		want time.Duration
	}{
		{nil, "", 30 * time.Second},
		{nil, "1s", time.Second},
		{nil, "55s", 55 * time.Second},
		{[]string{"--query-timeout", "10s"}, "5s", 10 * time.Second},
	}
	for _, tt := range tests {
		c, err := loadConfig(tt.args, func(k string) string { return map[string]string{"QUERY_TIMEOUT": tt.env}[k] }, io.Discard)
		if err != nil || c.QueryTimeout != tt.want {
			t.Errorf("args %v, QUERY_TIMEOUT=%q: got %s (%v), want %s", tt.args, tt.env, c.QueryTimeout, err, tt.want)
		}
	}
	for _, bad := range []string{"0s", "999ms", "56s", "30", "soon", "-1s"} {
		_, err := loadConfig(nil, func(k string) string { return map[string]string{"QUERY_TIMEOUT": bad}[k] }, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "QUERY_TIMEOUT") {
			t.Errorf("QUERY_TIMEOUT=%q: got %v, want an error naming the setting", bad, err)
		}
	}
}

func TestMigrationFailureExitsNonZero(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a.db")
	db, err := storage.Open(context.Background(), storage.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	// Forget migration 4 but keep its table: applying it again fails at its
	// first statement, as a broken release's migration would.
	op, err := sql.Open("sqlite", storage.FileURI(path))
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	if _, err := op.Exec(`DELETE FROM schema_migrations WHERE version >= 4`); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DATABASE_PATH": path, "COLLECTOR_ADDR": "127.0.0.1:0", "QUERY_ADDR": "127.0.0.1:0"}
	var stderr strings.Builder
	if code := Run(nil, func(k string) string { return env[k] }, io.Discard, &stderr); code == 0 {
		t.Fatal("got exit 0, want non-zero")
	}
	for _, want := range []string{"0004_daily_dimensions.sql", "stays at schema version 3"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("got %q, want the message to contain %q", stderr.String(), want)
		}
	}
	var version int
	if err := op.QueryRow(`SELECT MAX(version) FROM schema_migrations`).Scan(&version); err != nil || version != 3 {
		t.Errorf("got schema version %d (%v), want 3", version, err)
	}
}

func TestSIGHUPReloadsThePlan(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	plan := writeFile(t, `{"events":{"pageview":{"type":"object"}}}`)
	p := start(t, bin, "DATABASE_PATH=:memory:", "ADMIN_TOKEN=tok", "SCHEMA_BUNDLE_PATH="+plan)
	admin := func(method, path, body string) int {
		req, _ := http.NewRequest(method, p.query+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	admin("POST", "/v1/workspaces", `{"name":"a","slug":"a"}`)
	admin("POST", "/v1/workspaces/a/sites", `{"id":"web","name":"w"}`)
	send := func(id string) int {
		req, _ := http.NewRequest("POST", p.collector+"/v1/events", strings.NewReader(
			`{"id":"`+id+`","site_id":"web","anon_id":"a","type":"click"}`))
		req.Header.Set("Authorization", "Bearer web")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := send("00000000-0000-4000-8000-000000000001"); code != 400 {
		t.Fatalf("before reload: got %d, want 400", code)
	}
	if err := os.WriteFile(plan, []byte(`{"events":{"*":{"type":"object"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(5 * time.Second)
	for send("00000000-0000-4000-8000-000000000002") != 202 {
		if time.Now().After(deadline) {
			t.Fatal("SIGHUP did not reload the plan")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startDevJSON starts bin with args and then dev mode's JSON setup on
// loopback ports, and returns the process and the setup line it prints;
// the process is killed when the test ends.
func startDevJSON(t *testing.T, bin string, args ...string) (*exec.Cmd, []byte) {
	t.Helper()
	cmd := exec.Command(bin, append(args, "--dev-json", "--collector-addr", "127.0.0.1:0", "--query-addr", "127.0.0.1:0")...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err != nil {
		t.Fatalf("reading the printed setup: %v", err)
	}
	return cmd, line
}

func TestDevModeBinary(t *testing.T) {
	t.Parallel()
	cmd, line := startDevJSON(t, buildBinary(t))
	var setup struct {
		CollectorURL string `json:"collector_url"`
		QueryURL     string `json:"query_url"`
		AdminToken   string `json:"admin_token"`
		SiteID       string `json:"site_id"`
		Keys         struct{ Admin, Ingest, Query string }
	}
	if err := json.Unmarshal(line, &setup); err != nil {
		t.Fatalf("got %q: %v", line, err)
	}
	if setup.SiteID == "" || setup.AdminToken == "" || setup.Keys.Query == "" || strings.HasSuffix(setup.CollectorURL, ":0") {
		t.Fatalf("got setup %+v", setup)
	}
	do := func(method, url, token, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
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
		var m map[string]any
		json.NewDecoder(res.Body).Decode(&m)
		return res.StatusCode, m
	}
	ev := `{"id":"00000000-0000-4000-8000-000000000001","site_id":"` + setup.SiteID + `","anon_id":"a","type":"pageview"}`
	if code, _ := do("POST", setup.CollectorURL+"/v1/events", setup.SiteID, ev); code != 202 {
		t.Fatalf("send: got %d", code)
	}
	if code, _ := do("POST", setup.CollectorURL+"/v1/events", setup.SiteID, `{"id":"x"}`); code != 400 {
		t.Fatalf("bad send: got %d", code)
	}
	code, body := do("GET", setup.QueryURL+"/v1/debug/decisions?outcome=accepted", "", "")
	if code != 200 || len(body["decisions"].([]any)) != 1 {
		t.Fatalf("decisions: got %d %v", code, body)
	}
	code, body = do("GET", setup.QueryURL+"/v1/debug/decisions", "", "")
	if d := body["decisions"].([]any); len(d) != 2 || d[0].(map[string]any)["reason"] != "invalid_event" {
		t.Fatalf("got %v", body)
	}
	if code, _ := do("GET", setup.QueryURL+"/v1/sites/"+setup.SiteID+"/pageviews?from=2020-01-01&to=2020-01-02", setup.Keys.Query, ""); code != 200 {
		t.Fatalf("query key: got %d", code)
	}
	if code, _ := do("GET", setup.QueryURL+"/v1/workspaces", setup.AdminToken, ""); code != 200 {
		t.Fatalf("admin token: got %d", code)
	}
	if code, body := do("POST", setup.QueryURL+"/v1/debug/reset", "", ""); code != 415 || body["error"] == nil {
		t.Fatalf("reset without a JSON content type: got %d %v, want 415", code, body)
	}
	if code, body := do("POST", setup.QueryURL+"/v1/debug/reset", "", "{}"); code != 200 || body["ok"] != true {
		t.Fatalf("reset: got %d %v", code, body)
	}
	if code, _ := do("POST", setup.CollectorURL+"/v1/events", setup.SiteID, ev); code != 202 {
		t.Fatalf("resend after reset: got %d", code)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("got exit %v, want 0", err)
	}
}

// startWriter notes the first write: dev mode printing its setup, so the
// server started.
type startWriter struct {
	once    sync.Once
	started chan struct{}
}

func (w *startWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.started) })
	return len(p), nil
}

// runRefused runs run with args and env and returns its exit code and
// standard error. Should the server start instead of refusing, it is
// stopped with SIGTERM (run handles it) and the test fails.
func runRefused(t *testing.T, args []string, env map[string]string) (int, string) {
	t.Helper()
	out := &startWriter{started: make(chan struct{})}
	var stderr strings.Builder
	done := make(chan int, 1)
	go func() { done <- Run(args, func(k string) string { return env[k] }, out, &stderr) }()
	select {
	case code := <-done:
		return code, stderr.String()
	case <-out.started:
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
		<-done
		t.Fatalf("the server started, want it to refuse with exit 2")
		return 0, ""
	}
}

func TestDevModeStaysOnLoopback(t *testing.T) {
	t.Parallel()
	refused := []struct {
		name    string
		args    []string
		env     map[string]string
		setting string
	}{
		{"query API on every IPv4 interface", []string{"--dev", "--query-addr", "0.0.0.0:0"}, nil, "QUERY_ADDR"},
		{"query API on every IPv6 interface", nil, map[string]string{"DEV": "1", "QUERY_ADDR": "[::]:0"}, "QUERY_ADDR"},
		{"collector with no host", []string{"--dev-json", "--collector-addr", ":0"}, nil, "COLLECTOR_ADDR"},
		{"allowance switched off", []string{"--dev", "--dev-allow-remote=false", "--query-addr", "0.0.0.0:0"}, map[string]string{"DEV_ALLOW_REMOTE": "true"}, "QUERY_ADDR"},
		{"DEV_ALLOW_REMOTE not a bool", []string{"--dev"}, map[string]string{"DEV_ALLOW_REMOTE": "perhaps"}, "DEV_ALLOW_REMOTE"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"COLLECTOR_ADDR": "127.0.0.1:0", "QUERY_ADDR": "127.0.0.1:0"}
			for k, v := range tt.env {
				env[k] = v
			}
			code, msg := runRefused(t, tt.args, env)
			if code != 2 {
				t.Fatalf("got exit %d, want 2; stderr %s", code, msg)
			}
			if !strings.Contains(msg, tt.setting) || !strings.Contains(msg, "DEV_ALLOW_REMOTE") {
				t.Fatalf("got %q, want a message naming %s and DEV_ALLOW_REMOTE", msg, tt.setting)
			}
		})
	}
	// A host name is refused without being looked up (what it resolves to
	// can change), so loadConfig, which never listens, tells.
	if _, err := loadConfig([]string{"--dev", "--query-addr", "devbox.example:0"}, func(string) string { return "" }, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "DEV_ALLOW_REMOTE") {
		t.Errorf("host name: got %v, want an error naming DEV_ALLOW_REMOTE", err)
	}
	allowed := []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"dev defaults", []string{"--dev"}, nil},
		{"localhost", []string{"--dev", "--query-addr", "localhost:0", "--collector-addr", "LOCALHOST:0"}, nil},
		{"IPv6 loopback", []string{"--dev", "--query-addr", "[::1]:0"}, nil},
		{"any 127/8 address", []string{"--dev", "--query-addr", "127.0.0.2:0"}, nil},
		{"remote allowed by flag", []string{"--dev", "--dev-allow-remote", "--query-addr", "0.0.0.0:0"}, nil},
		{"remote allowed by environment", []string{"--dev"}, map[string]string{"DEV_ALLOW_REMOTE": "true", "QUERY_ADDR": "0.0.0.0:0"}},
		{"not dev mode", []string{"--query-addr", "0.0.0.0:0"}, nil},
	}
	for _, tt := range allowed {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := loadConfig(tt.args, func(k string) string { return tt.env[k] }, io.Discard); err != nil {
				t.Fatalf("got %v, want no error", err)
			}
		})
	}
}

func TestDevSetupTextShowsHowToReset(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	printDevSetup(&out, server.DevSetup{QueryURL: "http://127.0.0.1:8081"}, false)
	want := "curl -X POST -H 'Content-Type: application/json' http://127.0.0.1:8081/v1/debug/reset"
	if !strings.Contains(out.String(), want) {
		t.Fatalf("got %q, want it to contain %q", out.String(), want)
	}
}

// TestModeSettingsAcceptEveryMode guards that the settings accept exactly
// the modes the server and privacy packages define, by their constants.
func TestModeSettingsAcceptEveryMode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		env, value string
		got        func(config) string
	}{
		{"REQUIRE_API_KEY", server.KeyModeNone, func(c config) string { return c.RequireAPIKey }},
		{"REQUIRE_API_KEY", server.KeyModeTag, func(c config) string { return c.RequireAPIKey }},
		{"REQUIRE_API_KEY", server.KeyModeRequire, func(c config) string { return c.RequireAPIKey }},
		{"CONSENT_MODE", privacy.ConsentCookieless, func(c config) string { return c.ConsentMode }},
		{"CONSENT_MODE", privacy.ConsentRequire, func(c config) string { return c.ConsentMode }},
	}
	for _, tt := range tests {
		c, err := loadConfig(nil, func(k string) string { return map[string]string{tt.env: tt.value}[k] }, io.Discard)
		if err != nil {
			t.Errorf("%s=%s: got %v, want it accepted", tt.env, tt.value, err)
			continue
		}
		if got := tt.got(c); got != tt.value {
			t.Errorf("%s=%s: got %q, want %q", tt.env, tt.value, got, tt.value)
		}
	}
	d, _ := loadConfig(nil, func(string) string { return "" }, io.Discard)
	if d.RequireAPIKey != server.KeyModeNone || d.ConsentMode != privacy.ConsentCookieless {
		t.Errorf("got defaults %q, %q, want %q, %q", d.RequireAPIKey, d.ConsentMode, server.KeyModeNone, privacy.ConsentCookieless)
	}
}

func TestBotFilterSetting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, nil, privacy.BotFilterOn},
		{[]string{"--dev"}, nil, privacy.BotFilterOff},
		{nil, map[string]string{"DEV": "1"}, privacy.BotFilterOff},
		{[]string{"--dev-json"}, nil, privacy.BotFilterOff},
		{[]string{"--dev"}, map[string]string{"BOT_FILTER": "on"}, privacy.BotFilterOn},
		{[]string{"--dev", "--bot-filter", "on"}, nil, privacy.BotFilterOn},
		{nil, map[string]string{"BOT_FILTER": "off"}, privacy.BotFilterOff},
		{[]string{"--bot-filter", "on"}, map[string]string{"BOT_FILTER": "off"}, privacy.BotFilterOn},
	}
	for _, tt := range tests {
		c, err := loadConfig(tt.args, func(k string) string { return tt.env[k] }, io.Discard)
		if err != nil || c.BotFilter != tt.want {
			t.Errorf("args %v, env %v: got %q (%v), want %q", tt.args, tt.env, c.BotFilter, err, tt.want)
		}
	}
	if _, err := loadConfig(nil, func(k string) string { return map[string]string{"BOT_FILTER": "maybe"}[k] }, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "BOT_FILTER") {
		t.Errorf("BOT_FILTER=maybe: got %v, want an error naming the setting", err)
	}
}

// `tally serve` is the server, as `tally` alone is; flags follow the
// subcommand's name.
func TestServeSubcommand(t *testing.T) {
	t.Parallel()
	_, line := startDevJSON(t, buildBinary(t), "serve")
	var setup struct {
		QueryURL string `json:"query_url"`
	}
	if err := json.Unmarshal(line, &setup); err != nil || setup.QueryURL == "" {
		t.Fatalf("got %q, want the dev setup as JSON", line)
	}
	if code, _ := get(t, setup.QueryURL+"/healthz"); code != 200 {
		t.Fatalf("got /healthz %d, want 200", code)
	}
}
