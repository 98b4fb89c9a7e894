package sdktest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// need skips the test when a tool the SDK tests use is missing, except in
// CI (CI set), where .ci/run installs everything and a skip would hide a
// broken install.
func need(t *testing.T, problem, fix string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s; %s", problem, fix)
	}
	t.Skipf("%s (%s)", problem, fix)
}

// nodeModules returns the folder the pinned SDKs are installed in, or
// skips the test when `npm ci` has not been run.
func nodeModules(t *testing.T, pkg string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("node_modules", filepath.FromSlash(pkg)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "package.json")); err != nil {
		need(t, pkg+" is not installed", "run `npm ci` in sdktest/")
	}
	return dir
}

// api calls the query API as the admin.
type api struct {
	t     *testing.T
	base  string
	token string
}

func (a api) do(method, path string, body, into any) {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			a.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		a.t.Fatalf("%s %s: got %d %s, want 200", method, path, res.StatusCode, b)
	}
	if err := json.Unmarshal(b, into); err != nil {
		a.t.Fatalf("%s %s: %v in %s", method, path, err, b)
	}
}

func (a api) get(path string, into any) { a.t.Helper(); a.do(http.MethodGet, path, nil, into) }
func (a api) post(path string, body any, into any) {
	a.t.Helper()
	a.do(http.MethodPost, path, body, into)
}

// dateRange is a from/to query covering yesterday to tomorrow (UTC), so
// events timed by the SDK's clock fall inside it whatever the hour.
func dateRange() string {
	now := time.Now().UTC()
	return "from=" + now.AddDate(0, 0, -1).Format(time.DateOnly) + "&to=" + now.AddDate(0, 0, 1).Format(time.DateOnly)
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// lookPath finds the first of names on PATH.
func lookPath(names ...string) string {
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}
