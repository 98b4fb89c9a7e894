package storage

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"errors"

	"github.com/tally-analytics/tally/fault"
)

// WebhookSecret is a webhook secret's metadata (never the secret itself).
type WebhookSecret struct {
	ID        int64
	SiteID    string
	Adapter   string
	CreatedAt string
	RevokedAt *string
}

// ActiveWebhookSecrets returns the secrets of (site, adapter) that are not
// revoked: revoked_at is null or still in the future (an operator may set
// it ahead to end a rotation's overlap window). It reads the table on every
// call, so secrets inserted or revoked with SQL take effect at once.
func (db *DB) ActiveWebhookSecrets(ctx context.Context, site, adapter string) ([]string, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT secret FROM webhook_secrets
		WHERE site_id = ? AND adapter = ? AND (revoked_at IS NULL OR revoked_at > ?)`, site, adapter, FormatTime(db.now()))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var secrets []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		if s != "" {
			secrets = append(secrets, s)
		}
	}
	return secrets, rows.Err()
}

// CreateWebhookSecret makes a random secret for (site, adapter), audited as
// webhook_secret.create (without the secret). The secret is returned once;
// it is stored as is, since verifying an HMAC needs it. A site deleted since
// the caller looked it up gets ErrSiteGone.
func (db *DB) CreateWebhookSecret(ctx context.Context, actor Actor, site *Site, adapter string) (*WebhookSecret, string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, "", err
	}
	secret := "whsec_" + base64.RawURLEncoding.EncodeToString(b)
	ws := &WebhookSecret{SiteID: site.ID, Adapter: adapter, CreatedAt: FormatTime(db.now())}
	err := db.writer.do(ctx, func(tx *writeTx) error {
		if err := db.checkSite(site); err != nil {
			return err
		}
		if err := tx.QueryRow(`INSERT INTO webhook_secrets(site_id, adapter, secret, created_at) VALUES (?, ?, ?, ?) RETURNING rowid`,
			site.ID, adapter, secret, ws.CreatedAt).Scan(&ws.ID); err != nil {
			return err
		}
		return db.audit(tx, site.WorkspaceID, actor, "webhook_secret.create", site.ID, map[string]any{"secret_id": ws.ID, "adapter": adapter})
	})
	if err != nil {
		return nil, "", err
	}
	return ws, secret, nil
}

// WebhookSecrets lists the secrets of site, active and revoked, oldest first.
func (db *DB) WebhookSecrets(ctx context.Context, site string) ([]WebhookSecret, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT rowid, site_id, adapter, created_at, revoked_at FROM webhook_secrets
		WHERE site_id = ? ORDER BY rowid`, site)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	list := []WebhookSecret{}
	for rows.Next() {
		var w WebhookSecret
		if err := rows.Scan(&w.ID, &w.SiteID, &w.Adapter, &w.CreatedAt, &w.RevokedAt); err != nil {
			return nil, err
		}
		list = append(list, w)
	}
	return list, rows.Err()
}

// RevokeWebhookSecret sets revoked_at on an active secret of site, audited
// as webhook_secret.revoke; an unknown or revoked one is not_found, and a
// site deleted since the caller looked it up gets ErrSiteGone (a later site
// with the id may hold a secret with the same id).
func (db *DB) RevokeWebhookSecret(ctx context.Context, actor Actor, site *Site, id int64) error {
	now := FormatTime(db.now())
	return db.writer.do(ctx, func(tx *writeTx) error {
		if err := db.checkSite(site); err != nil {
			return err
		}
		var adapter string
		err := tx.QueryRow(`SELECT adapter FROM webhook_secrets WHERE rowid = ? AND site_id = ? AND (revoked_at IS NULL OR revoked_at > ?)`,
			id, site.ID, now).Scan(&adapter)
		if errors.Is(err, sql.ErrNoRows) {
			return fault.Errorf(fault.NotFound, "no active webhook secret with that id on this site")
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(`UPDATE webhook_secrets SET revoked_at = ? WHERE rowid = ?`, now, id); err != nil {
			return err
		}
		return db.audit(tx, site.WorkspaceID, actor, "webhook_secret.revoke", site.ID, map[string]any{"secret_id": id, "adapter": adapter})
	})
}
