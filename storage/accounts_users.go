package storage

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"unicode"

	"github.com/google/uuid"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage/internal/engine"
)

// User is a person who signs in to the dashboard (docs/accounts.md). Its
// password hash and TOTP secret stay inside storage.
type User struct {
	ID        string
	Email     string
	CreatedAt string
	// TOTPEnabled: sign-in asks for a code of the confirmed secret.
	TOTPEnabled bool
	// HasPassword is false until a set-password link has been used.
	HasPassword bool

	passwordHash string
	totpSecret   string // base32, pending while !TOTPEnabled
	totpLastStep int64
}

// Roles of a user in a workspace, mapped onto API key scopes by
// RoleScopes (docs/accounts.md#roles).
const (
	RoleOwner  = "owner"
	RoleAdmin  = "admin"
	RoleViewer = "viewer"
)

// ValidRole reports whether role is owner, admin or viewer.
func ValidRole(role string) bool {
	return role == RoleOwner || role == RoleAdmin || role == RoleViewer
}

func checkRole(role string) error {
	if !ValidRole(role) {
		return fault.Errorf(fault.InvalidRole, "role must be %q, %q or %q", RoleOwner, RoleAdmin, RoleViewer)
	}
	return nil
}

// RoleScopes are the key scopes a role acts with in its workspace: a
// viewer reads (query:read), an admin holds the admin scope; an owner
// too, and manages members besides (which no scope names).
func RoleScopes(role string) []string {
	switch role {
	case RoleOwner, RoleAdmin:
		return []string{ScopeAdmin}
	case RoleViewer:
		return []string{ScopeQueryRead}
	}
	return nil
}

// Membership is a user's role in a workspace.
type Membership struct {
	UserID      string
	Email       string
	WorkspaceID string
	Slug        string
	Name        string
	Role        string
	CreatedAt   string
}

