package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tally-analytics/tally/internal/backupcheck"
)

// loader sends batches of events over HTTP until stopped and records the
// ids of every batch answered 202.
type loader struct {
	mu    sync.Mutex
	acked []string
	err   error
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

// startLoad sends batches of 20 events, ids from first on, to the
// collector at url for site.
func startLoad(url, site string, first int) *loader {
	l := &loader{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for n := first; ; n += 20 {
			select {
			case <-l.stop:
				return
			default:
			}
			batch := make([]any, 20)
			ids := make([]string, 20)
			for i := range batch {
				ids[i] = eventID(n + i)
				batch[i] = ev(site, n+i, map[string]any{"anon_id": fmt.Sprintf("anon-%d", (n+i)%97)})
			}
			body, _ := json.Marshal(batch)
			req, _ := http.NewRequest("POST", url+"/v1/events", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+site)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("User-Agent", chromeUA)
			res, err := http.DefaultClient.Do(req)
			if err == nil {
				res.Body.Close()
				if res.StatusCode != 202 {
					err = fmt.Errorf("got %d for a batch, want 202", res.StatusCode)
				}
			}
			l.mu.Lock()
			if err != nil {
				l.err = err
				l.mu.Unlock()
				return
			}
			l.acked = append(l.acked, ids...)
			l.mu.Unlock()
		}
	}()
	return l
}

// ackedSoFar returns a copy of the ids acknowledged until now.
func (l *loader) ackedSoFar() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.acked...)
}

// waitAcked waits until at least n events are acknowledged and returns
// their ids.
func (l *loader) waitAcked(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		l.mu.Lock()
		acked, err := append([]string(nil), l.acked...), l.err
		l.mu.Unlock()
		switch {
		case err != nil:
			t.Fatal(err)
		case len(acked) >= n:
			return acked
		case time.Now().After(deadline):
			t.Fatalf("got %d events acknowledged after 20 s, want %d", len(acked), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// end stops the load and returns its error, if any.
func (l *loader) end() error {
	l.once.Do(func() { close(l.stop) })
	<-l.done
	return l.err
}

// checkBackupCopy fails the test unless the copy at path is sound and holds every
// event of ids (backupcheck.Copy).
func checkBackupCopy(t *testing.T, path string, ids []string) {
	t.Helper()
	if err := backupcheck.Copy(path, ids); err != nil {
		t.Fatal(err)
	}
}

// A backup taken while events keep arriving holds every event acknowledged
// before it started, finishes without starting over (its steps run on the
// write connection), and is a sound database.
func TestBackupDuringIngest(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "the backup copies SQLite's pages")
	h := newHarness(t)
	h.setupTenant("acme", "web")
	// Enough data for the copy to take many steps.
	for n := 0; n < 10000; n += 500 {
		batch := make([]any, 500)
		for i := range batch {
			batch[i] = ev("web", 1_000_000+n+i, map[string]any{"anon_id": fmt.Sprintf("anon-%d", i%97)})
		}
		intake(t, h.c("POST", "/v1/events", "web", batch, "User-Agent", chromeUA))
	}
	load := startLoad(h.collector.URL, "web", 0)
	defer load.end()
	before := load.waitAcked(t, 100) // the load is under way
	r := h.q("POST", "/v1/backup", testAdminToken, map[string]any{})
	mustStatus(t, r, 200, "")
	path := backupPath(t, h, r)
	during := len(load.ackedSoFar()) - len(before)
	if err := load.end(); err != nil {
		t.Fatal(err)
	}
	var got struct{ Steps, Restarts, Pages int }
	json.Unmarshal(r.body, &got)
	if got.Restarts != 0 || got.Steps < 2 {
		t.Fatalf("got %d steps and %d restarts, want several steps and no restart", got.Steps, got.Restarts)
	}
	t.Logf("%d pages in %d steps; %d events acknowledged during the backup", got.Pages, got.Steps, during)
	checkBackupCopy(t, path, before)
	if _, err := os.Stat(path + "-journal"); err == nil {
		t.Error("got a -journal file next to the copy, want none")
	}
	if tmps, _ := filepath.Glob(path + ".tmp-*"); len(tmps) > 0 {
		t.Errorf("got temporary files %v left, want none", tmps)
	}
}

// backupPath is the copy an answer of POST /v1/backup names, which must be
// in the backups folder next to the database.
func backupPath(t *testing.T, h *harness, r response) string {
	t.Helper()
	var a backupBody
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatal(err)
	}
	dbDir, _ := filepath.Abs(filepath.Dir(h.path))
	if got, _ := filepath.Abs(filepath.Dir(a.Path)); got != filepath.Join(dbDir, "backups") {
		t.Fatalf("got the copy in %s, want it in %s", got, filepath.Join(dbDir, "backups"))
	}
	return a.Path
}

// The request names no path: an admin token cannot make the server write
// or replace a file anywhere but a new one in its backups folder.
func TestBackupRefusals(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "the backup copies SQLite's file")
	h := newHarness(t)
	h.setupTenant("acme", "web")
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, nil), "User-Agent", chromeUA))
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing.db")
	os.WriteFile(existing, []byte("keep me"), 0o644)
	own, _ := filepath.Abs(h.path)
	tests := []struct {
		name   string
		token  string
		body   map[string]any
		status int
		code   string
	}{
		{"no admin token", "", map[string]any{}, 401, "unauthorized"},
		{"a path", testAdminToken, map[string]any{"path": existing}, 400, "invalid_backup"},
		{"a path, forced", testAdminToken, map[string]any{"path": existing, "force": true}, 400, "invalid_backup"},
		{"the database itself", testAdminToken, map[string]any{"path": own, "force": true}, 400, "invalid_backup"},
		{"database_path not a string", testAdminToken, map[string]any{"database_path": 7}, 400, "invalid_backup"},
		{"another server's database", testAdminToken, map[string]any{"database_path": filepath.Join(dir, "other.db")}, 400, "invalid_backup"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.q("POST", "/v1/backup", tt.token, tt.body)
			mustStatus(t, r, tt.status, tt.code)
		})
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep me" {
		t.Fatalf("got %q in the existing file, want it untouched", b)
	}
	if fi, err := os.Stat(h.path); err != nil || fi.Size() == 0 {
		t.Fatalf("got the database %v (%v), want it untouched", fi, err)
	}
	// database_path naming this server is accepted; two backups are two files.
	first := backupPath(t, h, mustOK(t, h.q("POST", "/v1/backup", testAdminToken, map[string]any{"database_path": own})))
	second := backupPath(t, h, mustOK(t, h.q("POST", "/v1/backup", testAdminToken, map[string]any{})))
	if first == second {
		t.Fatalf("got %s twice, want a new file per backup", first)
	}
	checkBackupCopy(t, first, []string{eventID(1)})
	if fi, err := os.Stat(filepath.Dir(first)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("got the backups folder %v (%v), want mode 0700", fi, err)
	}
}

func mustOK(t *testing.T, r response) response {
	t.Helper()
	mustStatus(t, r, 200, "")
	return r
}
