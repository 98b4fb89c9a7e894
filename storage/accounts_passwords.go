package storage

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"

	"github.com/tally-analytics/tally/fault"
)

// Argon2id's parameters for new password hashes (docs/accounts.md#passwords):
// RFC 9106's second recommended option shrunk to OWASP's minimum for a
// server that signs people in rarely: 19 MiB of memory, 2 passes, one lane,
// a 16-byte random salt and a 32-byte hash. A stored hash carries its own
// parameters, so raising these later leaves older hashes readable.
const (
	argonTime    = 2
	argonMemory  = 19 * 1024 // KiB
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

// Bounds of a password: at least MinPasswordLength characters; at most
// maxPasswordBytes bytes, so that a huge body costs no more to hash.
const (
	MinPasswordLength = 10
	maxPasswordBytes  = 256
)

// checkPasswordRules refuses a password too short or too long to set.
func checkPasswordRules(pw string) error {
	if utf8.RuneCountInString(pw) < MinPasswordLength || len(pw) > maxPasswordBytes || !utf8.ValidString(pw) {
		return fault.Errorf(fault.InvalidPassword, "password must be %d to %d characters of UTF-8", MinPasswordLength, maxPasswordBytes)
	}
	return nil
}

// hashPassword is pw's stored form, in the PHC string format:
// $argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>, base64 without padding.
func hashPassword(pw string) string {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		panic(err)
	}
	sum := argon2.IDKey([]byte(pw), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	b := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		b.EncodeToString(salt), b.EncodeToString(sum))
}

// dummyHash is what a password is checked against when there is no stored
// hash (an unknown email, a user whose password is not set yet), so such a
// sign-in costs the same hashing as a wrong password.
var dummyHash = sync.OnceValue(func() string { return hashPassword("tally: no such user, and this is no password") })

// passwordChecks counts the argon2id hashes checkPassword computed, for
// the test that every answer costs exactly one.
var passwordChecks atomic.Int64

// checkPassword reports whether pw matches encoded, in constant time over
// the hashes; an empty or unreadable encoded is checked against dummyHash
// (and fails), so that every answer costs one argon2id hash.
func checkPassword(encoded, pw string) bool {
	real := encoded != ""
	if !real {
		encoded = dummyHash()
	}
	var version int
	var memory, passes uint32
	var threads uint8
	parts := strings.Split(encoded, "$")
	ok := len(parts) == 6 && parts[1] == "argon2id"
	if ok {
		_, err1 := fmt.Sscanf(parts[2], "v=%d", &version)
		_, err2 := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &memory, &passes, &threads)
		ok = err1 == nil && err2 == nil && version == argon2.Version && memory > 0 && passes > 0 && threads > 0
	}
	var salt, want []byte
	if ok {
		var err1, err2 error
		salt, err1 = base64.RawStdEncoding.DecodeString(parts[4])
		want, err2 = base64.RawStdEncoding.DecodeString(parts[5])
		ok = err1 == nil && err2 == nil && len(want) > 0
	}
	if !ok {
		// Unreadable: still hash once, so the answer takes as long.
		_ = checkPassword("", pw)
		return false
	}
	// A longer one never matches a set password; its prefix bounds the work.
	tooLong := len(pw) > maxPasswordBytes
	if tooLong {
		pw = pw[:maxPasswordBytes]
	}
	passwordChecks.Add(1)
	got := argon2.IDKey([]byte(pw), salt, passes, memory, threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1 && real && !tooLong
}
