package engine

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

func TestOpenSQLite(t *testing.T) {
	t.Parallel()
	good := fstest.MapFS{"m/0001_t.sql": {Data: []byte(`CREATE TABLE t (x INTEGER);`)}}
	bad := fstest.MapFS{"m/0001_t.sql": {Data: []byte(`CREATE TABLE (;`)}}
	for _, tt := range []struct {
		name    string
		files   fstest.MapFS
		wantErr string
	}{
		{"migrated", good, ""},
		{"a migration fails", bad, "syntax error"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "a.db")
			p, err := OpenSQLite(context.Background(), path, OpenOptions{ReadConns: 3, Durability: DurabilityPower,
				Migrations: Migrations{Files: tt.files, Glob: "m/*.sql"}, Now: time.Now})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || p.Write != nil || p.Read != nil {
					t.Fatalf("got %v, %+v, want an error with %q and no pools", err, p, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if got := p.Write.Stats().MaxOpenConnections; got != 1 {
				t.Errorf("got %d write connections, want 1: the single writer's", got)
			}
			if got := p.Read.Stats().MaxOpenConnections; got != 3 {
				t.Errorf("got %d read connections, want 3", got)
			}
			if _, err := p.Read.Exec(`INSERT INTO t VALUES (1)`); err == nil {
				t.Error("got a write through the read pool, want it refused (query_only)")
			}
			if _, err := p.Write.Exec(`INSERT INTO t VALUES (1)`); err != nil {
				t.Errorf("got %v writing through the write connection, want none", err)
			}
		})
	}
}
