package cli

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tally-analytics/tally/storage"
	_ "modernc.org/sqlite"
)

// TestSIGKILLLosesNoAcknowledgedEvent kills the server with SIGKILL in the
// middle of a load, restarts it on the same file, and checks that every
// event it answered 202 is stored.
func TestSIGKILLLosesNoAcknowledgedEvent(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	dbPath := filepath.Join(t.TempDir(), "crash.db")
	env := []string{"DATABASE_PATH=" + dbPath, "ADMIN_TOKEN=tok", "INGEST_RATE_LIMIT=0"}
	p := start(t, bin, env...)
	admin := func(method, path, body string) {
		req, _ := http.NewRequest(method, p.query+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != 201 {
			t.Fatalf("%s %s: %v %v", method, path, err, res)
		}
		res.Body.Close()
	}
	admin("POST", "/v1/workspaces", `{"name":"c","slug":"c"}`)
	admin("POST", "/v1/workspaces/c/sites", `{"id":"web","name":"w"}`)

	var (
		mu    sync.Mutex
		acked []string
		seq   atomic.Int64
		stop  atomic.Bool
		wg    sync.WaitGroup
		// loaded is closed once loadedAt events are acknowledged: the
		// kill then lands in the middle of a load, however slow the
		// machine.
		loaded     = make(chan struct{})
		loadedOnce sync.Once
	)
	const loadedAt = 500
	client := &http.Client{Timeout: 5 * time.Second}
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				size := 1 + w%3*10 // single events and batches of 11 and 21
				var ids []string
				var batch []map[string]any
				for range size {
					id := fmt.Sprintf("00000000-0000-4000-8000-%012d", seq.Add(1))
					ids = append(ids, id)
					batch = append(batch, map[string]any{"id": id, "site_id": "web", "anon_id": fmt.Sprintf("v%d", w), "type": "pageview"})
				}
				body, _ := json.Marshal(batch)
				req, _ := http.NewRequest("POST", p.collector+"/v1/events", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer web")
				res, err := client.Do(req)
				if err != nil {
					continue // the server is gone: nothing was acknowledged
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode == http.StatusAccepted {
					mu.Lock()
					acked = append(acked, ids...)
					if len(acked) >= loadedAt {
						loadedOnce.Do(func() { close(loaded) })
					}
					mu.Unlock()
				}
			}
		}()
	}
	select {
	case <-loaded:
	case <-time.After(30 * time.Second):
		t.Fatalf("fewer than %d events acknowledged in 30 s: the load did not run", loadedAt)
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
	stop.Store(true)
	wg.Wait()
	if len(acked) < 100 {
		t.Fatalf("only %d events were acknowledged before the kill: the load did not run", len(acked))
	}

	// Restart on the same file (recovering the WAL), then stop it cleanly.
	p2 := start(t, bin, env...)
	if code, _ := get(t, p2.query+"/healthz"); code != 200 {
		t.Fatalf("restart: healthz %d", code)
	}
	p2.cmd.Process.Signal(interruptSignal)
	p2.cmd.Wait()

	db, err := sql.Open("sqlite", storage.FileURI(dbPath)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stored := map[string]bool{}
	rows, err := db.Query(`SELECT id FROM events WHERE site_id = 'web'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		stored[id] = true
	}
	rows.Close()
	missing := 0
	for _, id := range acked {
		if !stored[id] {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged events are missing after SIGKILL", missing, len(acked))
	}
	t.Logf("%d acknowledged events, all stored (%d rows in total)", len(acked), len(stored))
}
