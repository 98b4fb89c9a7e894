package storage

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/google/uuid"
)

// The mail outbox (docs/email.md#delivery): a mail is a row, enqueued once
// per (kind, site, recipient, period), the table's unique key, so that a
// report or alert made twice (two ticks, two instances) is stored once.
// An instance claims a due row with a lease, sends it, and marks it sent
// under that lease; a failure puts the row back with its next attempt's
// time; a lease that ends (a crash mid-send) lets another claim it. Rows
// and their state are in the database, so they outlive a restart.

// OutboxMail is a mail to enqueue: Message is the whole RFC 5322 message.
type OutboxMail struct {
	Kind, SiteID, Recipient, Period string
	Message                         []byte
}

// ClaimedMail is a mail claimed for sending until its lease ends.
type ClaimedMail struct {
	ID, Kind, SiteID, Recipient string
	Message                     []byte
	// Attempts are the attempts before this one.
	Attempts int
	lease    string
}

// MailKindInvitation is the outbox kind of an invitation's mail, whose
// period is the invitation's id: a revoked invitation's mail not sent
// yet is dropped with it (dropPendingMail).
const MailKindInvitation = "invitation"

// dropPendingMail deletes, in tx, the pending mail of account mail kind
// and period (one not claimed yet: a claimed one may be on its way).
func dropPendingMail(tx *writeTx, kind, period string, now string) error {
	_, err := tx.Exec(`DELETE FROM mail_outbox WHERE kind = ? AND site_id = '' AND period = ? AND status = ?
		AND (lease_until IS NULL OR lease_until <= ?)`, kind, period, MailPending, now)
	return err
}

// Mail states of the outbox.
const (
	MailPending = "pending"
	MailSent    = "sent"
	MailFailed  = "failed"
)

// MailQueued reports whether the mail of (kind, site, recipient, period)
// was enqueued already, whatever its state: the scheduler's cheap check
// before it makes a report.
func (db *DB) MailQueued(ctx context.Context, kind, site, recipient, period string) (bool, error) {
	_, key, err := CleanEmail(recipient)
	if err != nil {
		return false, err
	}
	var n int
	err = db.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM mail_outbox WHERE kind = ? AND site_id = ? AND recipient_key = ? AND period = ?`,
		kind, site, key, period).Scan(&n)
	return n > 0, err
}

// EnqueueMail stores m as pending, due now, unless the mail of its key
// is there already; enqueued says which.
func (db *DB) EnqueueMail(ctx context.Context, m OutboxMail) (enqueued bool, err error) {
	_, key, err := CleanEmail(m.Recipient)
	if err != nil {
		return false, err
	}
	now := FormatTime(db.now())
	err = db.writer.do(ctx, func(tx *writeTx) error {
		res, err := tx.Exec(`INSERT INTO mail_outbox(id, kind, site_id, recipient_key, period, recipient, message, next_attempt_at, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			uuid.NewString(), m.Kind, m.SiteID, key, m.Period, m.Recipient, string(m.Message), now, now)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		enqueued = n == 1
		return err
	})
	return enqueued, err
}

// mailClaimBatch is how many due rows one ClaimMail looks at: a row
// another instance claimed first is skipped for the next.
const mailClaimBatch = 8

// ClaimMail claims the earliest due mail for lease from now, nil when none
// is due. The claim is one conditional UPDATE, so of two instances
// claiming one row one gets it (on PostgreSQL the second UPDATE waits for
// the first's commit, then finds the lease taken).
func (db *DB) ClaimMail(ctx context.Context, lease time.Duration) (*ClaimedMail, error) {
	now := db.now()
	nowText := FormatTime(now)
	rows, err := db.read.QueryContext(ctx, `SELECT id FROM mail_outbox WHERE status = ? AND next_attempt_at <= ?
		AND (lease_until IS NULL OR lease_until <= ?) ORDER BY next_attempt_at, id LIMIT ?`, MailPending, nowText, nowText, mailClaimBatch)
	if err != nil {
		return nil, err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, id := range ids {
		c := &ClaimedMail{ID: id, lease: uuid.NewString()}
		claimed := false
		err := db.writer.do(ctx, func(tx *writeTx) error {
			res, err := tx.Exec(`UPDATE mail_outbox SET lease_owner = ?, lease_until = ? WHERE id = ? AND status = ?
				AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until <= ?)`,
				c.lease, FormatTime(now.Add(lease)), id, MailPending, nowText, nowText)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				return err
			}
			claimed = true
			var msg string
			if err := tx.QueryRow(`SELECT kind, site_id, recipient, message, attempts FROM mail_outbox WHERE id = ?`, id).
				Scan(&c.Kind, &c.SiteID, &c.Recipient, &msg, &c.Attempts); err != nil {
				return err
			}
			c.Message = []byte(msg)
			return nil
		})
		if err != nil {
			return nil, err
		}
		if claimed {
			return c, nil
		}
	}
	return nil, nil
}

