package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// Account mail (docs/email.md#account-mail): invitations mailed when SMTP
// is set, and password reset by email. Both are enqueued in the outbox
// like reports, without an unsubscribe link (nobody subscribed to them).

// Outbox kinds of account mail.
const (
	mailInvitation    = storage.MailKindInvitation
	mailPasswordReset = "password_reset"
)

// mailInvitations is the invitationSender of a server with SMTP.
type mailInvitations struct{ s *Server }

// SendInvitation enqueues the invitation's mail (its period is the
// invitation's id: one mail per invitation) and has it delivered now.
func (m mailInvitations) SendInvitation(ws *storage.Workspace, inv *storage.Invitation, path string) error {
	s := m.s
	v := linkView{
		Intro:  fmt.Sprintf("You are invited to the workspace %s on Tally, as %s.", ws.Name, inv.Role),
		Action: "Accept the invitation",
		Link:   s.publicBase() + path,
		Outro:  "The link works once, until " + inv.ExpiresAt + ". If you did not expect it, ignore this mail.",
	}
	if err := s.enqueueAccountMail(context.Background(), mailInvitation, inv.Email, inv.ID, "Invitation to "+ws.Name+" on Tally", v); err != nil {
		return err
	}
	s.kickMail()
	return nil
}

// enqueueAccountMail renders and enqueues one account mail.
func (s *Server) enqueueAccountMail(ctx context.Context, kind, to, period, subject string, v linkView) error {
	from, err := s.cfg.Mail.fromAddress()
	if err != nil {
		return fmt.Errorf("SMTP_FROM: %w", err)
	}
	msg := &mailMessage{From: from, To: to, Subject: subject, Date: s.now(), Key: kind + "\x00\x00" + strings.ToLower(to) + "\x00" + period,
		Text: execText(linkText, v), HTML: execHTML(linkHTML, v)}
	raw, err := msg.encode()
	if err != nil {
		return err
	}
	_, err = s.db.EnqueueMail(ctx, storage.OutboxMail{Kind: kind, Recipient: to, Period: period, Message: raw})
	return err
}

// resetConcurrency bounds the reset mails being made at once, off the
// requests' path; past it a request's mail is dropped (and logged), which
// the throttle makes rare.
const resetConcurrency = 4

// forgotAnswer is the one answer of POST /v1/auth/password/forgot.
const forgotAnswer = "if an account has this email, a link to set a new password is on its way"

// forgotPassword takes {email} and answers 202, the same body at once,
// whatever the email: the user is looked up, the link made and the mail
// enqueued after the answer, off its path, so that neither the answer nor
// its time tells whether an account has the address. Throttled per
// account (the email as typed) and per client as sign-in is, in its own
// counts. 503 mail_not_configured without SMTP.
//
// POST /v1/auth/password/forgot
func (s *Server) forgotPassword(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if !sameOrigin(r, false) {
		return errCrossOrigin
	}
	if !s.cfg.Mail.on() {
		return fault.Errorf(fault.MailNotConfigured, "password reset by email needs the server's SMTP settings: ask the operator for a link (tally user reset-password)")
	}
	body, err := decodeObject(w, r, authBodyLimit)
	if err != nil {
		return err
	}
	email, err := body.str("email", fault.InvalidEmail)
	if err != nil {
		return err
	}
	account := strings.ToLower(strings.TrimSpace(email))
	client := s.clientOf(r)
	if wait := s.resets.wait(account, client); wait > 0 {
		return throttled(wait)
	}
	s.resets.fail(account, client) // every request counts
	select {
	case s.resetSlots <- struct{}{}:
		go func() {
			defer func() { <-s.resetSlots }()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := s.mailPasswordReset(ctx, email); err != nil {
				s.log.Error("password reset mail", "err", err.Error())
			}
		}()
	default:
		s.log.Warn("password reset mail dropped: too many being made at once")
	}
	writeJSON(w, http.StatusAccepted, statusBody{Status: forgotAnswer})
	return nil
}

// mailPasswordReset makes a reset link of email's user, if there is one,
// and enqueues its mail.
func (s *Server) mailPasswordReset(ctx context.Context, email string) error {
	u, found, err := s.db.UserByEmail(ctx, email)
	if err != nil || !found {
		return err
	}
	token, err := s.db.CreatePasswordToken(ctx, storage.Actor{Kind: storage.ActorSystem}, u, resetLinkTTL)
	if err != nil {
		return err
	}
	v := linkView{
		Intro:  "Someone, probably you, asked to set a new password for your Tally account.",
		Action: "Set a new password",
		Link:   s.publicBase() + passwordPath + token,
		Outro:  "The link works once, for an hour; it ends every session of the account. If you did not ask, ignore this mail: your password stays as it is.",
	}
	if err := s.enqueueAccountMail(ctx, mailPasswordReset, u.Email, uuid.NewString(), "Set a new password for Tally", v); err != nil {
		return err
	}
	s.kickMail()
	return nil
}
