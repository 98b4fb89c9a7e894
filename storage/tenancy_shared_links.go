package storage

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/tally-analytics/tally/fault"
)

// Shared links (docs/sharing.md): a site's read-only dashboard at an
// unguessable URL, optionally behind a password, revocable, embeddable
// by the origins it names. Only the SHA-256 of a link's token (256 random
// bits, shown once) and an argon2id hash of its password are stored.

// Bounds of shared links.
const (
	// MaxSharedLinksPerSite bounds a site's live (not revoked) links: a
	// settings page lists them all.
	MaxSharedLinksPerSite = 100
	// MaxSharedLinkOrigins bounds a link's allowed_origins, which go into
	// every answer's Content-Security-Policy header.
	MaxSharedLinkOrigins = 20
	maxSharedLinkLabel   = 120
	maxSharedLinkOrigin  = 300
)

// SharedLink is one shared link of a site. The token is never held: only
// its hash, in the database.
type SharedLink struct {
	ID             string
	SiteID         string
	Label          string
	HasPassword    bool
	AllowedOrigins []string
	CreatedAt      string
	UpdatedAt      string

	passwordHash string
}

// NewSharedLink is a link to create, as the client sent it.
type NewSharedLink struct {
	Label string
	// Password is nil for a link without one.
	Password       *string
	AllowedOrigins []string
}

// SharedLinkChange is what a PATCH changes: each nil field stays.
type SharedLinkChange struct {
	Label *string
	// Password sets a new password; ClearPassword removes it.
	Password       *string
	ClearPassword  bool
	AllowedOrigins *[]string
}

// invalidSharedLink is the 400 of a link's field, path its JSON pointer.
func invalidSharedLink(path, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return fault.WithDetails(fault.InvalidSharedLink, "the shared link is invalid: "+msg, []fault.Detail{{Path: path, Message: msg}})
}

// sharedLinkLabel checks a label: 1 to maxSharedLinkLabel bytes once trimmed.
func sharedLinkLabel(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > maxSharedLinkLabel || !utf8.ValidString(s) {
		return "", invalidSharedLink("/label", "label must be a non-empty string of at most %d bytes", maxSharedLinkLabel)
	}
	return s, nil
}

// sharedLinkPassword checks a password as users' are (10 to 256 characters)
// and hashes it.
func sharedLinkPassword(pw string) (string, error) {
	if err := checkPasswordRules(pw); err != nil {
		return "", invalidSharedLink("/password", "password must be %d to %d characters of UTF-8", MinPasswordLength, maxPasswordBytes)
	}
	return hashPassword(pw), nil
}

// hostLabel is one label of a DNS name.
var hostLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// CleanOrigins checks a list of origins that may frame a shared link:
// each scheme://host[:port], the scheme http or https, no path, query,
// fragment, user or wildcard (a lone trailing slash is dropped), at most
// MaxSharedLinkOrigins of them. They come back lowercased, without
// duplicates, in their order; nil is an empty list.
func CleanOrigins(list []string) ([]string, error) {
	if len(list) > MaxSharedLinkOrigins {
		return nil, invalidSharedLink("/allowed_origins", "allowed_origins holds at most %d origins", MaxSharedLinkOrigins)
	}
	out := []string{}
	seen := map[string]bool{}
	for i, o := range list {
		clean, err := cleanOrigin(o)
		if err != nil {
			return nil, invalidSharedLink("/allowed_origins/"+strconv.Itoa(i), "%q is not an origin: %v", clipText(o), err)
		}
		if !seen[clean] {
			seen[clean] = true
			out = append(out, clean)
		}
	}
	return out, nil
}

// clipText shortens a value echoed in a message.
func clipText(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}

func cleanOrigin(o string) (string, error) {
	o = strings.TrimSpace(o)
	if o == "" || len(o) > maxSharedLinkOrigin {
		return "", fmt.Errorf("an origin is 1 to %d bytes", maxSharedLinkOrigin)
	}
	o = strings.TrimSuffix(o, "/")
	u, err := url.Parse(o)
	if err != nil {
		return "", errors.New("write it as scheme://host[:port], such as https://example.com")
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != "https" && scheme != "http":
		return "", errors.New("the scheme must be https or http (scheme://host[:port])")
	case u.Opaque != "" || u.User != nil:
		return "", errors.New("write it as scheme://host[:port], such as https://example.com")
	case u.Path != "" || u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(o, "?#"):
		return "", errors.New("an origin has no path, query or fragment: scheme://host[:port]")
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if strings.HasSuffix(u.Host, ":") {
		return "", errors.New("the port is missing after the colon")
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return "", errors.New("the port must be a number from 1 to 65535")
		}
	}
	switch ip := net.ParseIP(host); {
	case ip != nil && ip.To4() == nil:
		host = "[" + ip.String() + "]"
	case ip != nil:
		host = ip.String()
	default:
		if len(host) > 253 {
			return "", errors.New("the host name is longer than 253 bytes")
		}
		for _, l := range strings.Split(host, ".") {
			if !hostLabel.MatchString(l) {
				return "", errors.New("the host must be a DNS name (letters, digits and hyphens between dots, no wildcard) or an IP address")
			}
		}
	}
	out := scheme + "://" + host
	if port != "" {
		out += ":" + port
	}
	return out, nil
}