// errMailLeaseLost is a mark of a mail whose lease had passed to another
// claim: the other instance's attempt decides.
var errMailLeaseLost = errors.New("the mail's lease ended before its mark: another instance claimed it")

// ErrMailLeaseLost reports err is a mark refused because the lease was lost.
func ErrMailLeaseLost(err error) bool { return errors.Is(err, errMailLeaseLost) }

// MailDone marks a claimed mail sent: its message emptied (it holds the
// recipient's report and link), its attempts counted.
func (db *DB) MailDone(ctx context.Context, m *ClaimedMail) error {
	return db.markMail(ctx, m, `UPDATE mail_outbox SET status = ?, sent_at = ?, message = '', attempts = attempts + 1,
		lease_owner = NULL, lease_until = NULL, last_error = NULL WHERE id = ? AND lease_owner = ?`,
		MailSent, FormatTime(db.now()), m.ID, m.lease)
}

// MailRetry puts a claimed mail back after a failed attempt: due again at
// retryAt, or given up (failed, its message emptied) when retryAt is
// zero. reason is the SMTP server's answer or the connection's error,
// never an address of the message.
func (db *DB) MailRetry(ctx context.Context, m *ClaimedMail, reason string, retryAt time.Time) error {
	if len(reason) > 500 {
		reason = reason[:500]
	}
	if retryAt.IsZero() {
		return db.markMail(ctx, m, `UPDATE mail_outbox SET status = ?, message = '', attempts = attempts + 1, last_error = ?,
			lease_owner = NULL, lease_until = NULL WHERE id = ? AND lease_owner = ?`, MailFailed, reason, m.ID, m.lease)
	}
	return db.markMail(ctx, m, `UPDATE mail_outbox SET attempts = attempts + 1, last_error = ?, next_attempt_at = ?,
		lease_owner = NULL, lease_until = NULL WHERE id = ? AND lease_owner = ?`, reason, FormatTime(retryAt), m.ID, m.lease)
}

func (db *DB) markMail(ctx context.Context, m *ClaimedMail, q string, args ...any) error {
	return db.writer.do(ctx, func(tx *writeTx) error {
		res, err := tx.Exec(q, args...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			if err == nil {
				err = errMailLeaseLost
			}
			return err
		}
		return nil
	})
}

// OutboxRow is an outbox row as MailOutbox lists it (tests and the
// operator's view; no message).
type OutboxRow struct {
	ID, Kind, SiteID, Period, Status string
	Attempts                         int
	NextAttemptAt                    string
	LastError                        sql.NullString
}

// MailOutbox lists the outbox rows of site ("" for account mail), oldest
// first.
func (db *DB) MailOutbox(ctx context.Context, site string) ([]OutboxRow, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT id, kind, site_id, period, status, attempts, next_attempt_at, last_error
		FROM mail_outbox WHERE site_id = ? ORDER BY created_at, id`, site)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var list []OutboxRow
	for rows.Next() {
		var r OutboxRow
		if err := rows.Scan(&r.ID, &r.Kind, &r.SiteID, &r.Period, &r.Status, &r.Attempts, &r.NextAttemptAt, &r.LastError); err != nil {
			return nil, err
		}
		list = append(list, r)
	}
	return list, rows.Err()
}
