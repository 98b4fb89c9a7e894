package storage

import (
	"context"
	"database/sql"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/internal/dbtest"

	"github.com/tally-analytics/tally/storage/internal/engine"
)

func TestPostgresOpen(t *testing.T) {
	t.Parallel()
	url := dbtest.SharedDatabase(t, "")
	ctx := context.Background()
	for _, c := range []struct {
		durability Durability
		want       string
	}{{DurabilityPower, "on"}, {DurabilityProcess, "off"}} {
		db, err := Open(ctx, Options{DatabaseURL: url, Durability: c.durability, ReadConns: 2})
		if err != nil {
			t.Fatalf("%s: %v", c.durability, err)
		}
		var commit string
		if err := db.write.QueryRowContext(ctx, `SHOW synchronous_commit`).Scan(&commit); err != nil {
			t.Fatal(err)
		}
		if commit != c.want {
			t.Errorf("DURABILITY %s: got synchronous_commit %s, want %s", c.durability, commit, c.want)
		}
		if err := db.read.QueryRowContext(ctx, `SHOW synchronous_commit`).Scan(&commit); err != nil {
			t.Fatal(err)
		}
		if commit != "on" {
			t.Errorf("read pool: got synchronous_commit %s, want the server's default on", commit)
		}
		for name, pool := range map[string]*sql.DB{"writer": db.write, "read pool": db.read} {
			var jit string
			if err := pool.QueryRowContext(ctx, `SHOW jit`).Scan(&jit); err != nil {
				t.Fatal(err)
			}
			if jit != "off" {
				t.Errorf("%s: got jit %s, want off (docs/postgresql.md#reads-at-10m)", name, jit)
			}
			var workers string
			if err := pool.QueryRowContext(ctx, `SHOW max_parallel_workers_per_gather`).Scan(&workers); err != nil {
				t.Fatal(err)
			}
			if workers != "0" {
				t.Errorf("%s: got max_parallel_workers_per_gather %s, want 0 (docs/postgresql.md#reads-at-10m)", name, workers)
			}
		}
		if err := db.Ping(ctx); err != nil {
			t.Errorf("Ping: %v", err)
		}
		if open, _ := db.PoolStats(); open < 2 {
			t.Errorf("got %d connections open, want the writer's and a reader's at least", open)
		}
		if !db.eventPagesReady.Load() || db.oldLinks.Load() {
			t.Errorf("got eventPagesReady %v, oldLinks %v, want true, false", db.eventPagesReady.Load(), db.oldLinks.Load())
		}
		if got := db.d.Name(); got != "postgres" {
			t.Errorf("got dialect %s, want postgres", got)
		}
		if _, err := db.Backup(ctx, t.TempDir()+"/x.db", false); fault.As(err) == nil || fault.As(err).Code != fault.UnsupportedBackend {
			t.Errorf("Backup: got %v, want %s", err, fault.UnsupportedBackend)
		}
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if open, _ := db.PoolStats(); open != 0 {
			t.Errorf("after Close: got %d connections open, want 0", open)
		}
	}
}

