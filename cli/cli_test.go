package cli

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// runBinary runs bin with args and env (added to the test's) and returns
// its exit code, standard output and standard error.
func runBinary(t *testing.T, bin string, args []string, env ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode(), stdout.String(), stderr.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, stdout.String(), stderr.String()
}

// The binary as a person meets it: version, help, and one line with exit
// code 2 for what it does not know.
func TestCommandLine(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)

	t.Run("version", func(t *testing.T) {
		for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
			code, out, errOut := runBinary(t, bin, args)
			if code != 0 || errOut != "" {
				t.Fatalf("%v: got exit %d, stderr %q, want 0 and nothing", args, code, errOut)
			}
			for _, want := range []string{"tally " + testVersion + "\n", "\ngo      go1.", "\nsqlite  3.", "-ldflags=", "CGO_ENABLED=", "\ncommit  ", "\ngeoip   IP Geolocation by DB-IP"} {
				if !strings.Contains(out, want) {
					t.Errorf("%v: got %q, want it to contain %q", args, out, want)
				}
			}
		}
	})

	t.Run("help", func(t *testing.T) {
		for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}, {"serve", "-h"}, {"check-config", "--help"}, {"--dev", "-h"}} {
			code, out, errOut := runBinary(t, bin, args)
			if code != 0 || errOut != "" {
				t.Fatalf("%v: got exit %d, stderr %q, want 0 and nothing", args, code, errOut)
			}
			if !strings.Contains(out, "Listeners:\n") || !strings.Contains(out, "DATABASE_PATH") || !strings.Contains(out, "check-config") {
				t.Fatalf("%v: got %q, want the help", args, out)
			}
		}
		for _, args := range [][]string{{"help", "vacuum"}, {"vacuum", "-h"}, {"backup", "--help"}, {"help", "sql"}, {"sql", "-h"}} {
			code, out, errOut := runBinary(t, bin, args)
			if code != 0 || errOut != "" || !strings.Contains(out, "usage: tally "+args[0]) && !strings.Contains(out, "usage: tally "+args[1]) {
				t.Fatalf("%v: got exit %d, stdout %q, stderr %q, want 0 and the command's usage", args, code, out, errOut)
			}
		}
	})

	t.Run("mistakes exit 2 with one line", func(t *testing.T) {
		tests := []struct {
			args []string
			want string // in the line
		}{
			{[]string{"--no-such-flag"}, "-no-such-flag (see 'tally -h')"},
			{[]string{"serve", "--no-such-flag"}, "-no-such-flag (see 'tally -h')"},
			{[]string{"frobnicate"}, `unknown command "frobnicate" (see 'tally help')`},
			{[]string{"--dev", "extra"}, `unexpected argument "extra" (see 'tally -h')`},
			{[]string{"vacuum", "--nope"}, "-nope (see 'tally vacuum -h')"},
			{[]string{"backup", "--nope", "x.db"}, "-nope (see 'tally backup -h')"},
			{[]string{"check-config", "--nope"}, "-nope (see 'tally -h')"},
			{[]string{"sql", "--nope", "SELECT 1"}, "-nope (see 'tally sql -h')"},
			{[]string{"sql", "--format", "csv", "SELECT 1"}, `unknown --format "csv"`},
			{[]string{"version", "extra"}, `unexpected argument "extra"`},
			{[]string{"help", "frobnicate"}, `unknown command "frobnicate"`},
		}
		for _, tt := range tests {
			code, out, errOut := runBinary(t, bin, tt.args)
			if code != 2 || out != "" {
				t.Errorf("%v: got exit %d, stdout %q, want 2 and nothing", tt.args, code, out)
			}
			if strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tt.want) {
				t.Errorf("%v: got stderr %q, want one line with %q", tt.args, errOut, tt.want)
			}
		}
	})

	t.Run("check-config starts nothing", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "not-yet")
		code, out, errOut := runBinary(t, bin, []string{"check-config"}, "DATABASE_PATH="+filepath.Join(dir, "analytics.db"), "TLS_DOMAINS=stats.example.com")
		if code != 0 || !strings.HasPrefix(out, "configuration OK\n") || errOut != "" {
			t.Fatalf("got exit %d, stdout %q, stderr %q, want 0 and OK", code, out, errOut)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("got %v for the database's folder, want it not created", err)
		}
		code, _, errOut = runBinary(t, bin, []string{"check-config"}, "RETENTION_DAYS=-1")
		if code != 1 || !strings.Contains(errOut, "RETENTION_DAYS") {
			t.Fatalf("got exit %d, stderr %q, want 1 naming RETENTION_DAYS", code, errOut)
		}
	})
}

