package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// exportLines decodes an NDJSON export, one object a line.
func exportLines(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q is not a JSON object: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// The export holds the site's events of the range, UTC days with to
// inclusive, in arrival order, in the timeline's shape plus user_id,
// properties and received_at; CSV has the same fields.
func TestExport(t *testing.T) {
	t.Parallel()
	h := newHarness(t) // the clock: 2026-01-31T09:05:00.120Z
	tn := h.setupTenant("acme", "web")
	h.setupTenant("bravo", "shop")
	send := func(site string, n int, extra map[string]any) {
		t.Helper()
		intake(t, h.c("POST", "/v1/events", site, ev(site, n, extra), "User-Agent", chromeUA))
	}
	send("web", 1, map[string]any{"ts": "2026-01-29T23:59:59.999Z"}) // before the range
	send("web", 2, map[string]any{"ts": "2026-01-30T00:00:00Z", "user_id": "u1", "referrer": "https://ref.test/",
		"properties": map[string]any{"plan": "pro", "n": 2, "note": "a,b \"c\"\nd"}})
	send("web", 3, map[string]any{"ts": "2026-01-31T23:59:59.999Z", "type": "signup"}) // the last moment of to
	send("web", 4, map[string]any{"ts": "2026-02-01T00:00:00Z"})                       // after the range
	send("shop", 5, map[string]any{"ts": "2026-01-30T12:00:00Z"})                      // another site
	send("web", 6, map[string]any{"ts": "2026-01-30T08:00:00Z", "anon_id": "erased", "user_id": "gone"})
	segmentOKAnswer(t, h.segmentPost("/v1/track", "web", `{"anonymousId":"seg-1","event":"Order Completed","timestamp":"2026-01-30T10:00:00Z","properties":{"revenue":49}}`))
	mustStatus(t, h.q("POST", "/v1/sites/web/gdpr/delete", tn.adminKey, map[string]any{"subject": map[string]any{"user_id": "gone"}},
		"Content-Type", "application/json"), 200, "")
	const rng = "from=2026-01-30&to=2026-01-31"

	r := h.q("GET", "/v1/sites/web/export?"+rng+"&format=ndjson", tn.readKey, nil)
	mustStatus(t, r, 200, "")
	if got := r.header.Get("Content-Type"); got != "application/x-ndjson" {
		t.Errorf("got Content-Type %q, want application/x-ndjson", got)
	}
	if got, want := r.header.Get("Content-Disposition"), `attachment; filename="tally-web-2026-01-30-2026-01-31.ndjson"`; got != want {
		t.Errorf("got Content-Disposition %q, want %q", got, want)
	}
	lines := exportLines(t, r.body)
	var ids []string
	for _, l := range lines {
		ids = append(ids, l["id"].(string))
	}
	if want := []string{eventID(2), eventID(3)}; len(ids) != 3 || !slices.Equal(ids[:2], want) {
		t.Fatalf("got ids %v, want %v and the Segment event, in arrival order", ids, want)
	}
	first, _ := json.Marshal(lines[0])
	want := `{"anon_id":"anon-1","browser":"Chrome","city":null,"country":null,"device_type":"desktop","id":"` + eventID(2) +
		`","os":"Windows","properties":{"n":2,"note":"a,b \"c\"\nd","plan":"pro"},"received_at":"2026-01-31T09:05:00.120Z",` +
		`"referrer":"https://ref.test/","ts":"2026-01-30T00:00:00.000Z","type":"pageview","url":"https://example.test/","user_id":"u1"}`
	if string(first) != want {
		t.Errorf("got line\n%s\nwant\n%s", first, want)
	}
	if lines[1]["properties"] != nil || lines[1]["user_id"] != nil {
		t.Errorf("event without properties or user: got %v", lines[1])
	}
	if seg := lines[2]; seg["type"] != "Order Completed" || seg["anon_id"] != "seg-1" || seg["properties"].(map[string]any)["revenue"] != float64(49) {
		t.Errorf("got Segment line %v, want its event name, anonymousId and properties", seg)
	}
	if strings.Contains(string(r.body), "erased") || strings.Contains(string(r.body), "gone") {
		t.Errorf("the export holds the erased subject:\n%s", r.body)
	}

	r = h.q("GET", "/v1/sites/web/export?"+rng+"&format=csv", tn.readKey, nil)
	mustStatus(t, r, 200, "")
	if got := r.header.Get("Content-Type"); got != "text/csv; charset=utf-8" {
		t.Errorf("got Content-Type %q, want text/csv; charset=utf-8", got)
	}
	records, err := csv.NewReader(strings.NewReader(string(r.body))).ReadAll()
	if err != nil {
		t.Fatalf("the CSV does not parse: %v\n%s", err, r.body)
	}
	header := []string{"id", "type", "url", "ts", "anon_id", "referrer", "country", "city", "browser", "os", "device_type", "user_id", "properties", "received_at"}
	if len(records) != 4 || !slices.Equal(records[0], header) {
		t.Fatalf("got records %q, want the header and 3 rows", records)
	}
	row := map[string]string{}
	for i, name := range header {
		row[name] = records[1][i]
	}
	if row["id"] != eventID(2) || row["user_id"] != "u1" || row["country"] != "" || row["ts"] != "2026-01-30T00:00:00.000Z" {
		t.Errorf("got CSV row %v", row)
	}
	var props map[string]any
	if err := json.Unmarshal([]byte(row["properties"]), &props); err != nil || props["note"] != "a,b \"c\"\nd" {
		t.Errorf("got properties cell %q (%v), want the JSON object", row["properties"], err)
	}
	if records[2][12] != "" {
		t.Errorf("got properties cell %q for an event without, want empty", records[2][12])
	}

	// An empty range: 200 with no lines, or the CSV header alone.
	r = h.q("GET", "/v1/sites/web/export?from=2025-01-01&to=2025-01-31&format=ndjson", tn.readKey, nil)
	if mustStatus(t, r, 200, ""); len(r.body) != 0 {
		t.Errorf("empty range: got body %q, want none", r.body)
	}
	r = h.q("GET", "/v1/sites/web/export?from=2025-01-01&to=2025-01-31&format=csv", tn.readKey, nil)
	if mustStatus(t, r, 200, ""); string(r.body) != strings.Join(header, ",")+"\n" {
		t.Errorf("empty range: got CSV %q, want the header alone", r.body)
	}
}

// Bad parameters are a 400 naming the parameter; the site's reach is that
// of every read.
func TestExportRefusals(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	other := h.setupTenant("bravo", "shop")
	tests := []struct {
		query, token string
		status       int
		code, names  string
	}{
		{"to=2026-01-31&format=csv", tn.readKey, 400, "invalid_date_param", "from"},
		{"from=2026-01-01&to=31.01.2026&format=csv", tn.readKey, 400, "invalid_date_param", "to"},
		{"from=2026-02-01&to=2026-01-31&format=csv", tn.readKey, 400, "invalid_date_range", "from"},
		{"from=2024-01-01&to=2026-01-31&format=csv", tn.readKey, 400, "invalid_date_range", "366"},
		{"from=2026-01-01&to=2026-01-31", tn.readKey, 400, "invalid_format", "format"},
		{"from=2026-01-01&to=2026-01-31&format=xlsx", tn.readKey, 400, "invalid_format", "ndjson or csv"},
		{"from=2026-01-01&to=2026-01-31&format=csv", other.readKey, 404, "not_found", ""},
		{"from=2026-01-01&to=2026-01-31&format=csv", tn.ingestKey, 403, "forbidden", ""},
		{"from=2026-01-01&to=2026-01-31&format=csv", "", 401, "unauthorized", ""},
	}
	for _, tt := range tests {
		r := h.q("GET", "/v1/sites/web/export?"+tt.query, tt.token, nil)
		mustStatus(t, r, tt.status, tt.code)
		if msg := r.json(t)["error"].(map[string]any)["message"].(string); !strings.Contains(msg, tt.names) {
			t.Errorf("%s: got message %q, want it to name %q", tt.query, msg, tt.names)
		}
	}
}

// smallBuffers is a listener whose connections have a small send buffer,
// so a server that writes ahead of its client blocks within kilobytes
// rather than the megabytes the kernel otherwise allows.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(64 << 10)
	}
	return c, err
}

