package cli

import (
	"io"
	"strings"
	"testing"

	"github.com/tally-analytics/tally/server"
)

func TestMailSettings(t *testing.T) {
	t.Parallel()
	base := map[string]string{"SMTP_HOST": "smtp.example.com", "SMTP_FROM": "Tally <tally@example.com>"}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name     string
		env      map[string]string
		port     string
		tls      string
		public   string
		wantErr  string
		mailIsOn bool
	}{
		{"off", nil, "587", server.SMTPStartTLS, "http://127.0.0.1:8081", "", false},
		{"starttls", base, "587", server.SMTPStartTLS, "http://127.0.0.1:8081", "", true},
		{"implicit", with(map[string]string{"SMTP_TLS": "implicit"}), "465", server.SMTPImplicit, "http://127.0.0.1:8081", "", true},
		{"none", with(map[string]string{"SMTP_TLS": "none", "SMTP_USER": "u", "SMTP_PASSWORD": "p"}), "25", server.SMTPNone, "http://127.0.0.1:8081", "", true},
		{"port", with(map[string]string{"SMTP_PORT": "2525"}), "2525", server.SMTPStartTLS, "http://127.0.0.1:8081", "", true},
		{"public URL", with(map[string]string{"PUBLIC_URL": "https://stats.example.com/"}), "587", server.SMTPStartTLS, "https://stats.example.com", "", true},
		{"TLS domain", with(map[string]string{"TLS_DOMAINS": "stats.example.com"}), "587", server.SMTPStartTLS, "https://stats.example.com", "", true},
		{"bad mode", with(map[string]string{"SMTP_TLS": "ssl"}), "", "", "", "SMTP_TLS must be", false},
		{"bad port", with(map[string]string{"SMTP_PORT": "70000"}), "", "", "", "SMTP_PORT", false},
		{"no from", map[string]string{"SMTP_HOST": "smtp.example.com"}, "", "", "", "SMTP_FROM is required", false},
		{"bad from", with(map[string]string{"SMTP_FROM": "not an address"}), "", "", "", "SMTP_FROM must be", false},
		{"password without user", with(map[string]string{"SMTP_PASSWORD": "s3cret-value"}), "", "", "", "SMTP_PASSWORD is set without SMTP_USER", false},
		{"user without host", map[string]string{"SMTP_USER": "u"}, "", "", "", "without SMTP_HOST", false},
		{"bad public URL", with(map[string]string{"PUBLIC_URL": "stats.example.com"}), "", "", "", "PUBLIC_URL must be", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadConfig(nil, func(k string) string { return tt.env[k] }, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error with %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "s3cret-value") {
					t.Errorf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Mail.Port != tt.port || c.Mail.TLS != tt.tls || c.PublicURL != tt.public || (c.Mail.Host != "") != tt.mailIsOn {
				t.Errorf("got port %q, TLS %q, public URL %q, host %q; want %q, %q, %q, on %v", c.Mail.Port, c.Mail.TLS, c.PublicURL, c.Mail.Host, tt.port, tt.tls, tt.public, tt.mailIsOn)
			}
		})
	}
}

// check-config names the mail server, never its password.
func TestCheckConfigSummarisesMail(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SMTP_HOST": "smtp.example.com", "SMTP_USER": "tally", "SMTP_PASSWORD": "s3cret-value",
		"SMTP_FROM": "tally@example.com", "PUBLIC_URL": "https://stats.example.com", "DATABASE_PATH": ":memory:"}
	var stdout, stderr strings.Builder
	if code := Run([]string{"check-config"}, func(k string) string { return env[k] }, &stdout, &stderr); code != 0 {
		t.Fatalf("got exit %d: %s", code, stderr.String())
	}
	want := "mail      smtp.example.com:587 (starttls, AUTH PLAIN as tally), from tally@example.com, links on https://stats.example.com"
	if !strings.Contains(stdout.String(), want) || strings.Contains(stdout.String()+stderr.String(), "s3cret-value") {
		t.Errorf("got %q, want the line %q and no password", stdout.String(), want)
	}
}
