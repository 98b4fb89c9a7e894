package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/textproto"
	"net/url"
	"strings"
	"time"
)

// mailMessage is a mail before it is encoded: both bodies, and what
// makes its headers. Every mail is multipart/alternative, a text part
// and an HTML part (docs/email.md#messages).
type mailMessage struct {
	From *mail.Address
	To   string
	// Subject is plain text; encoded as RFC 2047 when it is not ASCII.
	Subject string
	Date    time.Time
	// Key names the mail (kind, site, recipient, period): its Message-ID
	// is derived from it, so the same mail made twice has the same id.
	Key string
	// Unsubscribe is the mail's unsubscribe link, "" for account mail
	// (an invitation or a password link, which nobody subscribed to).
	Unsubscribe string
	Text, HTML  string
}

// messageID is the Message-ID of a mail key, at the domain of the From
// address: deterministic, so that a mail sent twice (the crash between
// the SMTP server's 250 and the mark) is one message to the clients
// that thread or dedupe by it.
func messageID(key string, from *mail.Address) string {
	sum := sha256.Sum256([]byte(key))
	domain := "tally.invalid"
	if _, d, ok := strings.Cut(from.Address, "@"); ok && d != "" {
		domain = d
	}
	return "<" + hex.EncodeToString(sum[:16]) + "@" + domain + ">"
}

// encode writes m as an RFC 5322 message with CRLF line ends, its parts
// quoted-printable in UTF-8.
func (m *mailMessage) encode() ([]byte, error) {
	to, err := mail.ParseAddress(m.To)
	if err != nil {
		return nil, fmt.Errorf("recipient: %w", err)
	}
	var buf bytes.Buffer
	sum := sha256.Sum256([]byte("boundary\x00" + m.Key))
	mw := multipart.NewWriter(&buf)
	if err := mw.SetBoundary("tally-" + hex.EncodeToString(sum[:12])); err != nil {
		return nil, err
	}
	h := []string{
		"From: " + m.From.String(),
		"To: " + to.String(),
		"Subject:" + encodeSubject(m.Subject),
		"Date: " + m.Date.Format(time.RFC1123Z),
		"Message-ID: " + messageID(m.Key, m.From),
		"MIME-Version: 1.0",
		"Auto-Submitted: auto-generated",
	}
	if m.Unsubscribe != "" {
		// RFC 8058: a client may unsubscribe in one POST of
		// List-Unsubscribe=One-Click to the https URL, no page shown.
		h = append(h, "List-Unsubscribe: <"+m.Unsubscribe+">", "List-Unsubscribe-Post: List-Unsubscribe=One-Click")
	}
	h = append(h, `Content-Type: multipart/alternative; boundary="`+mw.Boundary()+`"`)
	var out bytes.Buffer
	for _, line := range h {
		out.WriteString(line + "\r\n")
	}
	out.WriteString("\r\n")
	for _, part := range []struct{ typ, body string }{{"text/plain", m.Text}, {"text/html", m.HTML}} {
		pw, err := mw.CreatePart(textproto.MIMEHeader{
			"Content-Type":              {part.typ + "; charset=utf-8"},
			"Content-Transfer-Encoding": {"quoted-printable"},
		})
		if err != nil {
			return nil, err
		}
		qp := quotedprintable.NewWriter(pw)
		if _, err := qp.Write([]byte(strings.ReplaceAll(part.body, "\r\n", "\n"))); err != nil {
			return nil, err
		}
		if err := qp.Close(); err != nil {
			return nil, err
		}
	}
	if err := mw.Close(); err != nil {
		return nil, err
	}
	out.Write(buf.Bytes())
	return out.Bytes(), nil
}

// encodeSubject is a subject as its header's value: as is when ASCII,
// else RFC 2047 encoded words (at most 75 characters each), each on a
// line of its own so that no header line passes 78.
func encodeSubject(subject string) string {
	enc := mime.QEncoding.Encode("utf-8", subject)
	if enc == subject {
		return " " + subject
	}
	return "\r\n " + strings.ReplaceAll(enc, "?= =?", "?=\r\n =?")
}

// unsubscribeURL is the unsubscribe link of a token.
func (s *Server) unsubscribeURL(token string) string {
	return s.publicBase() + "/unsubscribe/" + url.PathEscape(token)
}
