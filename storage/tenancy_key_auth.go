package storage

import (
	"context"
	"crypto/subtle"
	"encoding/hex"
	"strings"
	"sync"
	"time"
)

// lastUsedEvery throttles last_used_at writes: an authenticated read only
// becomes a write when the stored value is this much out of date.
const lastUsedEvery = time.Minute

// Authenticate returns the active key whose plaintext is given. It reads
// only memory, except on PostgreSQL while the listener has been down
// longer than listenerGrace: then the database, so that another
// instance's revocation is never missed (docs/postgresql.md#on-postgresql). The
// map lookup is by hash, and the final comparison of the hashes is
// constant-time. err is set only when the database could not be asked
// (503 unavailable when it cannot be reached,
// docs/postgresql.md#running-n-instances-on-postgresql): a valid key is never
// answered as unknown for that.
func (db *DB) Authenticate(plaintext string) (*APIKey, bool, error) {
	if !strings.HasPrefix(plaintext, "sk_") {
		return nil, false, nil
	}
	sum := hashKey(plaintext)
	var k *APIKey
	var ok bool
	if db.coord().listening() {
		db.tenants.mu.RLock()
		k, ok = db.keysByHash[hex.EncodeToString(sum)]
		db.tenants.mu.RUnlock()
	} else {
		var err error
		if k, ok, err = db.authenticateInDB(sum); err != nil {
			return nil, false, err
		}
	}
	if !ok || subtle.ConstantTimeCompare(k.hash, sum) != 1 {
		return nil, false, nil
	}
	return k, true, nil
}

// keyUses holds when each key was last used, and when that was last
// written to the database. It has a lock of its own: every authenticated
// API request records a use, and under the tenants' write lock that would
// queue behind, and then hold up, the read lock every intake request takes
// to check its credential.
type keyUses struct {
	mu    sync.Mutex
	last  map[string]time.Time // key id → latest use
	saved map[string]time.Time // key id → the use last written
}

// use records a use of key id at now and reports whether the stored value
// is due to be rewritten.
func (u *keyUses) use(id string, now time.Time) (due bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.last == nil {
		u.last, u.saved = map[string]time.Time{}, map[string]time.Time{}
	}
	u.last[id] = now
	if now.Sub(u.saved[id]) < lastUsedEvery {
		return false
	}
	u.saved[id] = now
	return true
}

// latest returns the latest recorded use of key id, if any.
func (u *keyUses) latest(id string) (time.Time, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	t, ok := u.last[id]
	return t, ok
}

// TouchKey records a use of key. The stored last_used_at is rewritten at
// most once a minute per key, off the request's path, so authenticated
// reads do not each become writes.
func (db *DB) TouchKey(k *APIKey) {
	now := db.now()
	if !db.tenants.uses.use(k.ID, now) {
		return
	}
	go func() {
		// Best effort: a full queue or shutdown skips this write, and the
		// next use after a minute tries again.
		_ = db.writer.submit(context.Background(), 1, func(tx *writeTx) error {
			_, err := tx.Exec(`UPDATE api_keys SET last_used_at = ? WHERE id = ? AND revoked_at IS NULL`, FormatTime(now), k.ID)
			return err
		})
	}()
}
