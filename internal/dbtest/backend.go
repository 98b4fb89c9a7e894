package dbtest

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// The environment that selects the backend (docs/development.md#both-backends).
const (
	// URLEnv names a PostgreSQL server (any database on it; the tests
	// create and drop their own) whose presence makes Main run every test
	// twice.
	URLEnv = "TEST_DATABASE_URL"
	// BackendEnv is "postgres" in the PostgreSQL run; "sqlite" runs
	// SQLite only even when URLEnv is set.
	BackendEnv = "TALLY_TEST_BACKEND"
	// PendingEnv set to "run" runs the pending tests too, to see which of
	// them pass now (and shrink the list).
	PendingEnv = "TALLY_TEST_PENDING"
	// SummaryEnv names a file that each package's PostgreSQL run appends
	// its line of counts to.
	SummaryEnv = "TALLY_TEST_SUMMARY"
)

// Postgres reports whether this test process runs on PostgreSQL: the
// PostgreSQL run of Main, or a test binary started by hand with both
// TALLY_TEST_BACKEND=postgres and TEST_DATABASE_URL.
func Postgres() bool {
	return os.Getenv(BackendEnv) == "postgres" && os.Getenv(URLEnv) != ""
}

// Backend is "postgres" when Postgres, else "sqlite".
func Backend() string {
	if Postgres() {
		return "postgres"
	}
	return "sqlite"
}

// skipped records the tests that skipped themselves as SQLite-only, for
// the PostgreSQL run's summary line.
var skipped struct {
	mu    sync.Mutex
	names []string
}

// OnlySQLite skips t on PostgreSQL, saying why: the test is about SQLite
// itself (its file, WAL, pragmas, conversions of old layouts).
func OnlySQLite(t testing.TB, why string) {
	t.Helper()
	if !Postgres() {
		return
	}
	skipped.mu.Lock()
	skipped.names = append(skipped.names, t.Name())
	skipped.mu.Unlock()
	t.Skip("SQLite only: " + why)
}

// OnlyPostgres skips t on SQLite, saying why.
func OnlyPostgres(t testing.TB, why string) {
	t.Helper()
	if !Postgres() {
		t.Skip("PostgreSQL only: " + why)
	}
}

// cluster is this process's connection to TEST_DATABASE_URL's server and
// the template database it migrated once.
var cluster struct {
	mu       sync.Mutex
	admin    *sql.DB
	template string
	err      error
	byKey    map[string]string // test name and key → database name
}

