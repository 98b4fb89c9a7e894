package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// mailSendTimeout bounds one delivery: connecting, the dialogue and the
// message; past it the attempt fails and is retried.
const mailSendTimeout = time.Minute

// sendMail delivers msg to one recipient over the configured SMTP server
// (docs/email.md#smtp), with github.com/emersion/go-smtp's client: TLS
// from the first byte, STARTTLS (refused when the server does not offer
// it, so that AUTH never goes in the clear), or none; AUTH PLAIN when a
// user is set. The error is the server's answer or the connection's,
// naming no address.
func sendMail(ctx context.Context, mc MailConfig, from, to string, msg []byte) error {
	ctx, cancel := context.WithTimeout(ctx, mailSendTimeout)
	defer cancel()
	addr := net.JoinHostPort(mc.Host, mc.Port)
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("connect to the SMTP server: %w", err)
	}
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	var c *smtp.Client
	switch mc.TLS {
	case SMTPImplicit:
		tc := tls.Client(conn, mc.tlsConfig())
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return fmt.Errorf("TLS with the SMTP server: %w", err)
		}
		c = smtp.NewClient(tc)
	case SMTPNone:
		c = smtp.NewClient(conn)
	default:
		if c, err = smtp.NewClientStartTLS(conn, mc.tlsConfig()); err != nil {
			conn.Close()
			return fmt.Errorf("STARTTLS with the SMTP server (SMTP_TLS=starttls needs it; implicit for port 465): %w", err)
		}
	}
	defer c.Close()
	if mc.User != "" {
		if err := c.Auth(sasl.NewPlainClient("", mc.User, mc.Password)); err != nil {
			return fmt.Errorf("SMTP AUTH PLAIN: %w", err)
		}
	}
	if err := c.SendMail(from, []string{to}, bytes.NewReader(msg)); err != nil {
		return fmt.Errorf("SMTP: %w", err)
	}
	// The message is accepted (250 to the data); a failed QUIT changes
	// nothing of that.
	_ = c.Quit()
	return nil
}

// smtpPermanent reports whether err is the SMTP server's permanent
// refusal (5xx), which a retry will meet again, unlike a 4xx or a
// dropped connection. Both are retried with backoff
// (docs/email.md#delivery); a permanent one is logged as such.
func smtpPermanent(err error) bool {
	var se *smtp.SMTPError
	return errors.As(err, &se) && se.Code >= 500
}
