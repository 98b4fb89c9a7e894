package server

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/julienschmidt/httprouter"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestIntakeLogsHoldNoPersonalData(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	h := newHarness(t, func(c *Config) { c.Logger = logger; c.RequireAPIKey = KeyModeTag })
	tn := h.setupTenant("acme", "web")
	secret := "very-secret-property-value"
	e := ev("web", 1, map[string]any{"user_id": "alice@example.com", "properties": map[string]any{"p": secret}, "traits": map[string]any{"t": secret}})
	intake(t, h.c("POST", "/v1/events", tn.ingestKey, e, "X-Site-Id", "web", "User-Agent", chromeUA))
	mustStatus(t, h.c("POST", "/v1/events", tn.ingestKey, `{"id":"x"}`, "X-Site-Id", "web"), 400, "invalid_event")
	mustStatus(t, h.c("POST", "/v1/events", "sk_acme_wrongwrongwrongwrongwrongwrong", e, "X-Site-Id", "web"), 401, "unauthorized")
	logs := buf.String()
	if strings.Count(logs, `"msg":"intake"`) != 3 {
		t.Fatalf("got logs %s, want one intake line per request", logs)
	}
	for _, banned := range []string{"127.0.0.1", tn.ingestKey, "sk_acme_wrong", secret, "alice@example.com", testAdminToken} {
		if strings.Contains(logs, banned) {
			t.Errorf("logs contain %q:\n%s", banned, logs)
		}
	}
}

// logLines decodes the JSON log lines of buf with the given message.
func logLines(t *testing.T, buf *bytes.Buffer, msg string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", l, err)
		}
		if m["msg"] == msg {
			lines = append(lines, m)
		}
	}
	return lines
}

// A 500 is logged with the route pattern, not the path, which holds the
// user id on the timeline.
func TestInternalErrorLogsTheRoutePattern(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	h := newHarness(t, func(c *Config) { c.Logger = slog.New(slog.NewJSONHandler(&buf, nil)) })
	tn := h.setupTenant("acme", "web")
	if err := h.db.Close(); err != nil { // every read now fails inside the handler
		t.Fatal(err)
	}
	user := "alice@example.com"
	for _, tt := range []struct{ path, route string }{
		{"/v1/sites/web/users/" + user + "/timeline", "/v1/sites/:siteId/users/:userId/timeline"},
		{"/sites/web/users/" + user + "/timeline", "/sites/:siteId/users/:userId/timeline"},
	} {
		buf.Reset()
		mustStatus(t, h.q("GET", tt.path, tn.readKey, nil), 500, "internal")
		lines := logLines(t, &buf, "internal error")
		if len(lines) != 1 || lines[0]["route"] != tt.route {
			t.Errorf("GET %s: got log lines %v, want one with route %s", tt.path, lines, tt.route)
		}
		if strings.Contains(buf.String(), user) {
			t.Errorf("GET %s: logs contain the user id:\n%s", tt.path, buf.String())
		}
	}
}

// A panic is logged with the pattern of the route it happened in, on both
// of its paths; one outside every route gets a fixed placeholder.
func TestPanicLogsTheRoutePattern(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	rt := newRouter(slog.New(slog.NewJSONHandler(&buf, nil)))
	rt.handle("GET", "/users/:userId", func(http.ResponseWriter, *http.Request, httprouter.Params) error { panic("boom") })
	rt.GlobalOPTIONS = http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") })
	srv := httptest.NewServer(rt)
	defer srv.Close()
	for _, tt := range []struct{ method, path, route string }{
		{"GET", "/users/alice@example.com", "/users/:userId"},
		{"GET", "/v1/users/alice@example.com", "/v1/users/:userId"},
		{"OPTIONS", "/users/alice@example.com", unmatchedRoute},
	} {
		buf.Reset()
		req, err := http.NewRequest(tt.method, srv.URL+tt.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 500 {
			t.Errorf("%s %s: got status %d, want 500", tt.method, tt.path, res.StatusCode)
		}
		lines := logLines(t, &buf, "internal error")
		if len(lines) != 1 || lines[0]["route"] != tt.route {
			t.Errorf("%s %s: got log lines %v, want one with route %s", tt.method, tt.path, lines, tt.route)
		}
		if strings.Contains(buf.String(), "alice") {
			t.Errorf("%s %s: logs contain the user id:\n%s", tt.method, tt.path, buf.String())
		}
	}
}
