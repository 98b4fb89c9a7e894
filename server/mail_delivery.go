package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/tally-analytics/tally/storage"
)

// Delivery of the outbox (docs/email.md#delivery): every instance claims
// due mails one at a time with a lease, sends each, and marks it sent
// under that lease; a failure is retried with exponential backoff until
// mailMaxAttempts.
const (
	// mailTick is how often an instance looks for due mail, reports and
	// alerts to make.
	mailTick = time.Minute
	// mailLease is how long a claim holds: longer than a send may take
	// (mailSendTimeout), so that a live sender keeps its mail; a crashed
	// one's mail is claimed again once it passes.
	mailLease = 2*mailSendTimeout + 30*time.Second
	// mailFirstRetry doubles after each failed attempt, up to
	// mailMaxRetry; after mailMaxAttempts attempts the mail is given up.
	mailFirstRetry  = time.Minute
	mailMaxRetry    = 6 * time.Hour
	mailMaxAttempts = 10
)

// mailBackoff is the wait after the attempt-th failed attempt (1-based):
// 1m, 2m, 4m ... up to 6h.
func mailBackoff(attempt int) time.Duration {
	d := mailFirstRetry
	for i := 1; i < attempt && d < mailMaxRetry; i++ {
		d *= 2
	}
	return min(d, mailMaxRetry)
}

// mailLoop makes and delivers mail until ctx ends: at once, at every
// mailTick, and when kicked (a mail just enqueued).
func (s *Server) mailLoop(ctx context.Context) {
	t := time.NewTicker(mailTick)
	defer t.Stop()
	for {
		s.mailRound(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.mailKick:
		}
	}
}

// mailRound is one round: the reports and alerts due enqueued (by one
// instance at a time), then whatever is due delivered.
func (s *Server) mailRound(ctx context.Context) {
	if err := s.scheduleMail(ctx); err != nil && ctx.Err() == nil {
		s.log.Error("mail schedule", "err", err.Error())
	}
	if _, err := s.deliverMail(ctx); err != nil && ctx.Err() == nil {
		s.log.Error("mail delivery", "err", err.Error())
	}
}

// kickMail has the mail loop deliver soon.
func (s *Server) kickMail() {
	select {
	case s.mailKick <- struct{}{}:
	default:
	}
}

// deliverMail sends the due mails of the outbox, one claim at a time,
// until none is due; it returns how many were sent.
func (s *Server) deliverMail(ctx context.Context) (int, error) {
	if !s.cfg.Mail.on() {
		return 0, nil
	}
	from, err := s.cfg.Mail.fromAddress()
	if err != nil {
		return 0, fmt.Errorf("SMTP_FROM: %w", err)
	}
	sent := 0
	for ctx.Err() == nil {
		m, err := s.db.ClaimMail(ctx, mailLease)
		if err != nil || m == nil {
			return sent, err
		}
		// The SMTP server's 250 and the mark below are two steps: a crash
		// between them leaves the row pending, and once its lease passes
		// it is sent again (at least once, in that window only;
		// docs/email.md#delivery). Its Message-ID is the same.
		sendErr := sendMail(ctx, s.cfg.Mail, from.Address, m.Recipient, m.Message)
		if sendErr == nil {
			if err := s.db.MailDone(ctx, m); err != nil && !storage.ErrMailLeaseLost(err) {
				return sent, err
			}
			sent++
			continue
		}
		attempt := m.Attempts + 1
		var retryAt time.Time
		if attempt < mailMaxAttempts {
			retryAt = s.now().Add(mailBackoff(attempt))
		}
		// The log names the mail by its row and kind, and the SMTP
		// answer by its code: the server's text may quote the address.
		s.log.Warn("mail not sent", "mail_id", m.ID, "kind", m.Kind, "attempt", attempt, "err", mailErrorSummary(sendErr),
			"permanent", smtpPermanent(sendErr), "gave_up", retryAt.IsZero())
		if err := s.db.MailRetry(ctx, m, sendErr.Error(), retryAt); err != nil && !storage.ErrMailLeaseLost(err) {
			return sent, err
		}
	}
	return sent, ctx.Err()
}

// mailErrorSummary is what a log says of a failed send: an SMTP answer's
// codes, else the failure's kind, never the answer's text.
func mailErrorSummary(err error) string {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		return fmt.Sprintf("SMTP %d %d.%d.%d", se.Code, se.EnhancedCode[0], se.EnhancedCode[1], se.EnhancedCode[2])
	}
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return "connection failed or dropped"
}
