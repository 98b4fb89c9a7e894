package server

import (
	"crypto/tls"
	"net/mail"
	"strings"
)

// Modes of SMTP_TLS (docs/email.md#smtp): STARTTLS on the submission port,
// TLS from the first byte, or none (a local relay only).
const (
	SMTPStartTLS = "starttls"
	SMTPImplicit = "implicit"
	SMTPNone     = "none"
)

// ValidSMTPTLS reports whether mode is one of the SMTP_TLS modes.
func ValidSMTPTLS(mode string) bool {
	return mode == SMTPStartTLS || mode == SMTPImplicit || mode == SMTPNone
}

// DefaultSMTPPort is the port of a mode when SMTP_PORT is unset: 587
// (submission) for STARTTLS, 465 (submissions) for implicit TLS, 25 for
// none.
func DefaultSMTPPort(mode string) string {
	switch mode {
	case SMTPImplicit:
		return "465"
	case SMTPNone:
		return "25"
	}
	return "587"
}

// MailConfig is the SMTP server mail goes through; a zero Host turns mail
// off (reports, alerts, invitations and password resets by email).
type MailConfig struct {
	Host, Port string
	// TLS is SMTPStartTLS (default), SMTPImplicit or SMTPNone. With
	// STARTTLS a server that does not offer it is refused, so that the
	// password is never sent in the clear; only SMTPNone, set on purpose,
	// sends it so.
	TLS string
	// User and Password authenticate with AUTH PLAIN when User is set.
	// The password is never logged.
	User, Password string
	// From is the From address, as RFC 5322 has it ("Tally
	// <tally@example.com>" or a bare address).
	From string
	// TLSConfig is the client's TLS settings; nil verifies the server's
	// certificate against the system's roots for Host (tests give their
	// own CA).
	TLSConfig *tls.Config
}

// on reports whether mail is configured.
func (m MailConfig) on() bool { return m.Host != "" }

// fromAddress is From parsed: the envelope's sender and the header's.
func (m MailConfig) fromAddress() (*mail.Address, error) { return mail.ParseAddress(m.From) }

// tlsConfig is the TLS client's settings for Host.
func (m MailConfig) tlsConfig() *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if m.TLSConfig != nil {
		c = m.TLSConfig.Clone()
	}
	if c.ServerName == "" {
		c.ServerName = m.Host
	}
	return c
}

// publicBase is the base of links in mail, without its final slash.
func (s *Server) publicBase() string { return strings.TrimRight(s.cfg.PublicURL, "/") }
