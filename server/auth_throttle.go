package server

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"
)

// Sign-in throttling (docs/accounts.md#throttling): failed sign-ins are
// counted per account (the email as typed, known or not, so the throttle
// tells nothing either) and per client address over a window; past a
// limit, sign-ins of that account or client are refused with 429 and
// Retry-After until the window that counted them ends, right password or
// not. Both keys are HMAC-SHA-256 under a random key of the process, so
// neither emails nor addresses are held in the clear, and the counts
// live in memory only (each instance counts its own).
const (
	signinWindow       = 15 * time.Minute
	signinAccountLimit = 5
	signinClientLimit  = 20
	// signinMaxEntries bounds each map: past it, ended windows are pruned
	// before a new entry is added, and with none ended the oldest goes.
	signinMaxEntries = 10000
)

type signinThrottle struct {
	mu       sync.Mutex
	key      [32]byte
	now      func() time.Time
	accounts map[string]*signinWindowCount
	clients  map[string]*signinWindowCount
}

type signinWindowCount struct {
	start    time.Time
	failures int
}

func newSigninThrottle(now func() time.Time) *signinThrottle {
	t := &signinThrottle{now: now, accounts: map[string]*signinWindowCount{}, clients: map[string]*signinWindowCount{}}
	if _, err := rand.Read(t.key[:]); err != nil {
		panic(err)
	}
	return t
}

// keyOf is the keyed hash of a throttle's subject.
func (t *signinThrottle) keyOf(kind, subject string) string {
	m := hmac.New(sha256.New, t.key[:])
	m.Write([]byte(kind + "\x00" + subject))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// wait is how long sign-ins of account from client must wait (0: none).
func (t *signinThrottle) wait(account, client string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	w := max(t.waitOf(t.accounts, t.keyOf("account", account), signinAccountLimit, now),
		t.waitOf(t.clients, t.keyOf("client", client), signinClientLimit, now))
	return w
}

func (t *signinThrottle) waitOf(m map[string]*signinWindowCount, key string, limit int, now time.Time) time.Duration {
	c, ok := m[key]
	if !ok || c.failures < limit {
		return 0
	}
	end := c.start.Add(signinWindow)
	if !now.Before(end) {
		delete(m, key)
		return 0
	}
	return end.Sub(now)
}

// fail counts a failed sign-in of account from client.
func (t *signinThrottle) fail(account, client string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.count(t.accounts, t.keyOf("account", account), now)
	t.count(t.clients, t.keyOf("client", client), now)
}

func (t *signinThrottle) count(m map[string]*signinWindowCount, key string, now time.Time) {
	c, ok := m[key]
	if ok && !now.Before(c.start.Add(signinWindow)) {
		ok = false
	}
	if !ok {
		if len(m) >= signinMaxEntries {
			prune(m, now)
		}
		c = &signinWindowCount{start: now}
		m[key] = c
	}
	c.failures++
}

// prune drops ended windows of m, and the oldest when none has ended.
func prune(m map[string]*signinWindowCount, now time.Time) {
	oldest, first := "", time.Time{}
	for k, c := range m {
		if !now.Before(c.start.Add(signinWindow)) {
			delete(m, k)
			continue
		}
		if oldest == "" || c.start.Before(first) {
			oldest, first = k, c.start
		}
	}
	if len(m) >= signinMaxEntries && oldest != "" {
		delete(m, oldest)
	}
}

// succeed clears account's failures after a sign-in with the right
// password (the client's stay counted).
func (t *signinThrottle) succeed(account string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.accounts, t.keyOf("account", account))
}
