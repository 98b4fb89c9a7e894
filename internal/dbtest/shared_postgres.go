package dbtest

import (
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// SharedUser is the superuser of the shared cluster.
const SharedUser = "tally"

// shared is the PostgreSQL cluster this test process starts on first use
// of SharedDatabase and stops at its end (Main): a cluster of its own per
// test cost an initdb and a start, about 1.5 CPU-s each, for some thirty
// tests of storage alone (docs/development.md#test-run-times).
var shared struct {
	mu    sync.Mutex
	main  bool // Main runs, and so stops the cluster at the end
	url   string
	dir   string
	cmd   *exec.Cmd
	admin *sql.DB
	err   error
}

// SharedCluster returns the URL (database postgres, superuser SharedUser)
// of the PostgreSQL cluster shared by this test process's tests, starting
// it on first use. A test on it keeps to databases of its own
// (SharedDatabase) and to roles that every test may share; a test that
// stops its server, or needs settings of its own, starts its own
// (StartPostgresServer). Outside Main (a package whose TestMain does not
// call it, which would not stop the cluster), each call starts a cluster
// for t, stopped at its cleanup. Missing binaries skip t, as
// StartPostgres does.
func SharedCluster(t testing.TB) string {
	t.Helper()
	need(t, pgBin+"/postgres")
	shared.mu.Lock()
	if !shared.main {
		shared.mu.Unlock()
		return StartPostgresServer(t, SharedUser, "max_connections=300").URL
	}
	defer shared.mu.Unlock()
	if shared.url == "" && shared.err == nil {
		shared.err = startShared()
	}
	if shared.err != nil {
		t.Fatalf("dbtest: the shared PostgreSQL cluster: %v", shared.err)
	}
	return shared.url
}

// SharedDatabase creates a database of t's own on the shared cluster
// (options after CREATE DATABASE name, such as ENCODING) and returns its
// URL; it is dropped at t's cleanup, its sessions ended.
func SharedDatabase(t testing.TB, options string) string {
	t.Helper()
	base := SharedCluster(t)
	admin, own, err := sharedAdmin(base)
	if err != nil {
		t.Fatal(err)
	}
	if own {
		t.Cleanup(func() { admin.Close() })
	}
	name := "s_" + randomHex(6)
	if _, err := admin.Exec(`CREATE DATABASE ` + name + ` ` + options); err != nil {
		t.Fatalf("dbtest: create database: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`); err != nil {
			t.Errorf("dbtest: drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// sharedAdmin is the connection that creates and drops the databases of
// the cluster at base; own when it is a test's own cluster (outside
// Main), whose connection the caller closes.
func sharedAdmin(base string) (db *sql.DB, own bool, err error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if base == shared.url && shared.admin != nil {
		return shared.admin, false, nil
	}
	if db, err = sql.Open("pgx", base); err != nil {
		return nil, false, err
	}
	db.SetMaxIdleConns(2)
	if base != shared.url {
		return db, true, nil
	}
	shared.admin = db
	return db, false, nil
}

// startShared initdbs and starts the shared cluster, as
// StartPostgresServer does, but for the process rather than a test.
// max_connections is raised: tests run four at once, each with a few
// pools.
func startShared() error {
	dir, err := os.MkdirTemp("", "tally-dbtest-shared-")
	if err != nil {
		return err
	}
	os.Chmod(dir, 0o755)
	shared.dir = dir
	data := filepath.Join(dir, "data")
	os.Mkdir(data, 0o700)
	initdb := exec.Command(pgBin+"/initdb", "-D", data, "-U", SharedUser, "--auth=trust", "--no-sync", "-E", "UTF8")
	unprivileged(initdb, dir)
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(pgBin+"/postgres", "-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=300")
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	unprivileged(cmd, dir)
	// A test binary killed before Main stops the cluster (go test's
	// -timeout) takes it along; Go sets the signal after the change of
	// user, which would clear it.
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGINT
	if err := cmd.Start(); err != nil {
		return err
	}
	shared.cmd = cmd
	u := fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable", SharedUser, port)
	db, err := sql.Open("pgx", u)
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(60 * time.Second)
	for db.Ping() != nil {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			return fmt.Errorf("the server did not answer in 60 s:\n%s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	shared.url = u
	return nil
}

// stopShared stops the shared cluster (fast mode) and removes its
// folder: Main calls it when the tests are done.
func stopShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.admin != nil {
		shared.admin.Close()
	}
	if shared.cmd != nil {
		shared.cmd.Process.Signal(syscall.SIGINT)
		shared.cmd.Wait()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	shared.admin, shared.cmd, shared.dir, shared.url, shared.err = nil, nil, "", "", nil
}
