package storage

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestTouchKeyLeavesTheTenantLockAlone guards that recording a key's use
// never waits for the tenants' lock, which every intake request takes to
// check its credential: a use must go through while that lock is held.
func TestTouchKeyLeavesTheTenantLockAlone(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	ws := withSites(t, db)
	key, plaintext, err := db.CreateKey(context.Background(), Actor{Kind: ActorSystem}, ws, "ci", []string{ScopeQueryRead})
	if err != nil {
		t.Fatal(err)
	}
	k, ok, _ := db.Authenticate(plaintext)
	if !ok || k.ID != key.ID {
		t.Fatalf("got %v, %v authenticating a new key, want it", k, ok)
	}

	db.tenants.mu.RLock() // as a credential check in flight does
	touched := make(chan struct{})
	go func() {
		db.TouchKey(k)
		close(touched)
	}()
	select {
	case <-touched:
	case <-time.After(5 * time.Second):
		db.tenants.mu.RUnlock()
		<-touched
		t.Fatal("TouchKey waited for the tenants' lock")
	}
	db.tenants.mu.RUnlock()

	list, err := db.Keys(context.Background(), ws.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].LastUsedAt == nil {
		t.Fatalf("got keys %+v, want the one key with its last use", list)
	}
}

// TestKeyUsesThrottle: a key's use is due to be written when its last
// written use is a minute old or more, and every use is the latest.
func TestKeyUsesThrottle(t *testing.T) {
	t.Parallel()
	var u keyUses
	t0 := time.Date(2026, 1, 31, 9, 5, 0, 0, time.UTC)
	for _, tt := range []struct {
		id    string
		after time.Duration
		due   bool
	}{
		{"k", 0, true},
		{"k", 30 * time.Second, false},
		{"other", 30 * time.Second, true},
		{"k", 59 * time.Second, false},
		{"k", 61 * time.Second, true},
		{"k", 90 * time.Second, false},
	} {
		now := t0.Add(tt.after)
		if got := u.use(tt.id, now); got != tt.due {
			t.Errorf("%s at +%s: got due %v, want %v", tt.id, tt.after, got, tt.due)
		}
		if got, _ := u.latest(tt.id); !got.Equal(now) {
			t.Errorf("%s at +%s: got latest %s, want it", tt.id, tt.after, got)
		}
	}
}