// check-config finds every problem serving would stop at, and accepts
// what serving accepts.
func TestCheckConfig(t *testing.T) {
	t.Parallel()
	authority := newTestCA(t)
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	authority.writeLeaf(t, 1001, certPath, keyPath, time.Now())
	tests := []struct {
		name string
		env  map[string]string
		want string // in standard error; "" for exit 0
	}{
		{"defaults", nil, ""},
		{"certificate files", map[string]string{"TLS_CERT_FILE": certPath, "TLS_KEY_FILE": keyPath}, ""},
		{"ACME", map[string]string{"TLS_DOMAINS": "stats.example.com, collect.example.com", "ACME_EMAIL": "ops@example.com", "HTTP_ADDR": "off"}, ""},
		{"tracking plan", map[string]string{"SCHEMA_BUNDLE_PATH": writeFile(t, `{"events":{"*":{"type":"object"}}}`)}, ""},
		{"unknown REQUIRE_API_KEY", map[string]string{"REQUIRE_API_KEY": "maybe"}, "REQUIRE_API_KEY"},
		{"DEV not a bool", map[string]string{"DEV": "yes"}, "DEV must be true or false"},
		{"plan with a broken schema", map[string]string{"SCHEMA_BUNDLE_PATH": writeFile(t, `{"events":{"purchase":{"type":"objekt"}}}`)}, `event "purchase"`},
		{"missing GeoIP file", map[string]string{"GEOIP_DB_PATH": "/does/not/exist.mmdb"}, "exist.mmdb"},
		{"COLLECTOR_ADDR without a port", map[string]string{"COLLECTOR_ADDR": "localhost"}, "COLLECTOR_ADDR"},
		{"certificate without key", map[string]string{"TLS_CERT_FILE": certPath}, "TLS_CERT_FILE and TLS_KEY_FILE go together"},
		{"missing certificate file", map[string]string{"TLS_CERT_FILE": certPath + ".gone", "TLS_KEY_FILE": keyPath}, "cert.pem.gone"},
		{"key of another certificate", map[string]string{"TLS_CERT_FILE": certPath, "TLS_KEY_FILE": writeFile(t, "not a key")}, "TLS_CERT_FILE and TLS_KEY_FILE"},
		{"files and ACME", map[string]string{"TLS_CERT_FILE": certPath, "TLS_KEY_FILE": keyPath, "TLS_DOMAINS": "a.example"}, "not both"},
		{"domain as a URL", map[string]string{"TLS_DOMAINS": "https://a.example"}, `"https://a.example" is not a host name`},
		{"wildcard domain", map[string]string{"TLS_DOMAINS": "*.example.com"}, "wildcard"},
		{"domain with a port", map[string]string{"TLS_DOMAINS": "a.example:443"}, "is not a host name"},
		{"ACME over http", map[string]string{"TLS_DOMAINS": "a.example", "ACME_DIRECTORY_URL": "http://ca.example/dir"}, "ACME_DIRECTORY_URL must be an https:// URL"},
		{"ACME_EMAIL not an address", map[string]string{"TLS_DOMAINS": "a.example", "ACME_EMAIL": "ops"}, "ACME_EMAIL"},
		{"HTTPS_ADDR without a port", map[string]string{"TLS_DOMAINS": "a.example", "HTTPS_ADDR": "443"}, "HTTPS_ADDR"},
		{"dev mode on the default HTTPS_ADDR", map[string]string{"DEV": "true", "TLS_CERT_FILE": certPath, "TLS_KEY_FILE": keyPath}, "HTTPS_ADDR is \":443\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			code := Run([]string{"check-config"}, func(k string) string { return tt.env[k] }, &stdout, &stderr)
			switch {
			case tt.want == "" && (code != 0 || !strings.HasPrefix(stdout.String(), "configuration OK")):
				t.Fatalf("got exit %d, stdout %q, stderr %q, want 0 and OK", code, stdout.String(), stderr.String())
			case tt.want != "" && (code != 1 || !strings.Contains(stderr.String(), tt.want)):
				t.Fatalf("got exit %d, stderr %q, want 1 and %q", code, stderr.String(), tt.want)
			}
		})
	}
}

