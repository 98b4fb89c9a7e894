package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tally-analytics/tally/internal/backupcheck"
)

func TestBackupUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing.db")
	os.WriteFile(existing, []byte("keep me"), 0o644)
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"missing PATH", nil, nil, "want one PATH"},
		{"two PATHs", []string{"a.db", "b.db"}, nil, "want one PATH"},
		{"existing PATH without --force", []string{existing}, nil, "--force"},
		{"--force before, second PATH after", []string{"--force", existing, "x.db"}, nil, "want one PATH"},
		{"unknown flag", []string{"--fast", filepath.Join(dir, "a.db")}, nil, "flag provided but not defined"},
		{"in-memory database", []string{filepath.Join(dir, "b.db")}, map[string]string{"DATABASE_PATH": ":memory:"}, ":memory:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr strings.Builder
			code := Run(append([]string{"backup"}, tt.args...), func(k string) string { return tt.env[k] }, io.Discard, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("got exit %d, %q; want 2 and a message containing %q", code, stderr.String(), tt.want)
			}
		})
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep me" {
		t.Fatalf("got %q in the existing file, want it untouched", b)
	}
}

// `tally backup` against a server process under load: the server copies
// through its write connection, and the copy holds every event
// acknowledged before the command started, passes integrity_check and
// keeps the audit log append-only. With the server stopped, the command
// copies the file itself.
func TestBackupCommand(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "analytics.db")
	p := start(t, bin, "DATABASE_PATH="+dbPath, "ADMIN_TOKEN=tok", "INGEST_RATE_LIMIT=0")
	admin := func(path, body string) {
		req, _ := http.NewRequest("POST", p.query+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != 201 {
			t.Fatalf("POST %s: got %v %v, want 201", path, res, err)
		}
		res.Body.Close()
	}
	admin("/v1/workspaces", `{"name":"a","slug":"a"}`)
	admin("/v1/workspaces/a/sites", `{"id":"web","name":"w"}`)

	var mu sync.Mutex
	var acked []string
	var loadErr error
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for n := 0; ; n += 50 {
			select {
			case <-stop:
				return
			default:
			}
			var batch []map[string]any
			for i := n; i < n+50; i++ {
				batch = append(batch, map[string]any{"id": fmt.Sprintf("00000000-0000-4000-8000-%012d", i), "site_id": "web",
					"anon_id": fmt.Sprintf("a%d", i%89), "type": "pageview", "url": "https://example.test/p/" + fmt.Sprint(i%31)})
			}
			body, _ := json.Marshal(batch)
			req, _ := http.NewRequest("POST", p.collector+"/v1/events", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer web")
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			mu.Lock()
			if err == nil && res.StatusCode != 202 {
				err = fmt.Errorf("got %d for a batch, want 202", res.StatusCode)
			}
			if err != nil {
				loadErr = err
				mu.Unlock()
				return
			}
			res.Body.Close()
			for _, e := range batch {
				acked = append(acked, e["id"].(string))
			}
			mu.Unlock()
		}
	}()
	ended := false
	endLoad := func() {
		if !ended {
			ended = true
			close(stop)
			<-done
		}
	}
	defer endLoad()
	// Wait for the load to be under way with some data to copy.
	var before []string
	for deadline := time.Now().Add(20 * time.Second); len(before) < 5000; time.Sleep(time.Millisecond) {
		mu.Lock()
		before = append([]string(nil), acked...)
		err := loadErr
		mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("got %d events acknowledged after 20 s, want 5000", len(before))
		}
	}

	copyPath := filepath.Join(dir, "copy.db")
	env := append(os.Environ(), "DATABASE_PATH="+dbPath, "ADMIN_TOKEN=tok", "QUERY_ADDR="+strings.TrimPrefix(p.query, "http://"))
	backup := func(args ...string) (int, string) {
		cmd := exec.Command(bin, append([]string{"backup"}, args...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, string(out)
	}
	code, out := backup(copyPath)
	endLoad()
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	if code != 0 || !strings.Contains(out, "through the server") {
		t.Fatalf("got exit %d, %q; want 0, through the server", code, out)
	}
	checkCopy(t, copyPath, before)
	// The server wrote it into its backups folder; the command moved it out.
	if left, _ := filepath.Glob(filepath.Join(dir, "backups", "*")); len(left) != 0 {
		t.Fatalf("got %v left in the backups folder, want the copy moved to %s", left, copyPath)
	}
	if code, out := backup(copyPath); code != 2 || !strings.Contains(out, "--force") {
		t.Fatalf("again without --force: got exit %d, %q; want 2 naming --force", code, out)
	}

	// The server stopped: the command copies the file itself.
	p.cmd.Process.Signal(interruptSignal)
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("server exit: %v", err)
	}
	if code, out := backup(copyPath, "--force"); code != 0 || !strings.Contains(out, "no server answered") {
		t.Fatalf("server stopped: got exit %d, %q; want 0, copied from the file", code, out)
	}
	checkCopy(t, copyPath, acked)
}

// checkCopy fails the test unless the copy at path is sound and holds every
// event of ids (backupcheck.Copy).
func checkCopy(t *testing.T, path string, ids []string) {
	t.Helper()
	if err := backupcheck.Copy(path, ids); err != nil {
		t.Fatal(err)
	}
}
