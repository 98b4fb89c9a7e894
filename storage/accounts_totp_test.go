package storage

import (
	"testing"
	"time"
)

// TestHOTPMatchesRFC6238Vectors checks the code generator against RFC
// 6238's Appendix B, SHA-1 rows (8 digits, the 20-byte ASCII key
// "12345678901234567890"), and the 6-digit form authenticator apps show.
func TestHOTPMatchesRFC6238Vectors(t *testing.T) {
	t.Parallel()
	key := []byte("12345678901234567890")
	for _, tc := range []struct {
		unix int64
		want string
	}{
		{59, "94287082"},
		{1111111109, "07081804"},
		{1111111111, "14050471"},
		{1234567890, "89005924"},
		{2000000000, "69279037"},
		{20000000000, "65353130"},
	} {
		step := totpStepAt(time.Unix(tc.unix, 0))
		if got := hotp(key, uint64(step), 8); got != tc.want {
			t.Errorf("T=%d: got %s, want %s", tc.unix, got, tc.want)
		}
		secret := totpBase32.EncodeToString(key)
		got, err := TOTPCode(secret, time.Unix(tc.unix, 0))
		if err != nil || got != tc.want[2:] {
			t.Errorf("T=%d: got 6-digit code %q (%v), want %s", tc.unix, got, err, tc.want[2:])
		}
	}
}

// TestTOTPMatchWindow: the step before and after are accepted, not two
// away, and never a step at or before the last one used.
func TestTOTPMatchWindow(t *testing.T) {
	t.Parallel()
	secret := totpBase32.EncodeToString([]byte("12345678901234567890"))
	now := time.Unix(1111111111, 0)
	step := totpStepAt(now)
	for _, tc := range []struct {
		name   string
		at     time.Duration
		last   int64
		wantOK bool
	}{
		{"now", 0, 0, true},
		{"one step early", -30 * time.Second, 0, true},
		{"one step late", 30 * time.Second, 0, true},
		{"two steps late", 60 * time.Second, 0, false},
		{"used already", 0, step, false},
	} {
		code, _ := TOTPCode(secret, now.Add(tc.at))
		if _, ok := totpMatch(secret, code, now, tc.last); ok != tc.wantOK {
			t.Errorf("%s: got %v, want %v", tc.name, ok, tc.wantOK)
		}
	}
	if _, ok := totpMatch(secret, "12345", now, 0); ok {
		t.Error("a 5-digit code matched")
	}
}

// TestPasswordHash: argon2id in the PHC format with the documented
// parameters, salted, and checked in constant time.
func TestPasswordHash(t *testing.T) {
	t.Parallel()
	h := hashPassword("correct horse battery")
	if want := "$argon2id$v=19$m=19456,t=2,p=1$"; len(h) < len(want) || h[:len(want)] != want {
		t.Fatalf("got %q, want the prefix %q", h, want)
	}
	if h == hashPassword("correct horse battery") {
		t.Error("two hashes of one password are equal: no salt")
	}
	for _, tc := range []struct {
		encoded, pw string
		want        bool
	}{
		{h, "correct horse battery", true},
		{h, "correct horse batter", false},
		{h, "", false},
		{"", "", false},
		{"$argon2id$v=19$garbage", "correct horse battery", false},
	} {
		if got := checkPassword(tc.encoded, tc.pw); got != tc.want {
			t.Errorf("checkPassword(%q, %q): got %v, want %v", tc.encoded, tc.pw, got, tc.want)
		}
	}
	long := make([]byte, maxPasswordBytes)
	for i := range long {
		long[i] = 'a'
	}
	hl := hashPassword(string(long))
	if checkPassword(hl, string(long)+"b") {
		t.Error("a password longer than the bound matched its prefix")
	}
}

// TestEveryPasswordCheckCostsOneHash: an unknown user, a user without a
// password, a wrong and a right password each cost exactly one argon2id
// hash, so that a sign-in's time tells none of them apart.
func TestEveryPasswordCheckCostsOneHash(t *testing.T) {
	// Not parallel: passwordChecks counts every check of the package.
	set := &User{passwordHash: hashPassword("correct horse battery"), HasPassword: true}
	for _, tc := range []struct {
		name string
		u    *User
		pw   string
		want bool
	}{
		{"unknown email", nil, "correct horse battery", false},
		{"no password yet", &User{}, "correct horse battery", false},
		{"wrong password", set, "wrong password", false},
		{"right password", set, "correct horse battery", true},
		{"unreadable hash", &User{passwordHash: "$bcrypt$x"}, "correct horse battery", false},
	} {
		before := passwordChecks.Load()
		got := CheckPassword(tc.u, tc.pw)
		if n := passwordChecks.Load() - before; got != tc.want || n != 1 {
			t.Errorf("%s: got %v after %d hashes, want %v after 1", tc.name, got, n, tc.want)
		}
	}
}
