package storage

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/tally-analytics/tally/fault"
)

// UserSession is a signed-in browser of a user (docs/accounts.md#sessions):
// the cookie holds a random token, only its SHA-256 is stored; ID names the
// session in lists and revocations.
type UserSession struct {
	ID         string
	UserID     string
	CreatedAt  string
	LastSeenAt string
	ExpiresAt  string

	lastSeen time.Time
}

// LastSeen is when the session was last used, to the minute TouchSession
// keeps.
func (s *UserSession) LastSeen() time.Time { return s.lastSeen }

// newSecretToken is 32 random bytes, base64url: a session's cookie value
// or a link's token.
func newSecretToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// tokenHash is a token's stored form. A plain SHA-256 suffices: the token
// has 256 random bits, so there is nothing to guess or precompute.
func tokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// SessionLimits are a session's idle and absolute lifetimes.
type SessionLimits struct {
	Idle, Absolute time.Duration
}

// CreateSession signs u in: a new session with a new random token (the
// cookie's value, returned once), audited as session.signin.
func (db *DB) CreateSession(ctx context.Context, u *User, limits SessionLimits) (*UserSession, string, error) {
	token := newSecretToken()
	now := db.now()
	s := &UserSession{ID: uuid.NewString(), UserID: u.ID, CreatedAt: FormatTime(now), LastSeenAt: FormatTime(now),
		ExpiresAt: FormatTime(now.Add(limits.Absolute)), lastSeen: now}
	err := db.writer.do(ctx, func(tx *writeTx) error {
		if _, err := tx.Exec(`INSERT INTO user_sessions(id, token_hash, user_id, created_at, last_seen_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
			s.ID, tokenHash(token), u.ID, s.CreatedAt, s.LastSeenAt, s.ExpiresAt); err != nil {
			return err
		}
		return db.auditUser(tx, u.ID, UserActor(u.ID), "session.signin", map[string]any{"session_id": s.ID})
	})
	if err != nil {
		return nil, "", err
	}
	return s, token, nil
}

// SessionByToken finds the live session a cookie's token names: not
// revoked, used within limits.Idle, younger than its absolute expiry.
func (db *DB) SessionByToken(ctx context.Context, token string, limits SessionLimits) (*UserSession, bool, error) {
	var s UserSession
	var revoked *string
	err := db.read.QueryRowContext(ctx, `SELECT id, user_id, created_at, last_seen_at, expires_at, revoked_at
		FROM user_sessions WHERE token_hash = ?`, tokenHash(token)).Scan(&s.ID, &s.UserID, &s.CreatedAt, &s.LastSeenAt, &s.ExpiresAt, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if !s.live(db.now(), revoked, limits) {
		return nil, false, nil
	}
	return &s, true, nil
}

// live reports whether s may still be used at now.
func (s *UserSession) live(now time.Time, revoked *string, limits SessionLimits) bool {
	seen, err1 := time.Parse(timeLayout, s.LastSeenAt)
	expires, err2 := time.Parse(timeLayout, s.ExpiresAt)
	if err1 != nil || err2 != nil || revoked != nil {
		return false
	}
	s.lastSeen = seen
	return now.Before(expires) && now.Before(seen.Add(limits.Idle))
}

// sessionTouchEvery is how often a session's last_seen_at is written: its
// idle expiry is exact to this much.
const sessionTouchEvery = time.Minute

// TouchSession records a use of s now, at most once a minute.
func (db *DB) TouchSession(ctx context.Context, s *UserSession) error {
	now := db.now()
	if now.Sub(s.lastSeen) < sessionTouchEvery {
		return nil
	}
	return db.writer.do(ctx, func(tx *writeTx) error {
		_, err := tx.Exec(`UPDATE user_sessions SET last_seen_at = ? WHERE id = ? AND revoked_at IS NULL`, FormatTime(now), s.ID)
		return err
	})
}

// UserSessions lists user id's live sessions, newest first.
func (db *DB) UserSessions(ctx context.Context, userID string, limits SessionLimits) ([]UserSession, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT id, user_id, created_at, last_seen_at, expires_at
		FROM user_sessions WHERE user_id = ? AND revoked_at IS NULL ORDER BY created_at DESC, id`, userID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	now := db.now()
	list := []UserSession{}
	for rows.Next() {
		var s UserSession
		if err := rows.Scan(&s.ID, &s.UserID, &s.CreatedAt, &s.LastSeenAt, &s.ExpiresAt); err != nil {
			return nil, err
		}
		if s.live(now, nil, limits) {
			list = append(list, s)
		}
	}
	return list, rows.Err()
}

// RevokeSession ends user id's session sessionID, audited as
// session.revoke (session.signout when reason says so); not_found for a
// session of someone else's, or one already ended.
func (db *DB) RevokeSession(ctx context.Context, userID, sessionID, action string) error {
	return db.writer.do(ctx, func(tx *writeTx) error {
		res, err := tx.Exec(`UPDATE user_sessions SET revoked_at = ? WHERE id = ? AND user_id = ? AND revoked_at IS NULL`,
			FormatTime(db.now()), sessionID, userID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fault.Errorf(fault.NotFound, "session not found")
		}
		return db.auditUser(tx, userID, UserActor(userID), action, map[string]any{"session_id": sessionID})
	})
}

// revokeSessions ends every session of user id but keep ("" for none)
// inside tx, and returns how many it ended.
func (db *DB) revokeSessions(tx *writeTx, userID, keep string) (int64, error) {
	res, err := tx.Exec(`UPDATE user_sessions SET revoked_at = ? WHERE user_id = ? AND id <> ? AND revoked_at IS NULL`,
		FormatTime(db.now()), userID, keep)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// AuditSigninFailed records a failed sign-in of u (a wrong password or
// two-factor code), audited as session.signin_failed with the reason
// ("password" or "totp"): never the password, code or address.
func (db *DB) AuditSigninFailed(ctx context.Context, u *User, reason string) error {
	return db.writer.do(ctx, func(tx *writeTx) error {
		return db.auditUser(tx, u.ID, UserActor(u.ID), "session.signin_failed", map[string]any{"reason": reason})
	})
}
