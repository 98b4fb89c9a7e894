package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

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
	// No server: a clear error.
	env["QUERY_ADDR"] = "127.0.0.1:1"
	if code, _, errOut := run("", "user", "reset-password", "--email", "bo@example.com"); code != 1 || !strings.Contains(errOut, "no server answered") {
		t.Errorf("no server: got %d %q", code, errOut)
	}
}
