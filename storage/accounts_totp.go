package storage

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/tally-analytics/tally/fault"
)

// TOTP as RFC 6238 with the parameters every authenticator app defaults
// to: HMAC-SHA-1, 30-second steps from the Unix epoch, 6 digits
// (docs/accounts.md#two-factor-sign-in). A code of the step before or after
// the current one is accepted (clocks drift), and a step once used is not
// accepted again (totp_last_step), so a code seen cannot be replayed.
const (
	totpStep     = 30 * time.Second
	totpDigits   = 6
	totpSkew     = 1
	totpKeyBytes = 20 // 160 bits, RFC 4226's recommendation
)

var totpBase32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// hotp is RFC 4226's HOTP of counter under key, digits long (HMAC-SHA-1,
// dynamic truncation).
func hotp(key []byte, counter uint64, digits int) string {
	var msg [8]byte
	binary.BigEndian.PutUint64(msg[:], counter)
	m := hmac.New(sha1.New, key)
	m.Write(msg[:])
	sum := m.Sum(nil)
	off := sum[len(sum)-1] & 0x0f
	code := binary.BigEndian.Uint32(sum[off:off+4]) & 0x7fffffff
	mod := uint32(1)
	for range digits {
		mod *= 10
	}
	return fmt.Sprintf("%0*d", digits, code%mod)
}

// totpStepAt is the time step t falls in.
func totpStepAt(t time.Time) int64 { return t.Unix() / int64(totpStep/time.Second) }

// TOTPCode is the 6-digit code of secret (base32) at t, as an
// authenticator app shows it.
func TOTPCode(secret string, t time.Time) (string, error) {
	key, err := totpBase32.DecodeString(strings.ToUpper(secret))
	if err != nil {
		return "", err
	}
	return hotp(key, uint64(totpStepAt(t)), totpDigits), nil
}

// totpMatch is the step within the skew of now whose code is code, after
// last; ok is false when none is.
func totpMatch(secret, code string, now time.Time, last int64) (int64, bool) {
	key, err := totpBase32.DecodeString(secret)
	if err != nil || len(code) != totpDigits {
		return 0, false
	}
	step := totpStepAt(now)
	found, match := int64(0), 0
	for s := step - totpSkew; s <= step+totpSkew; s++ {
		// Every candidate is compared, in constant time, whatever matched.
		eq := subtle.ConstantTimeCompare([]byte(hotp(key, uint64(s), totpDigits)), []byte(code))
		if eq == 1 && s > last && match == 0 {
			found, match = s, 1
		}
	}
	return found, match == 1
}

// BeginTOTP draws a new secret for u, pending until ConfirmTOTP: it returns
// the secret (base32) and its otpauth:// URI, shown once. A second call
// replaces a pending secret; an enabled one must be disabled first.
func (db *DB) BeginTOTP(ctx context.Context, u *User, issuer string) (secret, uri string, err error) {
	if u.TOTPEnabled {
		return "", "", fault.Errorf(fault.Forbidden, "two-factor sign-in is on already: turn it off first to enrol a new secret")
	}
	key := make([]byte, totpKeyBytes)
	if _, err := rand.Read(key); err != nil {
		panic(err)
	}
	secret = totpBase32.EncodeToString(key)
	err = db.writer.do(ctx, func(tx *writeTx) error {
		_, err := tx.Exec(`UPDATE users SET totp_secret = ?, totp_enabled_at = NULL WHERE id = ?`, secret, u.ID)
		return err
	})
	if err != nil {
		return "", "", err
	}
	q := url.Values{"secret": {secret}, "issuer": {issuer}, "algorithm": {"SHA1"}, "digits": {"6"}, "period": {"30"}}
	uri = "otpauth://totp/" + url.PathEscape(issuer+":"+u.Email) + "?" + q.Encode()
	return secret, uri, nil
}

// ConfirmTOTP turns two-factor sign-in on for u with a code of its pending
// secret, audited as totp.enable.
func (db *DB) ConfirmTOTP(ctx context.Context, u *User, code string) error {
	if u.TOTPEnabled || u.totpSecret == "" {
		return fault.Errorf(fault.Forbidden, "no pending two-factor secret: enrol first (POST /v1/auth/totp)")
	}
	step, ok := totpMatch(u.totpSecret, code, db.now(), u.totpLastStep)
	if !ok {
		return errBadTOTP
	}
	return db.writer.do(ctx, func(tx *writeTx) error {
		if _, err := tx.Exec(`UPDATE users SET totp_enabled_at = ?, totp_last_step = ? WHERE id = ?`, FormatTime(db.now()), step, u.ID); err != nil {
			return err
		}
		return db.auditUser(tx, u.ID, UserActor(u.ID), "totp.enable", nil)
	})
}

var errBadTOTP = fault.Errorf(fault.InvalidTOTP, "the two-factor code does not match: use the current code of your authenticator app")

// CheckTOTP checks a sign-in's code against u's secret and uses its step
// up, so that the same code cannot sign in twice.
func (db *DB) CheckTOTP(ctx context.Context, u *User, code string) error {
	step, ok := totpMatch(u.totpSecret, code, db.now(), u.totpLastStep)
	if !ok {
		return errBadTOTP
	}
	return db.writer.do(ctx, func(tx *writeTx) error {
		res, err := tx.Exec(`UPDATE users SET totp_last_step = ? WHERE id = ? AND totp_last_step < ?`, step, u.ID, step)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errBadTOTP // used meanwhile, by another sign-in
		}
		return nil
	})
}

// DisableTOTP turns two-factor sign-in off for u (the caller checked the
// password), with a current code, audited as totp.disable.
func (db *DB) DisableTOTP(ctx context.Context, u *User, code string) error {
	if !u.TOTPEnabled {
		return fault.Errorf(fault.Forbidden, "two-factor sign-in is not on")
	}
	if err := db.CheckTOTP(ctx, u, code); err != nil {
		return err
	}
	return db.writer.do(ctx, func(tx *writeTx) error {
		if _, err := tx.Exec(`UPDATE users SET totp_secret = NULL, totp_enabled_at = NULL WHERE id = ?`, u.ID); err != nil {
			return err
		}
		return db.auditUser(tx, u.ID, UserActor(u.ID), "totp.disable", nil)
	})
}
