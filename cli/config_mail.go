package cli

import (
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"strconv"
	"strings"

	"github.com/tally-analytics/tally/server"
)

// loadMail parses the mail settings (docs/email.md#smtp) and PUBLIC_URL.
// Messages name the setting, never the password's value.
func (c *config) loadMail(v settingValues) error {
	m := server.MailConfig{Host: strings.TrimSpace(v.vals["SMTP_HOST"]), Port: strings.TrimSpace(v.vals["SMTP_PORT"]),
		TLS: v.vals["SMTP_TLS"], User: v.vals["SMTP_USER"], Password: v.vals["SMTP_PASSWORD"], From: strings.TrimSpace(v.vals["SMTP_FROM"])}
	if !server.ValidSMTPTLS(m.TLS) {
		return fmt.Errorf("SMTP_TLS must be %s, %s or %s, not %q", server.SMTPStartTLS, server.SMTPImplicit, server.SMTPNone, m.TLS)
	}
	if m.Port == "" {
		m.Port = server.DefaultSMTPPort(m.TLS)
	}
	if n, err := strconv.Atoi(m.Port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("SMTP_PORT must be a port number from 1 to 65535, not %q", m.Port)
	}
	switch {
	case m.Password != "" && m.User == "":
		return errors.New("SMTP_PASSWORD is set without SMTP_USER")
	case m.Host == "" && (m.User != "" || m.From != ""):
		return errors.New("SMTP_USER or SMTP_FROM is set without SMTP_HOST, which sends the mail")
	case m.Host != "" && m.From == "":
		return errors.New("SMTP_FROM is required with SMTP_HOST: the From address of mail, such as Tally <tally@example.com>")
	}
	if m.From != "" {
		if _, err := mail.ParseAddress(m.From); err != nil {
			return fmt.Errorf("SMTP_FROM must be an address such as tally@example.com or Tally <tally@example.com>, not %q", m.From)
		}
	}
	c.Mail = m
	c.PublicURL = strings.TrimRight(v.vals["PUBLIC_URL"], "/")
	if c.PublicURL == "" {
		c.PublicURL = c.defaultPublicURL()
	}
	u, err := url.Parse(c.PublicURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("PUBLIC_URL must be an http:// or https:// URL without query or fragment, such as https://stats.example.com, not %q", v.vals["PUBLIC_URL"])
	}
	return nil
}

// defaultPublicURL is the dashboard's address as far as the settings
// tell: https:// and the first TLS_DOMAINS name, else the query API's
// listen address.
func (c *config) defaultPublicURL() string {
	if len(c.TLS.Domains) > 0 {
		return "https://" + c.TLS.Domains[0]
	}
	return serverURL(c.QueryAddr)
}

// mailSummary is check-config's line about mail: the server, its TLS and
// whether it authenticates, the From address and where links point;
// never the password.
func (c config) mailSummary() string {
	if c.Mail.Host == "" {
		return "off (no SMTP_HOST): no reports, alerts or mailed links"
	}
	auth := "no AUTH"
	if c.Mail.User != "" {
		auth = "AUTH PLAIN as " + c.Mail.User
	}
	return fmt.Sprintf("%s:%s (%s, %s), from %s, links on %s", c.Mail.Host, c.Mail.Port, c.Mail.TLS, auth, c.Mail.From, c.PublicURL)
}
