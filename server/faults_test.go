package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/tally-analytics/tally/internal/dbtest"
	"github.com/tally-analytics/tally/internal/smallfs"
)

// truncateWAL copies the WAL into the database and empties it, so that
// the next commit needs new space on the disk rather than reusing the
// WAL's.
func (h *harness) truncateWAL() {
	h.t.Helper()
	// A read in the background (the partials' warm-up after a commit, say)
	// may hold its snapshot for a moment, and the checkpoint answers busy:
	// try again until none holds it up.
	var busy, frames, copied int
	var err error
	waitFor(h.t, 10*time.Second, "a WAL checkpoint that no read holds up", func() bool {
		err = h.sqlDB().QueryRow(`PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &copied)
		return err != nil || busy == 0
	})
	if err != nil {
		h.t.Fatalf("checkpoint: %v", err)
	}
}

// waitFor polls cond until it holds, failing the test after limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// healthStatus returns the status of the collector's /healthz.
func (h *harness) healthStatus() int {
	h.t.Helper()
	return h.c("GET", "/v1/healthz", "", nil).status
}

// mustUnavailable fails the test unless r is 503 unavailable with a
// Retry-After.
func mustUnavailable(t *testing.T, r response) {
	t.Helper()
	mustStatus(t, r, 503, "unavailable")
	if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s <= 0 {
		t.Fatalf("got Retry-After %q, want a positive number of seconds", r.header.Get("Retry-After"))
	}
}

func TestDiskFullDuringLoad(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "fills the disk under the SQLite file")
	// Larger than the WAL grows under this load (it starts over at 64 MiB,
	// docs/storage.md#storage): on a smaller file system the WAL fills the room
	// freed again within a second, and /healthz rightly stays 503.
	dir := smallfs.Mount(t, "128m")
	h := newHarnessAt(t, filepath.Join(dir, "t.db"))
	h.setupTenant("acme", "acme-web")

	var (
		mu         sync.Mutex
		accepted   = map[string]bool{}
		refused    = map[string]bool{}
		unexpected []string
		n202, n503 atomic.Int64
		freed      atomic.Bool
		afterFree  atomic.Int64 // 202s to requests sent after the disk was freed
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				size := 1
				if (g+i)%3 == 0 {
					size = 20 // single events and batches
				}
				ids := make([]string, size)
				events := make([]map[string]any, size)
				for k := range events {
					ids[k] = uuid.NewString()
					events[k] = map[string]any{"id": ids[k], "site_id": "acme-web", "anon_id": fmt.Sprintf("v%d-%d", g, i%7),
						"type": "pageview", "url": "https://example.test/" + strconv.Itoa(i%5)}
				}
				var payload any = events
				if size == 1 {
					payload = events[0]
				}
				body, _ := json.Marshal(payload)
				sentAfterFree := freed.Load()
				status, retryAfter, code, err := postEvents(h.collector.URL+"/v1/events", "acme-web", body)
				mu.Lock()
				switch {
				case err != nil:
					unexpected = append(unexpected, err.Error())
				case status == 202:
					n202.Add(1)
					if sentAfterFree {
						afterFree.Add(1)
					}
					for _, id := range ids {
						accepted[id] = true
					}
				case status == 503 && code == "unavailable" && retryAfter != "":
					n503.Add(1)
					for _, id := range ids {
						refused[id] = true
					}
				default:
					unexpected = append(unexpected, fmt.Sprintf("%d %s Retry-After %q", status, code, retryAfter))
				}
				mu.Unlock()
			}
		}()
	}
	stopLoad := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopLoad()

	// answersOK fails the test at the first answer other than 202 or 503
	// unavailable with Retry-After.
	answersOK := func() {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if len(unexpected) > 0 {
			t.Fatalf("got %d answers other than 202 or 503 unavailable with Retry-After, first: %s", len(unexpected), unexpected[0])
		}
	}
	waitFor(t, 30*time.Second, "events accepted before the disk fills", func() bool { answersOK(); return n202.Load() >= 100 })
	free := smallfs.Fill(t, dir, 0)
	waitFor(t, 30*time.Second, "503 answers on a full disk", func() bool { answersOK(); return n503.Load() >= 5 })
	waitFor(t, 30*time.Second, "/healthz 503 on a full disk", func() bool { return h.healthStatus() == 503 })
	freed.Store(true)
	free()
	waitFor(t, 30*time.Second, "202 answers once space is back", func() bool { answersOK(); return afterFree.Load() >= 20 })
	waitFor(t, 30*time.Second, "/healthz 200 once space is back", func() bool { return h.healthStatus() == 200 })
	stopLoad()
	answersOK()

	mu.Lock()
	defer mu.Unlock()
	stored := map[string]bool{}
	rows, err := h.sqlDB().Query(`SELECT id FROM events WHERE site_id = 'acme-web'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		stored[id] = true
	}
	rows.Close()
	lost, leaked := 0, 0
	for id := range accepted {
		if !stored[id] {
			lost++
		}
	}
	for id := range refused {
		if stored[id] {
			leaked++
		}
	}
	if lost > 0 || leaked > 0 {
		t.Fatalf("got %d of %d events answered 202 missing and %d of %d answered 503 stored, want none", lost, len(accepted), leaked, len(refused))
	}
	t.Logf("%d requests answered 202 (%d events), %d answered 503", n202.Load(), len(accepted), n503.Load())
}

// postEvents posts body to url with a bearer token, safe to call from any
// goroutine.
func postEvents(url, token string, body []byte) (status int, retryAfter, code string, err error) {
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		return 0, "", "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Retry-After"), response{body: b}.code(), nil
}

func TestFailedCommitLeavesCachesEqualToDatabase(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "fills the disk under the SQLite file")
	dir := smallfs.Mount(t, "16m")
	h := newHarnessAt(t, filepath.Join(dir, "t.db"), func(c *Config) { c.Quota = 3; c.RequireAPIKey = KeyModeTag })
	tn := h.setupTenant("acme", "acme-web")
	key := h.q("POST", "/v1/workspaces/acme/keys", testAdminToken, map[string]any{"label": "k", "scopes": []string{"ingest:write"}}).json(t)
	keyID, keyText := key["id"].(string), key["plaintext"].(string)
	withKey := func(n int) response {
		return h.c("POST", "/v1/events", keyText, ev(tn.site, n, nil), "X-Site-Id", tn.site)
	}
	post := func(events ...map[string]any) response {
		var body any = events
		if len(events) == 1 {
			body = events[0]
		}
		return h.c("POST", "/v1/events", tn.site, body)
	}
	intake(t, post(ev(tn.site, 1, nil)))
	mustStatus(t, h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": "other", "name": "other"}), 201, "")
	intake(t, h.c("POST", "/v1/events", "other", ev("other", 7, nil)))

	h.truncateWAL()
	free := smallfs.Fill(t, dir, 0)
	mustUnavailable(t, post(ev(tn.site, 2, nil), ev(tn.site, 3, nil)))
	mustUnavailable(t, h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": "late", "name": "late"}))
	mustUnavailable(t, h.q("DELETE", "/v1/workspaces/acme/keys/"+keyID, testAdminToken, nil))
	mustUnavailable(t, h.q("DELETE", "/v1/workspaces/acme/sites/other", testAdminToken, nil))

	// The caches still show what the database holds: no site "late", and
	// the key still valid (its events pass the credential check, then
	// meet the full disk).
	mustStatus(t, h.c("POST", "/v1/events", "late", ev("late", 4, nil)), 401, "unauthorized")
	mustUnavailable(t, withKey(6))
	mustUnavailable(t, h.c("POST", "/v1/events", "other", ev("other", 8, nil))) // still a site
	if got := h.db.MonthlyAccepted(tn.site); got != 1 {
		t.Errorf("got %d events in the quota book on a full disk, want 1", got)
	}

	free()
	// Everything works again, and agrees with the database.
	mustStatus(t, h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": "late", "name": "late"}), 201, "")
	intake(t, h.c("POST", "/v1/events", "late", ev("late", 4, nil)))
	mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/keys/"+keyID, testAdminToken, nil), 204, "")
	mustStatus(t, withKey(6), 401, "unauthorized")
	intake(t, h.c("POST", "/v1/events", "other", ev("other", 8, nil)))
	if got := h.count(`SELECT COUNT(*) FROM events WHERE site_id = 'other'`); got != 2 {
		t.Errorf("got %d events of the site whose delete failed, want 2", got)
	}
	mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/sites/other", testAdminToken, nil), 204, "")
	h.clock.Advance(time.Minute)
	// The quota's reservation of the refused batch was released: two
	// more fit in the quota of 3, then no more.
	if a := intake(t, post(ev(tn.site, 2, nil), ev(tn.site, 3, nil))); a.Accepted != 2 {
		t.Fatalf("got %d accepted, want 2", a.Accepted)
	}
	mustStatus(t, post(ev(tn.site, 5, nil)), 429, "quota_exceeded")
	if got, stored := h.db.MonthlyAccepted(tn.site), h.count(`SELECT accepted FROM site_usage WHERE site_id = ?`, tn.site); got != 3 || stored != 3 {
		t.Errorf("got %d accepted in the quota book and %d in site_usage, want 3 and 3", got, stored)
	}
	// The visitor's session counts the stored events only: the session
	// memo did not take the refused ones.
	if got := h.count(`SELECT event_count FROM sessions WHERE site_id = ? AND anon_id = 'anon-1'`, tn.site); got != 3 {
		t.Errorf("got a session of %d events, want 3", got)
	}
	if got := h.count(`SELECT COUNT(*) FROM events WHERE site_id = ?`, tn.site); got != 3 {
		t.Errorf("got %d events stored, want 3", got)
	}
}

func TestHealthzFollowsTheWritePath(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "fills the disk under the SQLite file")
	dir := smallfs.Mount(t, "16m")
	h := newHarnessAt(t, filepath.Join(dir, "t.db"))
	if got := h.healthStatus(); got != 200 {
		t.Fatalf("got /healthz %d before the disk fills, want 200", got)
	}
	h.truncateWAL()
	free := smallfs.Fill(t, dir, 0)
	// Idle: no write fails on its own, so the health check must probe.
	waitFor(t, 10*time.Second, "/healthz 503 on a full disk", func() bool { return h.healthStatus() == 503 })
	r := h.q("GET", "/healthz", "", nil)
	if r.status != 503 || r.json(t)["status"] != "unavailable" || r.json(t)["reason"] == "" {
		t.Fatalf("got %d %s, want 503 unavailable with a reason", r.status, r.body)
	}
	free()
	waitFor(t, 10*time.Second, "/healthz 200 once space is back", func() bool { return h.healthStatus() == 200 })
	if r := h.q("GET", "/healthz", "", nil); string(bytes.TrimSpace(r.body)) != `{"status":"ok"}` {
		t.Fatalf("got %s, want {\"status\":\"ok\"}", r.body)
	}
}

// On a disk nearly full a small commit (the health check's probe, a single
// event) still fits where intake's batches do not: /healthz must say what
// intake meets, on both listeners, and turn 200 again once room is back.
func TestHealthzFollowsIntakeOnANearlyFullDisk(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "fills the disk under the SQLite file")
	dir := smallfs.Mount(t, "24m")
	h := newHarnessAt(t, filepath.Join(dir, "t.db"))
	h.setupTenant("acme", "acme-web")
	batch := func() []map[string]any {
		events := make([]map[string]any, 500)
		for k := range events {
			events[k] = map[string]any{"id": uuid.NewString(), "site_id": "acme-web", "anon_id": fmt.Sprintf("v%d", k),
				"type": "pageview", "url": "https://example.test/" + strconv.Itoa(k)}
		}
		return events
	}
	mustStatus(t, h.c("POST", "/v1/events", "acme-web", batch()), 202, "")
	h.truncateWAL()
	free := smallfs.Fill(t, dir, 256<<10)
	mustUnavailable(t, h.c("POST", "/v1/events", "acme-web", batch()))
	for _, get := range []func(string, string, string, any, ...string) response{h.c, h.q} {
		r := get("GET", "/v1/healthz", "", nil)
		if r.status != 503 || r.json(t)["status"] != "unavailable" || !strings.Contains(r.json(t)["reason"].(string), "disk is full") {
			t.Fatalf("got /healthz %d %s while intake answers 503 for a full disk, want 503 unavailable, disk full", r.status, r.body)
		}
	}
	free()
	waitFor(t, 15*time.Second, "/healthz 200 once room is back", func() bool { return h.healthStatus() == 200 })
	if r := h.q("GET", "/v1/healthz", "", nil); r.status != 200 {
		t.Fatalf("got query /healthz %d %s once room is back, want 200", r.status, r.body)
	}
	mustStatus(t, h.c("POST", "/v1/events", "acme-web", batch()), 202, "")
}

func TestStorageGauges(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	// PostgreSQL's WAL and free space are the server's, not readable by the
	// service's role: they read 0 there (docs/operations.md#metrics).
	free := 1.0
	if dbtest.Postgres() {
		free = 0
	}
	for _, tt := range []struct {
		series string
		min    float64
	}{
		{"service_storage_database_bytes", 1},
		{"service_storage_wal_bytes", 0},
		{"service_storage_free_bytes", free},
	} {
		v, err := strconv.ParseFloat(metricValue(t, h, tt.series), 64)
		if err != nil || v < tt.min {
			t.Errorf("got %s = %v (%v), want at least %v", tt.series, v, err, tt.min)
		}
	}
}
