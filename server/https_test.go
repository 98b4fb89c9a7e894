package server

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The redirect of HTTP_ADDR keeps host, path and query, names the HTTPS
// port unless it is 443, and keeps the method (308).
func TestRedirectToHTTPS(t *testing.T) {
	t.Parallel()
	tests := []struct {
		port, host, target, want string
	}{
		{"443", "stats.example.com", "/v1/events?x=1", "https://stats.example.com/v1/events?x=1"},
		{"443", "stats.example.com:80", "/", "https://stats.example.com/"},
		{"8443", "stats.example.com", "/a%20b", "https://stats.example.com:8443/a%20b"},
		{"443", "[2001:db8::1]:80", "/", "https://[2001:db8::1]:443/"},
	}
	for _, tt := range tests {
		srv := httptest.NewServer(redirectToHTTPS(tt.port))
		req, _ := http.NewRequest("POST", srv.URL+tt.target, strings.NewReader("{}"))
		req.Host = tt.host
		res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusPermanentRedirect || res.Header.Get("Location") != tt.want {
			t.Errorf("%s%s to port %s: got %d %q, want 308 %q", tt.host, tt.target, tt.port, res.StatusCode, res.Header.Get("Location"), tt.want)
		}
	}
}

// The HTTPS server's error log never holds a client address.
func TestHandshakeLogDropsAddresses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line, wantMsg, wantReason string
		level                     slog.Level
	}{
		{"http: TLS handshake error from 203.0.113.7:51234: EOF", "TLS handshake failed", "EOF", slog.LevelDebug},
		{"http: TLS handshake error from [2001:db8::7]:51234: read tcp 192.0.2.1:443->[2001:db8::7]:51234: i/o timeout", "TLS handshake failed", "", slog.LevelDebug},
		{`http: TLS handshake error from 203.0.113.7:51234: acme/autocert: unable to satisfy "https://ca/authz" for domain "stats.example.com": no viable challenge type found`,
			"no certificate from the ACME CA", `acme/autocert: unable to satisfy "https://ca/authz" for domain "stats.example.com": no viable challenge type found`, slog.LevelWarn},
		{`http: TLS handshake error from 203.0.113.7:51234: acme/autocert: host "x.example" not configured in HostWhitelist`, "TLS handshake failed",
			`acme/autocert: host "x.example" not configured in HostWhitelist`, slog.LevelDebug},
		{"http: panic serving 203.0.113.7:51234: boom", "panic serving HTTPS", "boom", slog.LevelError},
		{"http2: server connection error from 203.0.113.7:51234: connection error: PROTOCOL_ERROR", "http2: server connection error from [address]: connection error: PROTOCOL_ERROR", "", slog.LevelWarn},
		{"http2: server connection error from [2001:db8::7]:51234: connection error: PROTOCOL_ERROR", "http2: server connection error from [address]: connection error: PROTOCOL_ERROR", "", slog.LevelWarn},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		handshakeLog{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}.Write([]byte(tt.line + "\n"))
		got := buf.String()
		if strings.Contains(got, "203.0.113.7") || strings.Contains(got, "2001:db8::7") {
			t.Errorf("got %q, want no client address", got)
		}
		for _, want := range []string{"level=" + tt.level.String(), "msg=\"" + tt.wantMsg + "\""} {
			if !strings.Contains(got, want) {
				t.Errorf("got %q, want %s", got, want)
			}
		}
		if tt.wantReason != "" && !strings.Contains(got, "reason=") || !strings.Contains(got, strings.ReplaceAll(tt.wantReason, `"`, `\"`)) {
			t.Errorf("got %q, want reason %q", got, tt.wantReason)
		}
	}
}