// check validates nl: the label, the password's rules, the origins.
func (nl NewSharedLink) check() (label, hash string, origins []string, err error) {
	if label, err = sharedLinkLabel(nl.Label); err != nil {
		return
	}
	if nl.Password != nil {
		if hash, err = sharedLinkPassword(*nl.Password); err != nil {
			return
		}
	}
	origins, err = CleanOrigins(nl.AllowedOrigins)
	return
}

// sharedLinkMeta is a link as its audit rows record it: never its token
// nor its password.
func sharedLinkMeta(l *SharedLink) map[string]any {
	return map[string]any{"shared_link_id": l.ID, "label": l.Label, "password": l.HasPassword, "allowed_origins": l.AllowedOrigins}
}

// CreateSharedLink makes a link to site, audited as shared_link.create. It
// returns the link and its token, which is kept nowhere (only its hash):
// the caller shows it once.
func (db *DB) CreateSharedLink(ctx context.Context, actor Actor, site *Site, nl NewSharedLink) (*SharedLink, string, error) {
	label, hash, origins, err := nl.check()
	if err != nil {
		return nil, "", err
	}
	now := FormatTime(db.now())
	l := &SharedLink{ID: uuid.NewString(), SiteID: site.ID, Label: label, HasPassword: hash != "", AllowedOrigins: origins,
		CreatedAt: now, UpdatedAt: now, passwordHash: hash}
	token := newSecretToken()
	originsJSON, _ := json.Marshal(origins)
	err = db.writer.do(ctx, func(tx *writeTx) error {
		if err := db.checkSite(site); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(`SELECT COUNT(*) FROM shared_links WHERE site_id = ? AND revoked_at IS NULL`, site.ID).Scan(&n); err != nil {
			return err
		}
		if n >= MaxSharedLinksPerSite {
			return fault.Errorf(fault.SharedLinkLimitReached, "a site may have at most %d shared links; revoke one first", MaxSharedLinksPerSite)
		}
		if _, err := tx.Exec(`INSERT INTO shared_links(id, site_id, label, token_hash, password_hash, allowed_origins, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, l.ID, site.ID, label, tokenHash(token), nullText(hash), string(originsJSON), now, now); err != nil {
			return err
		}
		return db.audit(tx, site.WorkspaceID, actor, "shared_link.create", site.ID, sharedLinkMeta(l))
	})
	if err != nil {
		return nil, "", err
	}
	return l, token, nil
}

const sharedLinkColumns = `id, site_id, label, password_hash, allowed_origins, created_at, updated_at`

// scanSharedLink reads one row of sharedLinkColumns.
func scanSharedLink(row interface{ Scan(...any) error }) (*SharedLink, error) {
	var l SharedLink
	var hash *string
	var origins string
	if err := row.Scan(&l.ID, &l.SiteID, &l.Label, &hash, &origins, &l.CreatedAt, &l.UpdatedAt); err != nil {
		return nil, err
	}
	if hash != nil {
		l.passwordHash, l.HasPassword = *hash, true
	}
	if err := json.Unmarshal([]byte(origins), &l.AllowedOrigins); err != nil || l.AllowedOrigins == nil {
		l.AllowedOrigins = []string{}
	}
	return &l, nil
}

// SharedLinks lists site's live links, the newest first.
func (db *DB) SharedLinks(ctx context.Context, siteID string) ([]SharedLink, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT `+sharedLinkColumns+` FROM shared_links
		WHERE site_id = ? AND revoked_at IS NULL ORDER BY created_at DESC, id`, siteID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	list := []SharedLink{}
	for rows.Next() {
		l, err := scanSharedLink(rows)
		if err != nil {
			return nil, err
		}
		list = append(list, *l)
	}
	return list, rows.Err()
}

var errNoSharedLink = fault.Errorf(fault.NotFound, "no shared link with that id on this site")

// SharedLinkByToken is the live link whose token is token, on a site that
// still exists: ok false for a token unknown or revoked. It reads the
// database every time (no cache), so a revocation on any instance holds
// at once everywhere.
func (db *DB) SharedLinkByToken(ctx context.Context, token string) (*SharedLink, bool, error) {
	if token == "" {
		return nil, false, nil
	}
	l, err := scanSharedLink(db.read.QueryRowContext(ctx, `SELECT `+sharedLinkColumns+` FROM shared_links
		WHERE token_hash = ? AND revoked_at IS NULL`, tokenHash(token)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if _, ok := db.Site(l.SiteID); !ok {
		return nil, false, nil
	}
	return l, true, nil
}

// UpdateSharedLink applies c to link id of site, audited as
// shared_link.update (what changed, never the password).
func (db *DB) UpdateSharedLink(ctx context.Context, actor Actor, site *Site, id string, c SharedLinkChange) (*SharedLink, error) {
	if c.Label == nil && c.Password == nil && !c.ClearPassword && c.AllowedOrigins == nil {
		return nil, invalidSharedLink("", "nothing to change: send label, password (a string to set, null to remove) or allowed_origins")
	}
	var label, hash string
	var origins []string
	var err error
	if c.Label != nil {
		if label, err = sharedLinkLabel(*c.Label); err != nil {
			return nil, err
		}
	}
	if c.Password != nil {
		if hash, err = sharedLinkPassword(*c.Password); err != nil {
			return nil, err
		}
	}
	if c.AllowedOrigins != nil {
		if origins, err = CleanOrigins(*c.AllowedOrigins); err != nil {
			return nil, err
		}
	}
	var l *SharedLink
	err = db.writer.do(ctx, func(tx *writeTx) error {
		if err := db.checkSite(site); err != nil {
			return err
		}
		var err error
		l, err = scanSharedLink(tx.QueryRow(`SELECT `+sharedLinkColumns+` FROM shared_links WHERE id = ? AND site_id = ? AND revoked_at IS NULL`, id, site.ID))
		if errors.Is(err, sql.ErrNoRows) {
			return errNoSharedLink
		}
		if err != nil {
			return err
		}
		changed := []string{}
		if c.Label != nil {
			l.Label = label
			changed = append(changed, "label")
		}
		switch {
		case c.Password != nil:
			l.passwordHash, l.HasPassword = hash, true
			changed = append(changed, "password")
		case c.ClearPassword:
			l.passwordHash, l.HasPassword = "", false
			changed = append(changed, "password")
		}
		if c.AllowedOrigins != nil {
			l.AllowedOrigins = origins
			changed = append(changed, "allowed_origins")
		}
		l.UpdatedAt = FormatTime(db.now())
		originsJSON, _ := json.Marshal(l.AllowedOrigins)
		if _, err := tx.Exec(`UPDATE shared_links SET label = ?, password_hash = ?, allowed_origins = ?, updated_at = ? WHERE id = ?`,
			l.Label, nullText(l.passwordHash), string(originsJSON), l.UpdatedAt, l.ID); err != nil {
			return err
		}
		meta := sharedLinkMeta(l)
		meta["changed"] = changed
		return db.audit(tx, site.WorkspaceID, actor, "shared_link.update", site.ID, meta)
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// RevokeSharedLink ends link id of site, audited as shared_link.revoke:
// its token answers 404 from then on, on every instance (SharedLinkByToken
// reads the database). A link unknown or revoked already is 404.
func (db *DB) RevokeSharedLink(ctx context.Context, actor Actor, site *Site, id string) error {
	return db.writer.do(ctx, func(tx *writeTx) error {
		if err := db.checkSite(site); err != nil {
			return err
		}
		l, err := scanSharedLink(tx.QueryRow(`SELECT `+sharedLinkColumns+` FROM shared_links WHERE id = ? AND site_id = ? AND revoked_at IS NULL`, id, site.ID))
		if errors.Is(err, sql.ErrNoRows) {
			return errNoSharedLink
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(`UPDATE shared_links SET revoked_at = ? WHERE id = ?`, FormatTime(db.now()), id); err != nil {
			return err
		}
		return db.audit(tx, site.WorkspaceID, actor, "shared_link.revoke", site.ID, sharedLinkMeta(l))
	})
}

// CheckSharedLinkPassword reports whether pw is l's password, in constant
// time over the hashes; a link without one is checked against a dummy
// hash (and fails), so every answer costs one argon2id hash.
func CheckSharedLinkPassword(l *SharedLink, pw string) bool {
	return checkPassword(l.passwordHash, pw)
}

// PasswordProof is the MAC of msg under a key derived from l's password
// hash, for the cookie that proves the password was given
// (server/sharing_view.go): every instance computes the same from the
// database, and a new password (a new salt, a new hash) voids every
// earlier proof. Nil for a link without a password.
func (l *SharedLink) PasswordProof(msg string) []byte {
	if l.passwordHash == "" {
		return nil
	}
	key := sha256.Sum256([]byte("tally shared link\x00" + l.passwordHash))
	m := hmac.New(sha256.New, key[:])
	m.Write([]byte(l.ID + "\x00" + msg))
	return m.Sum(nil)
}