// With HTTPS on, the plain listeners move to loopback unless set.
func TestTLSKeepsPlainListenersOnLoopback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		env                   map[string]string
		collector, query, web string
	}{
		{nil, ":8080", ":8081", ""},
		{map[string]string{"TLS_DOMAINS": "a.example"}, "127.0.0.1:8080", "127.0.0.1:8081", ":80"},
		{map[string]string{"TLS_DOMAINS": "a.example", "QUERY_ADDR": ":9000", "HTTP_ADDR": "OFF"}, "127.0.0.1:8080", ":9000", ""},
	}
	for _, tt := range tests {
		c, err := loadConfig(nil, func(k string) string { return tt.env[k] }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		web := c.TLS.HTTPAddr
		if !c.TLS.on() {
			web = ""
		}
		if c.CollectorAddr != tt.collector || c.QueryAddr != tt.query || web != tt.web {
			t.Errorf("%v: got %q, %q, HTTP %q, want %q, %q, HTTP %q", tt.env, c.CollectorAddr, c.QueryAddr, web, tt.collector, tt.query, tt.web)
		}
	}
}

// `tally -h` lists every setting of the one table, under its group, and
// the settings table of docs/configuration.md documents every one.
func TestHelpListsEverySetting(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	printHelp(&b)
	help := b.String()
	page, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	configuration := string(page)
	var rows []string // the first cell of each row of the settings table
	for line := range strings.SplitSeq(configuration, "\n") {
		if cells := strings.Split(line, "|"); len(cells) > 2 && strings.HasPrefix(line, "| `") {
			rows = append(rows, cells[1])
		}
	}
	headings := map[string]int{}
	for _, g := range settingGroups {
		i := strings.Index(help, "\n"+strings.ToUpper(g[:1])+g[1:]+":\n")
		if i < 0 {
			t.Fatalf("got no heading for group %q", g)
		}
		headings[g] = i
	}
	for _, s := range settings {
		if !slices.Contains(settingGroups, s.group) {
			t.Errorf("%s: got group %q, want one of %v", s.env, s.group, settingGroups)
			continue
		}
		at := strings.Index(help, "  "+s.env+" ")
		if at < 0 || !strings.Contains(help[at:], "--"+s.flagName()) {
			t.Errorf("got no line for %s (--%s)", s.env, s.flagName())
			continue
		}
		// The setting's line comes after its group's heading and before
		// the next one's.
		next := len(help)
		for _, i := range headings {
			if i > headings[s.group] && i < next {
				next = i
			}
		}
		if at < headings[s.group] || at > next {
			t.Errorf("%s: got listed outside group %q", s.env, s.group)
		}
		if !slices.ContainsFunc(rows, func(cell string) bool { return strings.Contains(cell, "`"+s.env+"`") }) {
			t.Errorf("%s: got no row in the table of docs/configuration.md", s.env)
		}
	}
}