// DatabaseURL returns TEST_DATABASE_URL with its database replaced by name.
func DatabaseURL(name string) (string, error) {
	u, err := url.Parse(os.Getenv(URLEnv))
	if err != nil {
		return "", fmt.Errorf("%s: %v", URLEnv, err)
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String(), nil
}

// DatabaseFor is the DATABASE_URL a test's storage at path opens: on
// PostgreSQL a Fresh database per test and per path (a test that closes
// its SQLite file and opens it again finds its data; every ":memory:" is
// a database of its own), on SQLite "" (path is used as is).
func DatabaseFor(t testing.TB, path string, migrate func(url string) error) string {
	t.Helper()
	if !Postgres() {
		return ""
	}
	key := path
	if key == ":memory:" {
		key = ""
	}
	return Fresh(t, key, migrate)
}

// Fresh returns the URL of a new PostgreSQL database for t, dropped at
// t's cleanup (its leftover connections terminated first). It is a copy
// of a template that migrate (opening and closing storage on its URL)
// prepared once per process, so a test pays for a copy, not for the
// migrations. Calls with the same non-empty key within one top-level test
// (its subtests included) return the same database: a test that closes
// its SQLite file and opens it again finds its data, and two files of one
// test are two databases.
func Fresh(t testing.TB, key string, migrate func(url string) error) string {
	t.Helper()
	cluster.mu.Lock()
	defer cluster.mu.Unlock()
	top, _, _ := strings.Cut(t.Name(), "/")
	mapKey := top + "\x00" + key
	if name, ok := cluster.byKey[mapKey]; ok && key != "" {
		u, _ := DatabaseURL(name)
		return u
	}
	if err := ensureTemplate(migrate); err != nil {
		t.Fatalf("dbtest: PostgreSQL template: %v", err)
	}
	name := "t_" + processTag() + "_" + randomHex(6)
	if _, err := cluster.admin.Exec(`CREATE DATABASE ` + name + ` TEMPLATE ` + cluster.template); err != nil {
		t.Fatalf("dbtest: create database: %v", err)
	}
	if cluster.byKey == nil {
		cluster.byKey = map[string]string{}
	}
	if key != "" {
		cluster.byKey[mapKey] = name
	}
	t.Cleanup(func() {
		cluster.mu.Lock()
		if cluster.byKey[mapKey] == name {
			delete(cluster.byKey, mapKey)
		}
		cluster.mu.Unlock()
		if err := drop(name); err != nil {
			t.Errorf("dbtest: drop database %s: %v", name, err)
		}
	})
	u, err := DatabaseURL(name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// ensureTemplate creates and migrates this process's template database
// once. Its name is this process's own, so test binaries running at once
// (go test ./... runs packages in parallel) never share or race on it.
func ensureTemplate(migrate func(url string) error) error {
	if cluster.template != "" || cluster.err != nil {
		return cluster.err
	}
	cluster.err = func() error {
		if cluster.admin == nil {
			db, err := sql.Open("pgx", os.Getenv(URLEnv))
			if err != nil {
				return err
			}
			db.SetMaxIdleConns(2)
			cluster.admin = db
		}
		dropStale()
		name := "t_tpl_" + processTag() + "_" + randomHex(4)
		if _, err := cluster.admin.Exec(`CREATE DATABASE ` + name); err != nil {
			return err
		}
		u, err := DatabaseURL(name)
		if err != nil {
			return err
		}
		if err := migrate(u); err != nil {
			drop(name)
			return fmt.Errorf("migrating it: %v", err)
		}
		// No one may connect to it any more: CREATE DATABASE ... TEMPLATE
		// refuses a template that has sessions.
		if _, err := cluster.admin.Exec(`ALTER DATABASE ` + name + ` WITH ALLOW_CONNECTIONS false`); err != nil {
			return err
		}
		if err := terminate(name); err != nil {
			return err
		}
		cluster.template = name
		return nil
	}()
	return cluster.err
}

// processTag is in the name of every database this process creates: a
// tag of the host and the process id, so that a later test binary can
// tell which databases a dead one left behind (dropStale).
func processTag() string {
	return hostTag() + "_" + strconv.Itoa(os.Getpid())
}

// hostTag is 6 hex digits of the host's name: pids of other machines
// sharing the server say nothing here.
func hostTag() string {
	host, _ := os.Hostname()
	h := fnv.New32a()
	h.Write([]byte(host))
	return fmt.Sprintf("%06x", h.Sum32()&0xffffff)
}

// testDatabase matches the names processTag makes: host tag, pid.
var testDatabase = regexp.MustCompile(`^t_(?:tpl_)?([0-9a-f]{6})_([0-9]+)_[0-9a-f]+$`)

// dropStale drops the test databases and templates that test binaries of
// this host left behind when they were killed mid-run (their cleanups
// never ran): those whose process is gone. Databases of live processes,
// of other hosts and of names it does not know are left alone. A failure
// is reported and the run goes on: stale databases cost room, not
// correctness.
func dropStale() {
	rows, err := cluster.admin.Query(`SELECT datname FROM pg_database WHERE datname LIKE 't\_%'`)
	if err != nil {
		fmt.Fprintf(os.Stderr, "dbtest: listing stale test databases: %v\n", err)
		return
	}
	var stale []string
	for rows.Next() {
		var name string
		if rows.Scan(&name) != nil {
			continue
		}
		m := testDatabase.FindStringSubmatch(name)
		if m == nil || m[1] != hostTag() {
			continue
		}
		if pid, err := strconv.Atoi(m[2]); err == nil && pid != os.Getpid() && !alive(pid) {
			stale = append(stale, name)
		}
	}
	rows.Close()
	for _, name := range stale {
		if err := drop(name); err != nil {
			fmt.Fprintf(os.Stderr, "dbtest: dropping stale test database %s: %v\n", name, err)
		}
	}
}

// alive reports whether process pid exists (signal 0 checks, sends
// nothing); one of another user's counts as alive.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// terminate ends the sessions still connected to database name.
func terminate(name string) error {
	_, err := cluster.admin.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, name)
	return err
}

// drop drops database name, ending its sessions first.
func drop(name string) error {
	if err := terminate(name); err != nil {
		return err
	}
	_, err := cluster.admin.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`)
	return err
}

// DropTemplate drops this process's template database, if Fresh made
// one: the end of a test binary whose TestMain is not Main.
func DropTemplate() error { return dropTemplate() }

// dropTemplate drops this process's template at its end.
func dropTemplate() error {
	cluster.mu.Lock()
	defer cluster.mu.Unlock()
	if cluster.admin == nil {
		return nil
	}
	var err error
	if cluster.template != "" {
		err = drop(cluster.template)
	}
	cluster.admin.Close()
	cluster.admin, cluster.template, cluster.byKey = nil, "", nil
	return err
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return strings.ToLower(hex.EncodeToString(b))
}

// resetCluster forgets the connection and template (for this package's
// tests, which start servers of their own).
func resetCluster() {
	cluster.mu.Lock()
	defer cluster.mu.Unlock()
	if cluster.admin != nil {
		cluster.admin.Close()
	}
	cluster.admin, cluster.template, cluster.err, cluster.byKey = nil, "", nil, nil
}