// CleanEmail trims an address and checks its shape (one @, something on
// each side, no spaces or control characters, at most 254 bytes); key is
// its lowercased form, which is unique among users.
func CleanEmail(email string) (clean, key string, err error) {
	clean = strings.TrimSpace(email)
	local, domain, ok := strings.Cut(clean, "@")
	bad := !ok || local == "" || domain == "" || strings.Contains(domain, "@") || len(clean) > 254 ||
		strings.IndexFunc(clean, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0
	if bad {
		return "", "", fault.Errorf(fault.InvalidEmail, "email must be an address such as ana@example.com")
	}
	return clean, strings.ToLower(clean), nil
}

const userColumns = `id, email, password_hash, totp_secret, totp_enabled_at, totp_last_step, created_at`

func scanUser(row interface{ Scan(...any) error }) (*User, error) {
	var u User
	var hash, secret, enabled *string
	if err := row.Scan(&u.ID, &u.Email, &hash, &secret, &enabled, &u.totpLastStep, &u.CreatedAt); err != nil {
		return nil, err
	}
	if hash != nil {
		u.passwordHash, u.HasPassword = *hash, true
	}
	if secret != nil {
		u.totpSecret = *secret
	}
	u.TOTPEnabled = enabled != nil
	return &u, nil
}

// userWhere reads the one user matching where (nil, false when none).
func (db *DB) userWhere(ctx context.Context, where string, arg any) (*User, bool, error) {
	u, err := scanUser(db.read.QueryRowContext(ctx, `SELECT `+userColumns+` FROM users WHERE `+where, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return u, true, nil
}

// UserByEmail finds the user with email, whatever its case.
func (db *DB) UserByEmail(ctx context.Context, email string) (*User, bool, error) {
	_, key, err := CleanEmail(email)
	if err != nil {
		return nil, false, nil
	}
	return db.userWhere(ctx, `email_key = ?`, key)
}

// UserByID finds the user with id.
func (db *DB) UserByID(ctx context.Context, id string) (*User, bool, error) {
	return db.userWhere(ctx, `id = ?`, id)
}

// CheckPassword reports whether pw is u's password, in the time of one
// argon2id hash whatever u is: nil (an unknown email) and a user without a
// password are checked against a dummy hash, and fail.
func CheckPassword(u *User, pw string) bool {
	if u == nil {
		return checkPassword("", pw)
	}
	return checkPassword(u.passwordHash, pw)
}

// CreateUser stores a user with a role in ws, audited as user.create (and
// the role as member.add) in ws. An empty password leaves it unset: the
// user signs in once a set-password link (CreatePasswordToken) was used.
func (db *DB) CreateUser(ctx context.Context, actor Actor, email, password string, ws *Workspace, role string) (*User, error) {
	clean, key, err := CleanEmail(email)
	if err != nil {
		return nil, err
	}
	if err := checkRole(role); err != nil {
		return nil, err
	}
	var hash *string
	if password != "" {
		if err := checkPasswordRules(password); err != nil {
			return nil, err
		}
		h := hashPassword(password)
		hash = &h
	}
	now := FormatTime(db.now())
	u := &User{ID: uuid.NewString(), Email: clean, CreatedAt: now, HasPassword: hash != nil}
	if hash != nil {
		u.passwordHash = *hash
	}
	err = db.writer.do(ctx, func(tx *writeTx) error {
		return db.insertUser(tx, actor, u, key, hash, ws, role)
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}

// insertUser writes u and its membership of ws inside tx, with the audit.
func (db *DB) insertUser(tx *writeTx, actor Actor, u *User, key string, hash *string, ws *Workspace, role string) error {
	if _, err := tx.Exec(`INSERT INTO users(id, email, email_key, password_hash, password_changed_at, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		u.ID, u.Email, key, hash, nullableIf(hash != nil, u.CreatedAt), u.CreatedAt); err != nil {
		// The unique index decides, not a read before the insert: another
		// instance on the same PostgreSQL database may take the address
		// between the two.
		if db.d.Classify(err) == engine.ClassUnique {
			return fault.Errorf(fault.EmailTaken, "a user with this email exists already")
		}
		return err
	}
	if err := db.audit(tx, ws.ID, actor, "user.create", u.ID, map[string]any{"role": role, "password_set": hash != nil}); err != nil {
		return err
	}
	return db.insertMembership(tx, actor, u.ID, ws, role)
}

// insertMembership gives user id role in ws inside tx, audited as
// member.add.
func (db *DB) insertMembership(tx *writeTx, actor Actor, userID string, ws *Workspace, role string) error {
	if _, err := tx.Exec(`INSERT INTO memberships(user_id, workspace_id, role, created_at) VALUES (?, ?, ?, ?)`,
		userID, ws.ID, role, FormatTime(db.now())); err != nil {
		return err
	}
	return db.audit(tx, ws.ID, actor, "member.add", userID, map[string]any{"role": role})
}

// nullableIf is v, or SQL NULL when !ok.
func nullableIf(ok bool, v string) any {
	if !ok {
		return nil
	}
	return v
}

// Memberships lists user id's workspaces and roles, by workspace slug.
func (db *DB) Memberships(ctx context.Context, userID string) ([]Membership, error) {
	return db.memberships(ctx, `m.user_id = ?`, userID)
}

// Members lists workspace id's users and roles, by email.
func (db *DB) Members(ctx context.Context, workspaceID string) ([]Membership, error) {
	return db.memberships(ctx, `m.workspace_id = ?`, workspaceID)
}

func (db *DB) memberships(ctx context.Context, where string, args ...any) ([]Membership, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT m.user_id, u.email, m.workspace_id, w.slug, w.name, m.role, m.created_at
		FROM memberships m JOIN users u ON u.id = m.user_id JOIN workspaces w ON w.id = m.workspace_id
		WHERE `+where+` ORDER BY w.slug, u.email_key`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	list := []Membership{}
	for rows.Next() {
		var m Membership
		if err := rows.Scan(&m.UserID, &m.Email, &m.WorkspaceID, &m.Slug, &m.Name, &m.Role, &m.CreatedAt); err != nil {
			return nil, err
		}
		list = append(list, m)
	}
	return list, rows.Err()
}

// RemoveMember takes user id's role in ws away, audited as member.remove;
// not_found when it has none there, 409 last_owner for the only owner.
func (db *DB) RemoveMember(ctx context.Context, actor Actor, ws *Workspace, userID string) error {
	return db.writer.do(ctx, func(tx *writeTx) error {
		if err := db.keepAnOwner(tx, ws, userID); err != nil {
			return err
		}
		res, err := tx.Exec(`DELETE FROM memberships WHERE user_id = ? AND workspace_id = ?`, userID, ws.ID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fault.Errorf(fault.NotFound, "member not found")
		}
		return db.audit(tx, ws.ID, actor, "member.remove", userID, nil)
	})
}

// keepAnOwner refuses, with 409 last_owner, to take the owner role from
// user id when it is ws's only owner. It first takes the workspace's lock
// (held until tx ends), so that two instances on one PostgreSQL database
// demoting or removing its two owners at once cannot both pass the count.
func (db *DB) keepAnOwner(tx *writeTx, ws *Workspace, userID string) error {
	if err := db.coord().lockWorkspace(tx, ws.ID); err != nil {
		return err
	}
	var owners, isOwner int
	if err := tx.QueryRow(`SELECT COUNT(*), COALESCE(SUM(CASE WHEN user_id = ? THEN 1 ELSE 0 END), 0)
		FROM memberships WHERE workspace_id = ? AND role = ?`, userID, ws.ID, RoleOwner).Scan(&owners, &isOwner); err != nil {
		return err
	}
	if isOwner == 1 && owners == 1 {
		return fault.Errorf(fault.LastOwner, "this is the workspace's only owner: make another owner first")
	}
	return nil
}

// SetMemberRole gives user id the role in ws, audited as member.update
// with the role before and after (no entry when it had that role
// already); not_found when it is no member of ws, 409 last_owner when it
// is the only owner and role is not owner. It returns the membership.
func (db *DB) SetMemberRole(ctx context.Context, actor Actor, ws *Workspace, userID, role string) (*Membership, error) {
	if err := checkRole(role); err != nil {
		return nil, err
	}
	err := db.writer.do(ctx, func(tx *writeTx) error {
		var was string
		err := tx.QueryRow(`SELECT role FROM memberships WHERE user_id = ? AND workspace_id = ?`, userID, ws.ID).Scan(&was)
		if errors.Is(err, sql.ErrNoRows) {
			return fault.Errorf(fault.NotFound, "member not found")
		}
		if err != nil || was == role {
			return err
		}
		if role != RoleOwner {
			if err := db.keepAnOwner(tx, ws, userID); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(`UPDATE memberships SET role = ? WHERE user_id = ? AND workspace_id = ?`, role, userID, ws.ID); err != nil {
			return err
		}
		return db.audit(tx, ws.ID, actor, "member.update", userID, map[string]any{"role": role, "previous_role": was})
	})
	if err != nil {
		return nil, err
	}
	ms, err := db.memberships(ctx, `m.workspace_id = ? AND m.user_id = ?`, ws.ID, userID)
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return nil, fault.Errorf(fault.NotFound, "member not found")
	}
	return &ms[0], nil
}

// auditUser appends an entry of a user's own action (sign-in, password,
// TOTP, sessions) to the log of every workspace the user belongs to:
// the log an owner reads.
func (db *DB) auditUser(tx *writeTx, userID string, actor Actor, action string, metadata map[string]any) error {
	rows, err := tx.Query(`SELECT workspace_id FROM memberships WHERE user_id = ? ORDER BY workspace_id`, userID)
	if err != nil {
		return err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, id := range ids {
		if err := db.audit(tx, id, actor, action, userID, metadata); err != nil {
			return err
		}
	}
	return nil
}
