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
