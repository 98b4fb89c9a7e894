package storage

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// Every write that names a site re-checks it in its transaction. Here the
// site is deleted, and created again with its id in another workspace,
// after the caller looked it up: the stale write gets ErrSiteGone, writes
// nothing, and leaves the new site's rows alone.
func TestWritesRefuseADeletedSite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sys := Actor{Kind: ActorSystem}
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	user := "u1"
	subjectEvent := IngestEvent{ID: "00000000-0000-4000-8000-000000000001", SiteID: "web", Type: "pageview",
		AnonID: "a1", UserID: &user, TS: at, Raw: []byte(`{}`)}
	quarantined := Quarantined{ID: "q1", SiteID: "web", Payload: []byte(`{}`), Errors: `[]`}
	tests := []struct {
		name string
		// prepare gives the site (old or new) the rows the write acts on.
		prepare func(t *testing.T, db *DB)
		write   func(db *DB, stale *Site) error
		// left counts, after the write, the rows it must not have touched.
		left  string
		want  int
		audit string // the action a stale write must not audit
	}{
		{"create a webhook secret", nil,
			func(db *DB, stale *Site) error {
				_, _, err := db.CreateWebhookSecret(ctx, sys, stale, "payments")
				return err
			},
			`SELECT COUNT(*) FROM webhook_secrets WHERE site_id = 'web'`, 0, "webhook_secret.create"},
		{"revoke a webhook secret", func(t *testing.T, db *DB) {
			site, _ := db.Site("web")
			if _, _, err := db.CreateWebhookSecret(ctx, sys, site, "payments"); err != nil {
				t.Fatal(err)
			}
		},
			// The stale request names the newest secret's id: on SQLite the
			// new site's secret took the deleted one's rowid, on PostgreSQL
			// an identity never repeats, so the newest is the new site's.
			func(db *DB, stale *Site) error {
				var id int64
				if err := db.read.QueryRow(`SELECT COALESCE(MAX(rowid), 1) FROM webhook_secrets`).Scan(&id); err != nil {
					return err
				}
				return db.RevokeWebhookSecret(ctx, sys, stale, id)
			},
			`SELECT COUNT(*) FROM webhook_secrets WHERE site_id = 'web' AND revoked_at IS NULL`, 1, "webhook_secret.revoke"},
		{"finish a DLQ replay", func(t *testing.T, db *DB) {
			if _, err := db.Ingest(ctx, nil, []Quarantined{quarantined}, nil); err != nil {
				t.Fatal(err)
			}
		},
			func(db *DB, stale *Site) error {
				e := &DLQEntry{DLQRow: DLQRow{ID: "q1", SiteID: "web", ReceivedAt: FormatTime(at)}}
				_, err := db.FinishReplay(ctx, sys, stale, e, at, false)
				return err
			},
			`SELECT COUNT(*) FROM dlq WHERE site_id = 'web' AND id = 'q1'`, 1, "dlq.replay"},
		{"upsert a sourcemap", nil,
			func(db *DB, stale *Site) error {
				return db.UpsertSourcemap(ctx, stale, "1", "a.js", [][]byte{[]byte(`{}`)}, SourcemapLimits{})
			},
			`SELECT COUNT(*) FROM sourcemaps WHERE site_id = 'web'`, 0, ""},
		{"delete sourcemaps", func(t *testing.T, db *DB) {
			site, _ := db.Site("web")
			if err := db.UpsertSourcemap(ctx, site, "1", "a.js", [][]byte{[]byte(`{}`)}, SourcemapLimits{}); err != nil {
				t.Fatal(err)
			}
		},
			func(db *DB, stale *Site) error {
				_, _, err := db.DeleteSourcemaps(ctx, sys, stale, "1", "")
				return err
			},
			`SELECT COUNT(*) FROM sourcemaps WHERE site_id = 'web'`, 1, "sourcemap.delete"},
		{"export a subject", func(t *testing.T, db *DB) {
			if _, err := db.Ingest(ctx, []IngestEvent{subjectEvent}, nil, nil); err != nil {
				t.Fatal(err)
			}
		},
			func(db *DB, stale *Site) error {
				_, err := db.ExportSubject(ctx, sys, stale, Subject{UserID: user})
				return err
			},
			`SELECT COUNT(*) FROM events WHERE site_id = 'web'`, 1, "gdpr.export"},
		{"erase a subject", func(t *testing.T, db *DB) {
			if _, err := db.Ingest(ctx, []IngestEvent{subjectEvent}, nil, nil); err != nil {
				t.Fatal(err)
			}
		},
			func(db *DB, stale *Site) error {
				_, err := db.EraseSubject(ctx, sys, stale, Subject{UserID: user})
				return err
			},
			`SELECT COUNT(*) FROM events WHERE site_id = 'web'`, 1, "gdpr.delete"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := openTestDB(t, ctx, Options{Path: filepath.Join(t.TempDir(), "a.db"), Now: func() time.Time { return at }})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			old := withSites(t, db, "web")
			if tt.prepare != nil {
				tt.prepare(t, db)
			}
			stale, _ := db.Site("web")
			if err := db.DeleteSite(ctx, sys, old, "web"); err != nil {
				t.Fatal(err)
			}
			if err := tt.write(db, stale); !errors.Is(err, ErrSiteGone) {
				t.Fatalf("deleted site: got %v, want ErrSiteGone", err)
			}
			if n := count(t, db, tt.left); n != 0 {
				t.Fatalf("deleted site: %s got %d, want 0", tt.left, n)
			}
			withSites(t, db) // a workspace created in between moves nothing
			again := withSites(t, db, "web")
			if tt.prepare != nil {
				tt.prepare(t, db)
			}
			if err := tt.write(db, stale); !errors.Is(err, ErrSiteGone) {
				t.Fatalf("site created again in another workspace: got %v, want ErrSiteGone", err)
			}
			if n := count(t, db, tt.left); n != tt.want {
				t.Fatalf("site created again: %s got %d, want %d", tt.left, n, tt.want)
			}
			if n := count(t, db, `SELECT COUNT(*) FROM audit_log WHERE action = ?`, tt.audit); tt.audit != "" && n != 0 {
				t.Fatalf("got %d %s audit rows, want 0", n, tt.audit)
			}
			fresh, _ := db.Site("web")
			if fresh.WorkspaceID != again.ID {
				t.Fatalf("got site in workspace %s, want %s", fresh.WorkspaceID, again.ID)
			}
			if err := tt.write(db, fresh); err != nil {
				t.Fatalf("the live site: got %v, want the write to succeed", err)
			}
		})
	}
}

func count(t *testing.T, db *DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.read.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}
