package storage

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/tally-analytics/tally/fault"
)

// errBadLink answers a link's token that is unknown, used or expired: the
// same answer for each, so a token cannot be probed.
var errBadLink = fault.Errorf(fault.InvalidToken, "this link is unknown, used or expired: ask for a new one")

// CreatePasswordToken makes a single-use link token that sets u's password
// until ttl from now (a reset, or the first password of a user created
// without one), audited as password.reset_link. Only its hash is kept.
func (db *DB) CreatePasswordToken(ctx context.Context, actor Actor, u *User, ttl time.Duration) (string, error) {
	token := newSecretToken()
	now := db.now()
	err := db.writer.do(ctx, func(tx *writeTx) error {
		if _, err := tx.Exec(`INSERT INTO password_tokens(id, user_id, token_hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
			uuid.NewString(), u.ID, tokenHash(token), FormatTime(now), FormatTime(now.Add(ttl))); err != nil {
			return err
		}
		return db.auditUser(tx, u.ID, actor, "password.reset_link", map[string]any{"expires_at": FormatTime(now.Add(ttl))})
	})
	if err != nil {
		return "", err
	}
	return token, nil
}

// ResetPassword sets the password of the user a password link names and
// uses the link up; every session of the user ends. Audited as
// password.reset. A token unknown, used or expired is 400 invalid_token.
func (db *DB) ResetPassword(ctx context.Context, token, password string) (*User, error) {
	if err := checkPasswordRules(password); err != nil {
		return nil, err
	}
	hash := hashPassword(password)
	var userID string
	err := db.writer.do(ctx, func(tx *writeTx) error {
		var id, expires string
		var used *string
		err := tx.QueryRow(`SELECT id, user_id, expires_at, used_at FROM password_tokens WHERE token_hash = ?`, tokenHash(token)).
			Scan(&id, &userID, &expires, &used)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && (used != nil || !db.before(expires))) {
			return errBadLink
		}
		if err != nil {
			return err
		}
		now := FormatTime(db.now())
		if _, err := tx.Exec(`UPDATE password_tokens SET used_at = ? WHERE id = ? AND used_at IS NULL`, now, id); err != nil {
			return err
		}
		if _, err := tx.Exec(`UPDATE users SET password_hash = ?, password_changed_at = ? WHERE id = ?`, hash, now, userID); err != nil {
			return err
		}
		ended, err := db.revokeSessions(tx, userID, "")
		if err != nil {
			return err
		}
		return db.auditUser(tx, userID, UserActor(userID), "password.reset", map[string]any{"sessions_ended": ended})
	})
	if err != nil {
		return nil, err
	}
	u, _, err := db.UserByID(ctx, userID)
	return u, err
}

// ChangePassword replaces u's password (the caller checked the old one)
// and ends its other sessions than keep, audited as password.change.
func (db *DB) ChangePassword(ctx context.Context, u *User, password, keep string) error {
	if err := checkPasswordRules(password); err != nil {
		return err
	}
	hash := hashPassword(password)
	return db.writer.do(ctx, func(tx *writeTx) error {
		if _, err := tx.Exec(`UPDATE users SET password_hash = ?, password_changed_at = ? WHERE id = ?`, hash, FormatTime(db.now()), u.ID); err != nil {
			return err
		}
		ended, err := db.revokeSessions(tx, u.ID, keep)
		if err != nil {
			return err
		}
		return db.auditUser(tx, u.ID, UserActor(u.ID), "password.change", map[string]any{"sessions_ended": ended})
	})
}

// before reports whether now is before the stored time ts.
func (db *DB) before(ts string) bool {
	t, err := time.Parse(timeLayout, ts)
	return err == nil && db.now().Before(t)
}

// Invitation is an invitation to a workspace with a role, accepted once
// through its link before it expires (docs/accounts.md#invitations).
type Invitation struct {
	ID          string
	WorkspaceID string
	Email       string
	Role        string
	CreatedAt   string
	ExpiresAt   string
	AcceptedAt  *string
}

// CreateInvitation invites email into ws with role until ttl from now,
// audited as invitation.create. It returns the invitation and the link's
// token, which is not kept anywhere (only its hash).
func (db *DB) CreateInvitation(ctx context.Context, actor Actor, ws *Workspace, email, role string, ttl time.Duration) (*Invitation, string, error) {
	clean, _, err := CleanEmail(email)
	if err != nil {
		return nil, "", err
	}
	if err := checkRole(role); err != nil {
		return nil, "", err
	}
	token := newSecretToken()
	now := db.now()
	inv := &Invitation{ID: uuid.NewString(), WorkspaceID: ws.ID, Email: clean, Role: role,
		CreatedAt: FormatTime(now), ExpiresAt: FormatTime(now.Add(ttl))}
	err = db.writer.do(ctx, func(tx *writeTx) error {
		if _, err := tx.Exec(`INSERT INTO invitations(id, workspace_id, email, role, token_hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			inv.ID, ws.ID, inv.Email, role, tokenHash(token), inv.CreatedAt, inv.ExpiresAt); err != nil {
			return err
		}
		return db.audit(tx, ws.ID, actor, "invitation.create", inv.ID, map[string]any{"role": role, "expires_at": inv.ExpiresAt})
	})
	if err != nil {
		return nil, "", err
	}
	return inv, token, nil
}

// Invitations lists ws's invitations not yet accepted nor expired, newest
// first.
func (db *DB) Invitations(ctx context.Context, workspaceID string) ([]Invitation, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT id, workspace_id, email, role, created_at, expires_at, accepted_at
		FROM invitations WHERE workspace_id = ? AND accepted_at IS NULL AND expires_at > ? ORDER BY created_at DESC, id`,
		workspaceID, FormatTime(db.now()))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	list := []Invitation{}
	for rows.Next() {
		var inv Invitation
		if err := rows.Scan(&inv.ID, &inv.WorkspaceID, &inv.Email, &inv.Role, &inv.CreatedAt, &inv.ExpiresAt, &inv.AcceptedAt); err != nil {
			return nil, err
		}
		list = append(list, inv)
	}
	return list, rows.Err()
}

// RevokeInvitation withdraws an open invitation of ws, audited as
// invitation.revoke: its link then answers as an unknown one. The row goes
// (the audit entry keeps the fact); not_found when the invitation is no
// open one of ws (accepted, expired, another workspace's). mayOwner false
// refuses an invitation as owner with 403, as such a caller could not
// have made it.
func (db *DB) RevokeInvitation(ctx context.Context, actor Actor, ws *Workspace, id string, mayOwner bool) error {
	return db.writer.do(ctx, func(tx *writeTx) error {
		var role, email string
		err := tx.QueryRow(`SELECT role, email FROM invitations WHERE id = ? AND workspace_id = ? AND accepted_at IS NULL AND expires_at > ?`,
			id, ws.ID, FormatTime(db.now())).Scan(&role, &email)
		if errors.Is(err, sql.ErrNoRows) {
			return fault.Errorf(fault.NotFound, "no open invitation with that id in this workspace")
		}
		if err != nil {
			return err
		}
		if role == RoleOwner && !mayOwner {
			return fault.Errorf(fault.Forbidden, "only an owner can revoke an invitation as owner")
		}
		if _, err := tx.Exec(`DELETE FROM invitations WHERE id = ? AND accepted_at IS NULL`, id); err != nil {
			return err
		}
		if err := dropPendingMail(tx, MailKindInvitation, id, FormatTime(db.now())); err != nil {
			return err
		}
		return db.audit(tx, ws.ID, actor, "invitation.revoke", id, map[string]any{"role": role})
	})
}

// AcceptInvitation uses an invitation's link up. Without a signed-in user
// it creates the invited user with password (409 email_taken when one has
// the address: sign in, then accept); with one, it adds the membership to
// that user (a role there already is kept, the better of the two). Audited
// as invitation.accept. A token unknown, used or expired is 400
// invalid_token.
func (db *DB) AcceptInvitation(ctx context.Context, token string, signedIn *User, password string) (*User, *Workspace, error) {
	var hash *string
	if signedIn == nil {
		if err := checkPasswordRules(password); err != nil {
			return nil, nil, err
		}
		h := hashPassword(password)
		hash = &h
	}
	var u *User
	var ws *Workspace
	err := db.writer.do(ctx, func(tx *writeTx) error {
		var inv Invitation
		err := tx.QueryRow(`SELECT id, workspace_id, email, role, expires_at, accepted_at FROM invitations WHERE token_hash = ?`, tokenHash(token)).
			Scan(&inv.ID, &inv.WorkspaceID, &inv.Email, &inv.Role, &inv.ExpiresAt, &inv.AcceptedAt)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && (inv.AcceptedAt != nil || !db.before(inv.ExpiresAt))) {
			return errBadLink
		}
		if err != nil {
			return err
		}
		ws = db.workspaceByID(inv.WorkspaceID)
		if ws == nil {
			return errBadLink
		}
		// Guarded, so that of two instances accepting (or one revoking) the
		// same invitation at once only one gets it: the other's statement
		// waits for the row and then matches none.
		res, err := tx.Exec(`UPDATE invitations SET accepted_at = ? WHERE id = ? AND accepted_at IS NULL`, FormatTime(db.now()), inv.ID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errBadLink
		}
		if signedIn == nil {
			clean, key, _ := CleanEmail(inv.Email)
			u = &User{ID: uuid.NewString(), Email: clean, CreatedAt: FormatTime(db.now()), HasPassword: true, passwordHash: *hash}
			if err := db.insertUser(tx, UserActor(u.ID), u, key, hash, ws, inv.Role); err != nil {
				return err
			}
		} else {
			u = signedIn
			var role string
			err := tx.QueryRow(`SELECT role FROM memberships WHERE user_id = ? AND workspace_id = ?`, u.ID, ws.ID).Scan(&role)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				if err := db.insertMembership(tx, UserActor(u.ID), u.ID, ws, inv.Role); err != nil {
					return err
				}
			case err != nil:
				return err
			case roleRank(inv.Role) > roleRank(role):
				if _, err := tx.Exec(`UPDATE memberships SET role = ? WHERE user_id = ? AND workspace_id = ?`, inv.Role, u.ID, ws.ID); err != nil {
					return err
				}
			}
		}
		if _, err := tx.Exec(`UPDATE invitations SET accepted_by = ? WHERE id = ?`, u.ID, inv.ID); err != nil {
			return err
		}
		return db.audit(tx, ws.ID, UserActor(u.ID), "invitation.accept", inv.ID, map[string]any{"role": inv.Role, "user_id": u.ID})
	})
	if err != nil {
		return nil, nil, err
	}
	return u, ws, nil
}

// roleRank orders roles: viewer < admin < owner.
func roleRank(role string) int {
	switch role {
	case RoleOwner:
		return 3
	case RoleAdmin:
		return 2
	case RoleViewer:
		return 1
	}
	return 0
}

// RoleRank orders roles: viewer < admin < owner (0 for none).
func RoleRank(role string) int { return roleRank(role) }

// workspaceByID is the cached workspace with id, nil when none.
func (db *DB) workspaceByID(id string) *Workspace {
	db.tenants.mu.RLock()
	defer db.tenants.mu.RUnlock()
	for _, w := range db.wsBySlug {
		if w.ID == id {
			return w
		}
	}
	return nil
}

// WorkspaceByID is the workspace with id.
func (db *DB) WorkspaceByID(id string) (*Workspace, bool) {
	w := db.workspaceByID(id)
	return w, w != nil
}
