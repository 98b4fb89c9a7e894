package server

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tally-analytics/tally/storage"
)

const testAdminToken = "test-admin-token"

// clock is a settable test clock.
type clock struct {
	mu   sync.Mutex
	t    time.Time
	next func()
}

func newClock(t time.Time) *clock { return &clock{t: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	f := c.next
	c.next = nil
	c.mu.Unlock()
	if f != nil {
		f()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// OnNextRead has the next reading of the clock, by the server or by
// storage, run f first, once: a test stages something at a moment a
// request reaches, such as a storage call about to enter the writer.
func (c *clock) OnNextRead(f func()) {
	c.mu.Lock()
	c.next = f
	c.mu.Unlock()
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// harness is a real Server over a real SQLite file (or a PostgreSQL
// database: docs/development.md#both-backends), behind two httptest listeners.
type harness struct {
	t         *testing.T
	db        *storage.DB
	path      string
	url       string // the PostgreSQL database, when the tests run on one
	srv       *Server
	collector *httptest.Server
	query     *httptest.Server
	clock     *clock
	op        *sql.DB
}

type harnessOption func(*Config)

func newHarness(t *testing.T, opts ...harnessOption) *harness {
	t.Helper()
	return newHarnessAt(t, filepath.Join(t.TempDir(), "test.db"), opts...)
}

// newHarnessAt is newHarness over the database file at path, so a test can
// stop one server and start another on the same data.
func newHarnessAt(t *testing.T, path string, opts ...harnessOption) *harness {
	t.Helper()
	return newHarnessStorage(t, storage.Options{Path: path}, opts...)
}

// newHarnessStorage is newHarness over storage opened with sopts (its Now
// is the harness clock).
func newHarnessStorage(t *testing.T, sopts storage.Options, opts ...harnessOption) *harness {
	t.Helper()
	return newHarnessOn(t, testOptions(t, sopts), opts...)
}

// newHarnessOn is newHarnessStorage on the backend sopts names, whatever
// the test run's: SQLite unless sopts.DatabaseURL is set (a test comparing
// the backends opens one of each).
func newHarnessOn(t *testing.T, sopts storage.Options, opts ...harnessOption) *harness {
	t.Helper()
	path := sopts.Path
	clk := newClock(time.Date(2026, 1, 31, 9, 5, 0, 120e6, time.UTC))
	sopts.Now = clk.Now
	db, err := storage.Open(context.Background(), sopts)
	if err != nil {
		t.Fatalf("open storage: %v", err)
	}
	h := &harness{t: t, db: db, path: path, url: sopts.DatabaseURL, clock: clk}
	// The listeners exist before the Server, so CollectorURL can name this
	// harness's own collector (DLQ replay and webhooks re-POST to it).
	var collector, query http.Handler
	h.collector = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { collector.ServeHTTP(w, r) }))
	h.query = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { query.ServeHTTP(w, r) }))
	cfg := Config{AdminToken: testAdminToken, Now: clk.Now, Logger: discardLogger(), CollectorURL: h.collector.URL}
	for _, o := range opts {
		o(&cfg)
	}
	h.srv = New(cfg, db)
	collector, query = h.srv.Collector(), h.srv.Query()
	t.Cleanup(h.stop)
	return h
}

// stop closes the listeners and the database (also run at cleanup).
func (h *harness) stop() {
	h.collector.Close()
	h.query.Close()
	if err := h.db.Close(); err != nil {
		h.t.Errorf("close storage: %v", err)
	}
}

// c sends a request to the collector.
func (h *harness) c(method, path, token string, body any, headers ...string) response {
	h.t.Helper()
	return h.request(method, h.collector.URL+path, token, body, headers...)
}

// count runs a COUNT(*) query on a second connection.
func (h *harness) count(query string, args ...any) int {
	h.t.Helper()
	var n int
	if err := h.sqlDB().QueryRow(query, args...).Scan(&n); err != nil {
		h.t.Fatalf("%s: %v", query, err)
	}
	return n
}

// response is a decoded HTTP answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response is not a JSON object: %v: %s", err, r.body)
	}
	return m
}

// code returns the error envelope's code ("" when there is none).
func (r response) code() string {
	var env struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.body, &env)
	return env.Error.Code
}

// request sends method url with token as bearer ("" for none) and body (a
// string is sent as is, anything else as JSON).
func (h *harness) request(method, url, token string, body any, headers ...string) response {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" { // net/http sends req.Host, not the header
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// q sends a request to the query API.
func (h *harness) q(method, path, token string, body any, headers ...string) response {
	h.t.Helper()
	return h.request(method, h.query.URL+path, token, body, headers...)
}

// mustStatus fails the test unless r has the wanted status (and code).
func mustStatus(t *testing.T, r response, status int, code string) {
	t.Helper()
	if r.status != status || r.code() != code {
		t.Fatalf("got %d %q, want %d %q; body %s", r.status, r.code(), status, code, r.body)
	}
}

// tenant is a workspace with a site and keys of each scope.
type tenant struct {
	slug, wsID, site                       string
	adminKey, readKey, ingestKey, adminKID string
}

// setupTenant creates workspace slug with site id site and three keys.
func (h *harness) setupTenant(slug, site string) tenant {
	h.t.Helper()
	r := h.q("POST", "/v1/workspaces", testAdminToken, map[string]any{"name": slug, "slug": slug})
	mustStatus(h.t, r, 201, "")
	tn := tenant{slug: slug, wsID: r.json(h.t)["id"].(string), site: site}
	mustStatus(h.t, h.q("POST", "/v1/workspaces/"+slug+"/sites", testAdminToken, map[string]any{"id": site, "name": site}), 201, "")
	key := func(scopes ...string) (string, string) {
		r := h.q("POST", "/v1/workspaces/"+slug+"/keys", testAdminToken, map[string]any{"label": "k", "scopes": scopes})
		mustStatus(h.t, r, 201, "")
		m := r.json(h.t)
		return m["plaintext"].(string), m["id"].(string)
	}
	tn.adminKey, tn.adminKID = key("admin")
	tn.readKey, _ = key("query:read")
	tn.ingestKey, _ = key("ingest:write")
	return tn
}

// sqlDB opens a second, independent connection to the harness's file, as an
// operator's sqlite3 shell would (or psql, on PostgreSQL).
func (h *harness) sqlDB() *sql.DB {
	h.t.Helper()
	if h.op != nil {
		return h.op
	}
	driver, dsn := "sqlite", storage.FileURI(h.path)+"?_pragma=busy_timeout(5000)"
	if h.url != "" {
		driver, dsn = pgTestDriver, h.url
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { db.Close() })
	h.op = db
	return db
}

// eventually polls cond for up to two seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// events reads every event intake stored for site ("" for every site)
// in arrival order, wire text decoded, through storage on either backend
// (docs/postgresql.md#on-postgresql: a test's own SQL cannot call event_raw
// there).
func (h *harness) events(site string) []storage.EventRecord {
	h.t.Helper()
	list, err := h.db.EventRecords(context.Background(), site)
	if err != nil {
		h.t.Fatalf("read stored events: %v", err)
	}
	return list
}

// eventByID is the stored event with id; ok is false when there is none.
func (h *harness) eventByID(id string) (e storage.EventRecord, ok bool) {
	h.t.Helper()
	for _, e := range h.events("") {
		if e.ID == id {
			return e, true
		}
	}
	return e, false
}
