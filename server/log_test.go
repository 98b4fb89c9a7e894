package server

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"testing"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestIntakeLogsHoldNoPersonalData(t *testing.T) {
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
