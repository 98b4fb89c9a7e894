// Package dbtest starts throw-away database servers for tests: Debian's
// postgresql and mariadb-server (.ci/run installs them), each in a
// temporary folder, on a free port of 127.0.0.1, as an unprivileged user
// (neither server starts as root), stopped at the test's cleanup. Outside
// CI a test is skipped when the binaries are missing; in CI it fails.
package dbtest

import (
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // the driver of StartMariaDB's check
	_ "github.com/jackc/pgx/v5/stdlib" // the driver of StartPostgres' check
)

// Where Debian's packages put the servers.
const (
	pgBin   = "/usr/lib/postgresql/15/bin"
	mariadb = "/usr/sbin/mariadbd"
)

// StartPostgres starts a PostgreSQL 15 cluster whose superuser is user
// (trust authentication, fsync off) and returns its URL, database
// postgres.
func StartPostgres(t testing.TB, user string) string {
	t.Helper()
	return StartPostgresServer(t, user).URL
}

// PostgresServer is a throw-away PostgreSQL cluster a test may stop and
// start again (on the same port and data), to see what clients do while
// their database is away.
type PostgresServer struct {
	// URL is the cluster's URL, database postgres.
	URL  string
	t    testing.TB
	dir  string
	args []string
	mu   sync.Mutex
	cmd  *exec.Cmd // nil while stopped
	logf *os.File
}

// StartPostgresWith is StartPostgres with settings (name=value) given to
// the server after fsync=off, so "fsync=on" makes a cluster that flushes
// as a user's does (the benchmarks' durable run).
func StartPostgresWith(t testing.TB, user string, settings ...string) string {
	t.Helper()
	return StartPostgresServer(t, user, settings...).URL
}

// StartPostgresServer is StartPostgresWith, returning the server.
func StartPostgresServer(t testing.TB, user string, settings ...string) *PostgresServer {
	t.Helper()
	need(t, pgBin+"/postgres")
	dir := tempDir(t)
	data := filepath.Join(dir, "data")
	os.Mkdir(data, 0o700)
	initdb := exec.Command(pgBin+"/initdb", "-D", data, "-U", user, "--auth=trust", "--no-sync", "-E", "UTF8")
	unprivileged(initdb, dir)
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	port := freePort(t)
	args := []string{"-D", data, "-p", strconv.Itoa(port), "-k", dir, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"}
	for _, setting := range settings {
		args = append(args, "-c", setting)
	}
	s := &PostgresServer{t: t, dir: dir, args: args,
		URL: fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable", user, port)}
	t.Cleanup(s.Stop)
	s.Start()
	return s
}

// Start starts the stopped server and waits until it answers.
func (s *PostgresServer) Start() {
	s.t.Helper()
	s.mu.Lock()
	if s.cmd != nil {
		s.mu.Unlock()
		return
	}
	cmd := exec.Command(pgBin+"/postgres", s.args...)
	logf, _ := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	cmd.Stdout, cmd.Stderr = logf, logf
	unprivileged(cmd, s.dir)
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		s.t.Fatal(err)
	}
	s.cmd, s.logf = cmd, logf
	s.mu.Unlock()
	db := waitFor(s.t, "pgx", s.URL, s.dir)
	db.Close()
}

// Stop stops the server in fast mode (PostgreSQL's SIGINT, pg_ctl's
// -m fast: its sessions are ended, as when a primary goes away) and
// waits for it to exit.
func (s *PostgresServer) Stop() { s.stop(syscall.SIGINT) }

// StopImmediately stops the server in immediate mode (PostgreSQL's
// SIGQUIT, pg_ctl's -m immediate: its processes end at once, without a
// checkpoint, as when the primary's machine fails; the next Start
// recovers from the WAL) and waits for it to exit.
func (s *PostgresServer) StopImmediately() { s.stop(syscall.SIGQUIT) }

func (s *PostgresServer) stop(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(sig)
	s.cmd.Wait()
	s.logf.Close()
	s.cmd, s.logf = nil, nil
}

// StartMariaDB starts a MariaDB server (root without a password, no grant
// tables) with an empty database named database, and returns its URL as
// mysql://root@127.0.0.1:PORT/DATABASE.
func StartMariaDB(t testing.TB, database string) string {
	t.Helper()
	need(t, mariadb)
	dir := tempDir(t)
	data := filepath.Join(dir, "data")
	// Its temporary tables in the test's own folder: two installs at once
	// in one /tmp collide on their names (tests run in parallel).
	tmp := "--tmpdir=" + dir
	install := exec.Command("/usr/bin/mariadb-install-db", "--no-defaults", "--datadir="+data, tmp, "--auth-root-authentication-method=normal", "--skip-test-db")
	unprivileged(install, dir)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	port := freePort(t)
	start(t, dir, mariadb, "--no-defaults", "--datadir="+data, "--port="+strconv.Itoa(port), "--bind-address=127.0.0.1",
		"--socket="+filepath.Join(dir, "mysql.sock"), "--pid-file="+filepath.Join(dir, "mysql.pid"), "--skip-grant-tables", "--skip-log-bin", tmp)
	db := waitFor(t, "mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/", port), dir)
	if _, err := db.Exec("CREATE DATABASE `" + database + "`"); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("mysql://root@127.0.0.1:%d/%s", port, database)
}

func need(t testing.TB, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing; .ci/run installs it", path)
		}
		t.Skipf("%s is missing (Debian's postgresql and mariadb-server packages; .ci/run installs them)", path)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// unprivileged runs cmd as nobody when the test runs as root, handing dir
// to nobody.
func unprivileged(cmd *exec.Cmd, dir string) {
	if os.Geteuid() != 0 {
		return
	}
	filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error { return os.Chown(p, 65534, 65534) })
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
}

// tempDir is a folder nobody may enter (t.TempDir's parent is root's only).
func tempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "tally-dbtest-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// start starts a database server and stops it at cleanup.
func start(t testing.TB, dir string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	logf, _ := os.Create(filepath.Join(dir, "server.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	unprivileged(cmd, dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		logf.Close()
	})
}

// waitFor waits until the server answers driver/dsn, for at most a minute.
func waitFor(t testing.TB, driver, dsn, dir string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	deadline := time.Now().Add(60 * time.Second)
	for db.Ping() != nil {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			t.Fatalf("the database server did not answer in 60 s:\n%s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return db
}