// An operator's jit and max_parallel_workers_per_gather in DATABASE_URL
// win over Tally's (docs/postgresql.md#reads-at-10m).
func TestPostgresJITFromURL(t *testing.T) {
	t.Parallel()
	url := dbtest.SharedDatabase(t, "")
	ctx := context.Background()
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	db, err := Open(ctx, Options{DatabaseURL: url + sep + "jit=on&max_parallel_workers_per_gather=2", ReadConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var jit string
	if err := db.read.QueryRowContext(ctx, `SHOW jit`).Scan(&jit); err != nil {
		t.Fatal(err)
	}
	if jit != "on" {
		t.Errorf("got jit %s with jit=on in the URL, want on", jit)
	}
	var workers string
	if err := db.read.QueryRowContext(ctx, `SHOW max_parallel_workers_per_gather`).Scan(&workers); err != nil {
		t.Fatal(err)
	}
	if workers != "2" {
		t.Errorf("got max_parallel_workers_per_gather %s with 2 in the URL, want 2", workers)
	}
}

// TestPostgresMigrationsTwiceAtOnce starts two instances together on an
// empty database: both open, and each migration is applied and recorded
// once.
func TestPostgresMigrationsTwiceAtOnce(t *testing.T) {
	t.Parallel()
	url := dbtest.SharedDatabase(t, "")
	ctx := context.Background()
	var wg sync.WaitGroup
	dbs, errs := make([]*DB, 2), make([]error, 2)
	for i := range dbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dbs[i], errs[i] = Open(ctx, Options{DatabaseURL: url})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("instance %d: %v", i, err)
		}
		defer dbs[i].Close()
	}
	files, _ := fs.Glob(migrationPGFiles, pgMigrationsGlob)
	var rows, versions int
	if err := dbs[0].read.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(DISTINCT version) FROM schema_migrations`).Scan(&rows, &versions); err != nil {
		t.Fatal(err)
	}
	if rows != len(files) || versions != len(files) {
		t.Errorf("got %d rows of %d versions in schema_migrations, want %d of %d", rows, versions, len(files), len(files))
	}
}

// TestPostgresMigrationFailsWhole: a migration that fails leaves nothing
// of itself, and the database at the version before it; a newer
// database than the binary knows is refused.
func TestPostgresMigrationFailsWhole(t *testing.T) {
	t.Parallel()
	url := dbtest.SharedDatabase(t, "")
	ctx := context.Background()
	files := fstest.MapFS{
		"migrations_pg/0001_a.sql": {Data: []byte(`CREATE TABLE a (x integer); -- a ? in a comment
			INSERT INTO a VALUES (1);`)},
		"migrations_pg/0002_b.sql": {Data: []byte(`CREATE TABLE b (x integer); INSERT INTO nowhere VALUES (1);`)},
	}
	_, err := Open(ctx, Options{DatabaseURL: url, migrations: files})
	if err == nil || !strings.Contains(err.Error(), "0002_b.sql failed and was rolled back; the database stays at schema version 1") {
		t.Fatalf("got %v, want migration 0002 rolled back at version 1", err)
	}
	check, err := sql.Open(engine.PGDriverName, url)
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	var a, b bool
	if err := check.QueryRow(`SELECT to_regclass('a') IS NOT NULL, to_regclass('b') IS NOT NULL`).Scan(&a, &b); err != nil {
		t.Fatal(err)
	}
	if !a || b {
		t.Errorf("got table a %v, b %v, want a only", a, b)
	}
	if _, err := check.Exec(`INSERT INTO schema_migrations VALUES (9, '0009_future.sql', '')`); err != nil {
		t.Fatal(err)
	}
	delete(files, "migrations_pg/0002_b.sql")
	_, err = Open(ctx, Options{DatabaseURL: url, migrations: files})
	if err == nil || !strings.Contains(err.Error(), "schema version 9 is newer than this binary knows (1)") {
		t.Errorf("got %v, want version 9 refused", err)
	}
}

func TestPostgresStartupChecks(t *testing.T) {
	t.Parallel()
	ascii := dbtest.SharedDatabase(t, "ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
	_, err := Open(context.Background(), Options{DatabaseURL: ascii})
	if err == nil || !strings.Contains(err.Error(), "encoding is SQL_ASCII: Tally needs UTF8") {
		t.Errorf("SQL_ASCII database: got %v, want the encoding refused", err)
	}
	info, err := CheckPostgres(context.Background(), dbtest.SharedDatabase(t, ""))
	if err != nil || !strings.HasPrefix(info.Version, "15") || info.Schema != 0 || info.Known < 1 {
		t.Errorf("got %+v, %v, want version 15, schema 0 of at least 1", info, err)
	}
	for _, bad := range []string{"mysql://x@y/z", "postgres://%zz"} {
		_, err := Open(context.Background(), Options{DatabaseURL: bad})
		if err == nil || strings.Contains(err.Error(), "%zz") {
			t.Errorf("%s: got %v, want a refusal that does not repeat the URL", bad, err)
		}
	}
}

func TestDescribeDatabaseURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://tally:s3cret@db.example:5432/analytics?sslmode=require": "postgres db.example:5432/analytics",
		"postgresql://u@h/d":                         "postgres h/d",
		"postgres://:pw@h:1/db?":                     "postgres h:1/db",
		"postgres://u:pw@/db?host=/run/pg&port=5499": "postgres /run/pg:5499/db",
		"postgres://u:pw@/db":                        "postgres (default host)/db",
	} {
		if got := DescribeDatabaseURL(in); got != want {
			t.Errorf("%s: got %q, want %q", in, got, want)
		}
	}
}