// smallBufferGet sends a GET to a second listener of h's query API over a
// connection whose socket buffers are small at both ends: the server
// cannot write much further ahead than the client reads.
func smallBufferGet(t *testing.T, h *harness, path, token string) *http.Response {
	t.Helper()
	srv := httptest.NewUnstartedServer(h.srv.Query())
	srv.Listener = smallBuffers{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetReadBuffer(64 << 10)
		}
		return c, err
	}}
	t.Cleanup(tr.CloseIdleConnections)
	req, _ := http.NewRequest("GET", srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := (&http.Client{Transport: tr, Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != 200 || res.ContentLength != -1 {
		t.Fatalf("got status %d, length %d, want 200 streamed (no length)", res.StatusCode, res.ContentLength)
	}
	return res
}

// sendMany stores n pageviews of site web through the collector, the anon
// id of each from anon(i).
func sendMany(t *testing.T, h *harness, n int, anon func(i int) string) {
	t.Helper()
	for start := 0; start < n; start += 500 {
		var batch []any
		for i := start; i < min(start+500, n); i++ {
			batch = append(batch, ev("web", i, map[string]any{"anon_id": anon(i), "url": "https://example.test/p/" + eventID(i),
				"properties": map[string]any{"n": i, "plan": "pro"}}))
		}
		intake(t, h.c("POST", "/v1/events", "web", batch, "User-Agent", chromeUA))
	}
}

// A large export is streamed: the first lines reach the client while the
// server has read only the first pages, so a subject erased after they
// arrived is absent from the rest (a handler that read every row before
// writing would send it). Both ends' socket buffers are small, so the
// server cannot read far ahead of what the client took.
func TestExportStreams(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	const total, late = 20000, 1000
	sendMany(t, h, total, func(i int) string {
		if i >= total-late {
			return "late-visitor"
		}
		return "visitor-" + eventID(i%3000)
	})
	res := smallBufferGet(t, h, "/v1/sites/web/export?from=2026-01-31&to=2026-01-31&format=ndjson", tn.readKey)
	body := bufio.NewReader(res.Body)
	firstLine, err := body.ReadString('\n')
	if err != nil || !strings.Contains(firstLine, eventID(0)) {
		t.Fatalf("got first line %q (%v), want event 0", firstLine, err)
	}

	mustStatus(t, h.q("POST", "/v1/sites/web/gdpr/delete", tn.adminKey, map[string]any{"subject": map[string]any{"anon_id": "late-visitor"}},
		"Content-Type", "application/json"), 200, "")
	rest, err := io.ReadAll(body)
	if err != nil {
		t.Fatalf("reading the export: %v", err)
	}
	lines := 1 + strings.Count(string(rest), "\n")
	if lines != total-late {
		t.Errorf("got %d lines, want %d: every event but the erased subject's", lines, total-late)
	}
	if strings.Contains(string(rest), "late-visitor") {
		t.Errorf("the export holds events of the subject erased after its first line arrived")
	}
}

// A storage failure after the first bytes cannot change the status any
// more: the transfer is broken off (no last chunk), so the client sees an
// error rather than a short export that looks whole, and the failure is
// logged with the route.
func TestExportFailingMidwayBreaksTheTransfer(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	h := newHarness(t, func(c *Config) { c.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	tn := h.setupTenant("acme", "web")
	sendMany(t, h, 5000, func(int) string { return "v" })
	res := smallBufferGet(t, h, "/v1/sites/web/export?from=2026-01-31&to=2026-01-31&format=csv", tn.readKey)
	body := bufio.NewReader(res.Body)
	if _, err := body.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if err := h.db.Close(); err != nil { // every later page read fails
		t.Fatal(err)
	}
	if _, err := io.ReadAll(body); err == nil {
		t.Errorf("got a whole transfer, want it broken off; logs %s", logs.String())
	}
	eventually(t, "the failure logged", func() bool { return strings.Contains(logs.String(), `"route":"`+exportRoute+`"`) })
}

// syncBuffer is a bytes.Buffer that the server's goroutines and the test
// may use at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
