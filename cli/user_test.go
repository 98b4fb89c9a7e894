package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/tally-analytics/tally/server"
	"github.com/tally-analytics/tally/storage"
)

// TestUserCommand runs `tally user add` and `tally user reset-password`
// against a real server, and signs in with what they give.
func TestUserCommand(t *testing.T) {
	db, err := storage.Open(context.Background(), storage.Options{Path: filepath.Join(t.TempDir(), "a.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	srv := httptest.NewServer(server.New(server.Config{AdminToken: "tok", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, db).Query())
	t.Cleanup(srv.Close)
	post := func(path, token string, body any) (int, map[string]any) {
		buf, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", srv.URL+path, bytes.NewReader(buf))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(res.Body).Decode(&m)
		return res.StatusCode, m
	}
	if code, _ := post("/v1/workspaces", "tok", map[string]any{"name": "Acme", "slug": "acme"}); code != 201 {
		t.Fatalf("create the workspace: got %d", code)
	}
	addr := strings.TrimPrefix(srv.URL, "http://")
	env := map[string]string{"QUERY_ADDR": addr, "ADMIN_TOKEN": "tok"}
	getenv := func(k string) string { return env[k] }
	run := func(in string, args ...string) (int, string, string) {
		stdin = strings.NewReader(in)
		var out, errOut bytes.Buffer
		code := Run(args, getenv, &out, &errOut)
		return code, out.String(), errOut.String()
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in standard error
	}{
		{"no subcommand", []string{"user"}, 2, "want add or reset-password"},
		{"no email", []string{"user", "add", "--workspace", "acme"}, 2, "--email is required"},
		{"bad role", []string{"user", "add", "--email", "x@example.com", "--workspace", "acme", "--role", "boss"}, 1, "invalid_role"},
		{"unknown workspace", []string{"user", "add", "--email", "x@example.com", "--workspace", "nope"}, 1, "not_found"},
		{"unknown user", []string{"user", "reset-password", "--email", "nobody@example.com"}, 1, "not_found"},
	} {
		code, _, errOut := run("", tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: got %d %q, want %d and %q", tc.name, code, errOut, tc.code, tc.want)
		}
	}

	// The password from standard input.
	code, out, errOut := run("correct horse battery\n", "user", "add", "--email", "ana@example.com", "--role", "owner", "--workspace", "acme", "--password-stdin")
	if code != 0 || !strings.Contains(out, "ana@example.com is owner of acme and can sign in now") {
		t.Fatalf("got %d %q %q", code, out, errOut)
	}
	if code, _ := post("/v1/auth/signin", "", map[string]any{"email": "ana@example.com", "password": "correct horse battery"}); code != 200 {
		t.Fatalf("sign in: got %d", code)
	}

	// Without one: a link, whose token sets it.
	linkToken := func(out string) string {
		t.Helper()
		lines := strings.Split(strings.TrimSpace(out), "\n")
		link := lines[len(lines)-1]
		prefix := srv.URL + "/v1/ui/#password="
		if !strings.HasPrefix(link, prefix) {
			t.Fatalf("got link %q, want it to start %q", link, prefix)
		}
		return strings.TrimPrefix(link, prefix)
	}
	code, out, errOut = run("", "user", "add", "--email", "bo@example.com", "--workspace", "acme")
	if code != 0 || !strings.Contains(out, "bo@example.com is viewer of acme; the password is set with this link") {
		t.Fatalf("got %d %q %q", code, out, errOut)
	}
	if code, m := post("/v1/auth/password-reset", "", map[string]any{"token": linkToken(out), "password": "bo's own password"}); code != 204 {
		t.Fatalf("set the password: got %d %v", code, m)
	}
	code, out, errOut = run("", "user", "reset-password", "--email", "BO@example.com")
	if code != 0 {
		t.Fatalf("got %d %q %q", code, out, errOut)
	}
	if code, _ := post("/v1/auth/password-reset", "", map[string]any{"token": linkToken(out), "password": "bo's new password"}); code != 204 {
		t.Fatalf("reset the password: got %d", code)
	}
	if code, _ := post("/v1/auth/signin", "", map[string]any{"email": "bo@example.com", "password": "bo's new password"}); code != 200 {
		t.Fatalf("sign in: got %d", code)
	}
	// Asked on a terminal (--password-prompt): twice, with echo off, so
	// what is typed never shows; two that differ change nothing; no
	// terminal is a clear error.
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	terminal = tty
	defer func() { terminal = os.Stdin }()
	var echoMu sync.Mutex
	var echoed bytes.Buffer
	go func() {
		buf := make([]byte, 256)
		for {
			n, err := ptmx.Read(buf)
			echoMu.Lock()
			echoed.Write(buf[:n])
			echoMu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	type result struct {
		code        int
		out, errOut string
	}
	prompted := func(typed string, args ...string) result {
		t.Helper()
		done := make(chan result, 1)
		go func() {
			code, out, errOut := run("", args...)
			done <- result{code, out, errOut}
		}()
		// Type once the prompt has turned echo off: input that arrives
		// then is never echoed, the second line included.
		deadline := time.Now().Add(10 * time.Second)
		for {
			st, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
			if err == nil && st.Lflag&unix.ECHO == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the prompt never turned echo off (%v)", err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if _, err := ptmx.Write([]byte(typed)); err != nil {
			t.Fatal(err)
		}
		return <-done
	}
	r := prompted("cy's typed password\ncy's other password\n", "user", "add", "--email", "cy@example.com", "--workspace", "acme", "--password-prompt")
	if r.code != 1 || !strings.Contains(r.errOut, "the two passwords differ") {
		t.Errorf("two passwords that differ: got %d %q, want 1 and %q", r.code, r.errOut, "the two passwords differ")
	}
	r = prompted("cy's typed password\ncy's typed password\n", "user", "add", "--email", "cy@example.com", "--workspace", "acme", "--password-prompt")
	if r.code != 0 || !strings.Contains(r.errOut, "Password: ") || !strings.Contains(r.errOut, "Again: ") || !strings.Contains(r.out, "cy@example.com is viewer of acme and can sign in now") {
		t.Fatalf("--password-prompt: got %d %q %q", r.code, r.out, r.errOut)
	}
	if code, _ := post("/v1/auth/signin", "", map[string]any{"email": "cy@example.com", "password": "cy's typed password"}); code != 200 {
		t.Errorf("sign in with the prompted password: got %d, want 200", code)
	}
	echoMu.Lock()
	if strings.Contains(echoed.String(), "typed") || strings.Contains(r.out+r.errOut, "typed") {
		t.Errorf("the typed password was shown: terminal %q, output %q", echoed.String(), r.out+r.errOut)
	}
	echoMu.Unlock()
	notTTY, err := os.CreateTemp(t.TempDir(), "stdin")
	if err != nil {
		t.Fatal(err)
	}
	terminal = notTTY
	if code, _, errOut := run("", "user", "add", "--email", "dee@example.com", "--workspace", "acme", "--password-prompt"); code != 1 || !strings.Contains(errOut, "needs a terminal") {
		t.Errorf("--password-prompt without a terminal: got %d %q, want 1 and %q", code, errOut, "needs a terminal")
	}
	if code, _, errOut := run("", "user", "add", "--email", "dee@example.com", "--workspace", "acme", "--password-prompt", "--password-stdin"); code != 2 || !strings.Contains(errOut, "not both") {
		t.Errorf("both password flags: got %d %q, want 2", code, errOut)
	}

	// No server: a clear error.
	env["QUERY_ADDR"] = "127.0.0.1:1"
	if code, _, errOut := run("", "user", "reset-password", "--email", "bo@example.com"); code != 1 || !strings.Contains(errOut, "no server answered") {
		t.Errorf("no server: got %d %q", code, errOut)
	}
}
