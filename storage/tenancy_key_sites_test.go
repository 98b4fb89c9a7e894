package storage

import (
	"database/sql"
	"encoding/hex"
	"path/filepath"
	"testing"
)

// A key made before migration 0009 has no sites column value: after the
// upgrade it still reaches every site of its workspace.
func TestKeysFromBeforeSiteRestrictionsReachEverySite(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "migrates an old SQLite layout")
	path := filepath.Join(t.TempDir(), "a.db")
	if err := migrateOnly(t, path, embeddedMigrations(t, "0008")); err != nil {
		t.Fatal(err)
	}
	old, err := sql.Open("sqlite", FileURI(path))
	if err != nil {
		t.Fatal(err)
	}
	const plaintext = "sk_w_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	if _, err := old.Exec(`INSERT INTO workspaces(id, name, slug, created_at) VALUES ('w', 'W', 'w', '2026-01-01T00:00:00.000Z');
		INSERT INTO sites(id, workspace_id, name, created_at) VALUES ('web', 'w', 'Web', '2026-01-01T00:00:00.000Z');
		INSERT INTO api_keys(id, workspace_id, label, scopes, key_hash, created_at)
		VALUES ('k', 'w', 'old', '["admin"]', ?, '2026-01-01T00:00:00.000Z')`, hex.EncodeToString(hashKey(plaintext))); err != nil {
		t.Fatal(err)
	}
	old.Close()

	db := openTest(t, path)
	k, ok, _ := db.Authenticate(plaintext)
	if !ok {
		t.Fatal("the old key no longer authenticates")
	}
	if k.Restricted() || !k.AllowsSite("web") {
		t.Errorf("got sites %v for a key from before migration 0009, want every site (nil)", k.Sites)
	}
}
