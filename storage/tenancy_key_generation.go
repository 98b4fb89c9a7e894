package storage

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
)

// newPlaintextKey returns "sk_<slug>_" followed by 32 base64url characters
// encoding 24 bytes (192 bits) from crypto/rand.
func newPlaintextKey(slug string) string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return "sk_" + slug + "_" + base64.RawURLEncoding.EncodeToString(b)
}

// hashKey is the stored form of a key. A plain SHA-256 suffices: the
// plaintext holds 192 random bits, so there is nothing to brute-force.
func hashKey(plaintext string) []byte {
	sum := sha256.Sum256([]byte(plaintext))
	return sum[:]
}
