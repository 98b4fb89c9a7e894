package storage

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/tally-analytics/tally/fault"
)

// Who gets a site's mail (docs/email.md): each recipient of one kind of
// mail of one site is a subscription, the scope of one unsubscribe link.
// Weekly and monthly reports are subscribed to by address; traffic
// alerts' recipients come with the site's thresholds (traffic_alerts).

// Kinds of subscription.
const (
	MailWeekly  = "weekly"
	MailMonthly = "monthly"
	MailAlerts  = "alerts"
)

// MaxMailRecipients bounds a site's recipients of one kind: every one of
// them is a mail per period.
const MaxMailRecipients = 50

// MailSubscription is one recipient of one kind of a site's mail.
type MailSubscription struct {
	ID        string
	SiteID    string
	Kind      string
	Email     string
	CreatedAt string
}

// TrafficAlert is a site's alert thresholds: nil turns that rule off.
type TrafficAlert struct {
	SiteID        string
	SpikeVisitors *int
	DropPercent   *int
	UpdatedAt     string
}

// MailSubscriptions lists site's subscriptions of the kinds given (every
// kind when none), oldest first.
func (db *DB) MailSubscriptions(ctx context.Context, site string, kinds ...string) ([]MailSubscription, error) {
	q := `SELECT id, site_id, kind, email, created_at FROM mail_subscriptions WHERE site_id = ?`
	args := []any{site}
	if len(kinds) > 0 {
		q += ` AND kind IN (?` + strings.Repeat(`, ?`, len(kinds)-1) + `)`
		for _, k := range kinds {
			args = append(args, k)
		}
	}
	rows, err := db.read.QueryContext(ctx, q+` ORDER BY created_at, email_key, kind`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	list := []MailSubscription{}
	for rows.Next() {
		var m MailSubscription
		if err := rows.Scan(&m.ID, &m.SiteID, &m.Kind, &m.Email, &m.CreatedAt); err != nil {
			return nil, err
		}
		list = append(list, m)
	}
	return list, rows.Err()
}

// MailSites lists the sites that have a subscription of kind.
func (db *DB) MailSites(ctx context.Context, kind string) ([]string, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT DISTINCT site_id FROM mail_subscriptions WHERE kind = ? ORDER BY site_id`, kind)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// SetEmailReports makes email's report subscriptions of site what weekly
// and monthly say: each kind added or removed, audited as
// email_report.subscribe or email_report.unsubscribe (without the
// address, which the audit log never holds: the subscription's id names
// it).
func (db *DB) SetEmailReports(ctx context.Context, actor Actor, site *Site, email string, weekly, monthly bool) error {
	clean, key, err := CleanEmail(email)
	if err != nil {
		return err
	}
	want := map[string]bool{MailWeekly: weekly, MailMonthly: monthly}
	return db.writer.do(ctx, func(tx *writeTx) error {
		if err := db.coord().holdSite(tx, site); err != nil {
			return err
		}
		for _, kind := range []string{MailWeekly, MailMonthly} {
			var id string
			err := tx.QueryRow(`SELECT id FROM mail_subscriptions WHERE site_id = ? AND kind = ? AND email_key = ?`, site.ID, kind, key).Scan(&id)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			has := err == nil
			switch {
			case want[kind] && !has:
				if err := checkRecipientRoom(tx, site.ID, kind); err != nil {
					return err
				}
				id = uuid.NewString()
				if _, err := tx.Exec(`INSERT INTO mail_subscriptions(id, site_id, kind, email, email_key, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
					id, site.ID, kind, clean, key, FormatTime(db.now())); err != nil {
					return err
				}
				if err := db.audit(tx, site.WorkspaceID, actor, "email_report.subscribe", site.ID, map[string]any{"subscription_id": id, "kind": kind}); err != nil {
					return err
				}
			case !want[kind] && has:
				if err := db.deleteSubscription(tx, site, actor, id, kind, "email_report.unsubscribe"); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// checkRecipientRoom refuses a recipient past MaxMailRecipients.
func checkRecipientRoom(tx *writeTx, site, kind string) error {
	var n int
	if err := tx.QueryRow(`SELECT COUNT(*) FROM mail_subscriptions WHERE site_id = ? AND kind = ?`, site, kind).Scan(&n); err != nil {
		return err
	}
	if n >= MaxMailRecipients {
		return fault.Errorf(fault.InvalidEmail, "a site has at most %d recipients of its %s mail", MaxMailRecipients, kind)
	}
	return nil
}

func (db *DB) deleteSubscription(tx *writeTx, site *Site, actor Actor, id, kind, action string) error {
	if _, err := tx.Exec(`DELETE FROM mail_subscriptions WHERE id = ?`, id); err != nil {
		return err
	}
	return db.audit(tx, site.WorkspaceID, actor, action, site.ID, map[string]any{"subscription_id": id, "kind": kind})
}

// TrafficAlertOf is site's alert thresholds, found false when none are set.
func (db *DB) TrafficAlertOf(ctx context.Context, site string) (TrafficAlert, bool, error) {
	a := TrafficAlert{SiteID: site}
	var spike, drop sql.NullInt64
	err := db.read.QueryRowContext(ctx, `SELECT spike_visitors, drop_percent, updated_at FROM traffic_alerts WHERE site_id = ?`, site).
		Scan(&spike, &drop, &a.UpdatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return a, false, nil
	}
	if err != nil {
		return a, false, err
	}
	if spike.Valid {
		n := int(spike.Int64)
		a.SpikeVisitors = &n
	}
	if drop.Valid {
		n := int(drop.Int64)
		a.DropPercent = &n
	}
	return a, true, nil
}

// Bounds of the alert thresholds.
const (
	MaxSpikeVisitors = 10_000_000
	MinDropPercent   = 1
	MaxDropPercent   = 100
)

// SetTrafficAlert replaces site's thresholds and alert recipients
// (recipients removed lose their subscription; kept ones keep theirs, and
// their unsubscribe links), audited as traffic_alert.update (the
// thresholds, and the number of recipients: no addresses).
func (db *DB) SetTrafficAlert(ctx context.Context, actor Actor, site *Site, a TrafficAlert, recipients []string) error {
	if a.SpikeVisitors != nil && (*a.SpikeVisitors < 1 || *a.SpikeVisitors > MaxSpikeVisitors) {
		return alertFieldError(fault.InvalidAlert, "spike_visitors", fmt.Sprintf("spike_visitors must be null or a whole number from 1 to %d", MaxSpikeVisitors))
	}
	if a.DropPercent != nil && (*a.DropPercent < MinDropPercent || *a.DropPercent > MaxDropPercent) {
		return alertFieldError(fault.InvalidAlert, "drop_percent", fmt.Sprintf("drop_percent must be null or a whole number from %d to %d", MinDropPercent, MaxDropPercent))
	}
	if len(recipients) > MaxMailRecipients {
		return alertFieldError(fault.InvalidEmail, "recipients", fmt.Sprintf("recipients: at most %d addresses", MaxMailRecipients))
	}
	type addr struct{ clean, key string }
	var want []addr
	seen := map[string]bool{}
	for i, r := range recipients {
		clean, key, err := CleanEmail(r)
		if err != nil {
			return alertFieldError(fault.InvalidEmail, fmt.Sprintf("recipients/%d", i), fmt.Sprintf("recipients[%d] is not an email address", i))
		}
		if !seen[key] {
			seen[key] = true
			want = append(want, addr{clean, key})
		}
	}
	return db.writer.do(ctx, func(tx *writeTx) error {
		if err := db.coord().holdSite(tx, site); err != nil {
			return err
		}
		now := FormatTime(db.now())
		if _, err := tx.Exec(`INSERT INTO traffic_alerts(site_id, spike_visitors, drop_percent, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (site_id) DO UPDATE SET spike_visitors = excluded.spike_visitors, drop_percent = excluded.drop_percent, updated_at = excluded.updated_at`,
			site.ID, a.SpikeVisitors, a.DropPercent, now); err != nil {
			return err
		}
		rows, err := tx.Query(`SELECT id, email_key FROM mail_subscriptions WHERE site_id = ? AND kind = ?`, site.ID, MailAlerts)
		if err != nil {
			return err
		}
		held := map[string]string{}
		for rows.Next() {
			var id, key string
			if err := rows.Scan(&id, &key); err != nil {
				rows.Close()
				return err
			}
			held[key] = id
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for key, id := range held {
			if !seen[key] {
				if _, err := tx.Exec(`DELETE FROM mail_subscriptions WHERE id = ?`, id); err != nil {
					return err
				}
			}
		}
		for _, w := range want {
			if _, ok := held[w.key]; ok {
				continue
			}
			if _, err := tx.Exec(`INSERT INTO mail_subscriptions(id, site_id, kind, email, email_key, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
				uuid.NewString(), site.ID, MailAlerts, w.clean, w.key, now); err != nil {
				return err
			}
		}
		meta := map[string]any{"spike_visitors": a.SpikeVisitors, "drop_percent": a.DropPercent, "recipients": len(want)}
		return db.audit(tx, site.WorkspaceID, actor, "traffic_alert.update", site.ID, meta)
	})
}

// DeleteTrafficAlert removes site's thresholds and alert recipients,
// audited as traffic_alert.delete; found false when it had none.
func (db *DB) DeleteTrafficAlert(ctx context.Context, actor Actor, site *Site) (found bool, err error) {
	err = db.writer.do(ctx, func(tx *writeTx) error {
		res, err := tx.Exec(`DELETE FROM traffic_alerts WHERE site_id = ?`, site.ID)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		if found = n > 0; !found {
			return nil
		}
		if _, err := tx.Exec(`DELETE FROM mail_subscriptions WHERE site_id = ? AND kind = ?`, site.ID, MailAlerts); err != nil {
			return err
		}
		return db.audit(tx, site.WorkspaceID, actor, "traffic_alert.delete", site.ID, nil)
	})
	return found, err
}

// alertFieldError is an error about one field of a traffic alert's body,
// named in its details (the settings page shows it beside that field).
func alertFieldError(code, path, message string) error {
	return fault.WithDetails(code, message, []fault.Detail{{Path: "/" + path, Message: message}})
}

// SubscriptionByID is the subscription with id, found false when none.
func (db *DB) SubscriptionByID(ctx context.Context, id string) (MailSubscription, bool, error) {
	var m MailSubscription
	err := db.read.QueryRowContext(ctx, `SELECT id, site_id, kind, email, created_at FROM mail_subscriptions WHERE id = ?`, id).
		Scan(&m.ID, &m.SiteID, &m.Kind, &m.Email, &m.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return m, false, nil
	}
	return m, err == nil, err
}

// Unsubscribe ends the subscription with id (an unsubscribe link's),
// audited as email_report.unsubscribe or traffic_alert.unsubscribe with
// metadata.via "link"; nothing happens when it is gone already.
func (db *DB) Unsubscribe(ctx context.Context, id string) error {
	return db.writer.do(ctx, func(tx *writeTx) error {
		var siteID, kind string
		err := tx.QueryRow(`SELECT site_id, kind FROM mail_subscriptions WHERE id = ?`, id).Scan(&siteID, &kind)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(`DELETE FROM mail_subscriptions WHERE id = ?`, id); err != nil {
			return err
		}
		site, ok := db.Site(siteID)
		if !ok {
			return nil
		}
		action := "email_report.unsubscribe"
		if kind == MailAlerts {
			action = "traffic_alert.unsubscribe"
		}
		return db.audit(tx, site.WorkspaceID, Actor{Kind: ActorSystem}, action, site.ID, map[string]any{"subscription_id": id, "kind": kind, "via": "link"})
	})
}

// unsubscribeTag is how many bytes of the HMAC an unsubscribe token keeps:
// 128 bits, beyond guessing.
const unsubscribeTag = 16

// UnsubscribeToken is the unsubscribe link's token of the subscription
// id: the id and an HMAC-SHA-256 of it under the database's mail key, so
// any instance checks it and nothing per link is stored.
func (db *DB) UnsubscribeToken(ctx context.Context, id string) (string, error) {
	key, err := db.mailKey(ctx)
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("unsubscribe\x00" + id))
	return base64.RawURLEncoding.EncodeToString([]byte(id)) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:unsubscribeTag]), nil
}

// CheckUnsubscribeToken returns the subscription id a token names when its
// signature holds (compared in constant time), ok false otherwise.
func (db *DB) CheckUnsubscribeToken(ctx context.Context, token string) (id string, ok bool, err error) {
	rawID, rawTag, found := strings.Cut(token, ".")
	if !found || len(token) > 200 {
		return "", false, nil
	}
	idb, err1 := base64.RawURLEncoding.DecodeString(rawID)
	tag, err2 := base64.RawURLEncoding.DecodeString(rawTag)
	if err1 != nil || err2 != nil {
		return "", false, nil
	}
	want, err := db.UnsubscribeToken(ctx, string(idb))
	if err != nil {
		return "", false, err
	}
	_, wantTag, _ := strings.Cut(want, ".")
	wt, _ := base64.RawURLEncoding.DecodeString(wantTag)
	return string(idb), hmac.Equal(tag, wt), nil
}

// mailKey is the unsubscribe links' key: made once, by the first instance
// that needs it, and then read (one row by its key: no cache, so that DB
// keeps its fields few).
func (db *DB) mailKey(ctx context.Context) ([]byte, error) {
	var enc string
	err := db.read.QueryRowContext(ctx, `SELECT key FROM mail_keys WHERE id = 1`).Scan(&enc)
	if errors.Is(err, sql.ErrNoRows) {
		err = db.writer.do(ctx, func(tx *writeTx) error {
			if _, err := tx.Exec(`INSERT INTO mail_keys(id, key) VALUES (1, ?) ON CONFLICT DO NOTHING`, newSecretToken()); err != nil {
				return err
			}
			return tx.QueryRow(`SELECT key FROM mail_keys WHERE id = 1`).Scan(&enc)
		})
	}
	if err != nil {
		return nil, fmt.Errorf("read the mail key: %w", err)
	}
	k, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return nil, fmt.Errorf("the mail key: %w", err)
	}
	return k, nil
}
