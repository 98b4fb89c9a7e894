package dbtest

import (
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

func TestFreshDatabases(t *testing.T) {
	url := StartPostgres(t, "postgres")
	t.Setenv(URLEnv, url)
	t.Setenv(BackendEnv, "postgres")
	resetCluster()
	t.Cleanup(func() { dropTemplate(); resetCluster() })
	migrations := 0
	migrate := func(u string) error {
		migrations++
		db, err := sql.Open("pgx", u)
		if err != nil {
			return err
		}
		defer db.Close()
		_, err = db.Exec(`CREATE TABLE migrated (n int)`)
		return err
	}
	admin, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var names []string
	t.Run("one test", func(t *testing.T) {
		a, again, b := Fresh(t, "a.db", migrate), Fresh(t, "a.db", migrate), Fresh(t, "b.db", migrate)
		memory, memory2 := Fresh(t, "", migrate), Fresh(t, "", migrate)
		if a != again {
			t.Errorf("got %s and %s for one key, want the same database", a, again)
		}
		t.Run("a subtest", func(t *testing.T) {
			if sub := Fresh(t, "a.db", migrate); sub != a {
				t.Errorf("got %s in a subtest, want its test's %s", sub, a)
			}
		})
		seen := map[string]bool{}
		for _, u := range []string{a, b, memory, memory2} {
			if seen[u] {
				t.Errorf("got %s twice for different keys, want a database each", u)
			}
			seen[u] = true
			db, err := sql.Open("pgx", u)
			if err != nil {
				t.Fatal(err)
			}
			// A connection left open must not keep the database from
			// being dropped.
			if _, err := db.Exec(`INSERT INTO migrated VALUES (1)`); err != nil {
				t.Errorf("%s: %v, want the template's table", u, err)
			}
			names = append(names, u[strings.LastIndex(u, "/")+1:strings.Index(u, "?")])
		}
	})
	if migrations != 1 {
		t.Errorf("got %d migrations of the template, want 1", migrations)
	}
	for _, name := range names {
		var n int
		if err := admin.QueryRow(`SELECT COUNT(*) FROM pg_database WHERE datname = $1`, name).Scan(&n); err != nil || n != 0 {
			t.Errorf("database %s: got %d (%v) after its test, want it dropped", name, n, err)
		}
	}
	if err := dropTemplate(); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := admin.QueryRow(`SELECT COUNT(*) FROM pg_database WHERE datname LIKE 't\_%'`).Scan(&left); err != nil || left != 0 {
		t.Errorf("got %d (%v) test databases after the run, want the template dropped too", left, err)
	}
}

func TestChildArgs(t *testing.T) {
	pending := []string{"TestA", "TestB"}
	tests := []struct {
		name string
		set  []string
		want []string
		err  string
	}{
		{"pending become -skip", []string{"-test.run=X"}, []string{"-test.run=X", "-test.skip=^(TestA|TestB)$"}, ""},
		{"a -skip is kept", []string{"-test.skip=TestC|TestD"}, []string{"-test.skip=(?:TestC|TestD)|^(TestA|TestB)$"}, ""},
		{"a -skip of subtests cannot take them", []string{"-test.skip=TestC/x"}, nil, "names subtests"},
		{"what is left of the timeout", []string{"-test.timeout=10m0s"}, []string{"-test.timeout=6m0s", "-test.skip=^(TestA|TestB)$"}, ""},
		{"at least 30 s", []string{"-test.timeout=4m0s"}, []string{"-test.timeout=30s", "-test.skip=^(TestA|TestB)$"}, ""},
		{"no timeout stays none", []string{"-test.timeout=0s"}, []string{"-test.timeout=0s", "-test.skip=^(TestA|TestB)$"}, ""},
		{"the go command's log is not shared", []string{"-test.testlogfile=/x/testlog.txt", "-test.v=true"}, []string{"-test.v=true", "-test.skip=^(TestA|TestB)$"}, ""},
		{"profiles of their own", []string{"-test.cpuprofile=cpu.out", "-test.coverprofile=c.out"}, []string{"-test.cpuprofile=cpu.out.postgres", "-test.coverprofile=c.out.postgres", "-test.skip=^(TestA|TestB)$"}, ""},
	}
	for _, tt := range tests {
		got, err := childArgs(tt.set, []string{"arg"}, pending, 4*time.Minute)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: got %v, want an error containing %q", tt.name, err, tt.err)
			}
			continue
		}
		want := strings.Join(append(tt.want, "arg"), " ")
		if err != nil || strings.Join(got, " ") != want {
			t.Errorf("%s: got %q (%v), want %q", tt.name, got, err, want)
		}
	}
}

func TestReadPending(t *testing.T) {
	tests := []struct {
		name, file string
		want       string
		err        string
	}{
		{"names and reasons", "# comment\n\nTestA  write path (Part B): why\nTestB read path (Part C)\nFuzzC read path (Part C)\n", "TestA TestB FuzzC", ""},
		{"no reason", "TestA\n", "", "has no reason"},
		{"not a test", "BenchmarkA reason\n", "", "not a top-level test"},
		{"a subtest", "TestA/x reason\n", "", "not a top-level test"},
		{"twice", "TestA r\nTestA r\n", "", "listed twice"},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), "p.txt")
		os.WriteFile(path, []byte(tt.file), 0o600)
		got, err := ReadPending(path)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: got %v, want an error containing %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil || strings.Join(got, " ") != tt.want {
			t.Errorf("%s: got %q (%v), want %q", tt.name, got, err, tt.want)
		}
	}
	if got, err := ReadPending(filepath.Join(t.TempDir(), "none.txt")); got != nil || err != nil {
		t.Errorf("got %q (%v) for a missing list, want an empty list", got, err)
	}
}

func TestPrefixWriter(t *testing.T) {
	var out strings.Builder
	w := &prefixWriter{w: &out, prefix: "[p] "}
	for _, s := range []string{"a", "b\nc\n", "", "d\ne"} {
		w.Write([]byte(s))
	}
	w.Flush()
	if want := "[p] ab\n[p] c\n[p] d\n[p] e\n"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}

func TestTopLevel(t *testing.T) {
	for pattern, want := range map[string]string{
		"TestA": "TestA", "TestA/sub": "TestA", "Test(A/B)/c": "Test(A/B)", `Test\/x/y`: `Test\/x`, "[/]x/y": "[/]x",
	} {
		if got := topLevel(pattern); got != want {
			t.Errorf("topLevel(%q): got %q, want %q", pattern, got, want)
		}
	}
}

// TestHelperRun is run by TestMainRunsBothBackends in a process of its
// own; it fails on PostgreSQL when DBTEST_HELPER=fail-postgres.
func TestHelperRun(t *testing.T) {
	mode := os.Getenv("DBTEST_HELPER")
	if mode == "" {
		t.Skip("run by TestMainRunsBothBackends")
	}
	t.Logf("backend %s", Backend())
	if mode == "fail-postgres" && Postgres() {
		t.Fatal("failing on PostgreSQL")
	}
}

func TestHelperSQLiteOnly(t *testing.T) {
	if os.Getenv("DBTEST_HELPER") == "" {
		t.Skip("run by TestMainRunsBothBackends")
	}
	OnlySQLite(t, "about SQLite")
}

func TestHelperPending(t *testing.T) {
	if os.Getenv("DBTEST_HELPER") == "" {
		t.Skip("run by TestMainRunsBothBackends")
	}
	if Postgres() {
		t.Fatal("a pending test ran on PostgreSQL")
	}
}

func TestMainRunsBothBackends(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "testdata"), 0o755)
	os.WriteFile(filepath.Join(dir, PendingFile), []byte("TestHelperPending  fails on PostgreSQL (Part B)\n"), 0o600)
	tests := []struct {
		name, mode, url string
		backend         string // TALLY_TEST_BACKEND
		code            int
		want, not       []string
	}{
		{"both pass", "pass", "postgres://unused/x", "", 0,
			[]string{"backend sqlite", "[postgres]     backend_test.go", "backend postgres", "[postgres] dbtest: 1 tests ran, 1 skipped as SQLite-only, 1 skipped as pending"},
			[]string{"a pending test ran"}},
		{"PostgreSQL fails", "fail-postgres", "postgres://unused/x", "", 1,
			[]string{"backend sqlite", "[postgres]     backend_test.go", "failing on PostgreSQL", "[postgres] --- FAIL: TestHelperRun"}, nil},
		{"without the URL, once", "fail-postgres", "", "", 0,
			[]string{"backend sqlite"}, []string{"[postgres]"}},
		{"TALLY_TEST_BACKEND=sqlite, once", "fail-postgres", "postgres://unused/x", "sqlite", 0,
			[]string{"backend sqlite"}, []string{"[postgres]"}},
	}
	for _, tt := range tests {
		cmd := exec.Command(exe, "-test.run=^TestHelper", "-test.v")
		cmd.Dir = dir
		summaries := filepath.Join(t.TempDir(), "summary.txt")
		cmd.Env = append(os.Environ(), "DBTEST_HELPER="+tt.mode, URLEnv+"="+tt.url, BackendEnv+"="+tt.backend, SummaryEnv+"="+summaries)
		out, err := cmd.CombinedOutput()
		if b, _ := os.ReadFile(summaries); tt.url != "" && tt.backend == "" && !strings.HasPrefix(string(b), "[postgres] dbtest: 1 tests ran") {
			t.Errorf("%s: got %q in %s, want the line of counts", tt.name, b, SummaryEnv)
		}
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tt.code {
			t.Errorf("%s: got exit %d, want %d:\n%s", tt.name, code, tt.code, out)
		}
		for _, w := range tt.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s: got output without %q:\n%s", tt.name, w, out)
			}
		}
		for _, w := range tt.not {
			if strings.Contains(string(out), w) {
				t.Errorf("%s: got output with %q, want none:\n%s", tt.name, w, out)
			}
		}
	}
}

func TestPendingProblems(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "testdata"), 0o755)
	os.WriteFile(filepath.Join(dir, "a_test.go"), []byte("package a\n\nimport \"testing\"\n\nfunc TestThere(t *testing.T) {}\n\nfunc FuzzThere(f *testing.F) {}\n\nfunc TestMain(m *testing.M) {}\n\ntype x struct{}\n\nfunc (x) TestMethod(t *testing.T) {}\n"), 0o600)
	os.WriteFile(filepath.Join(dir, PendingFile), []byte("TestThere  reason (Part B)\nFuzzThere reason (Part B)\nTestGone  reason (Part C)\nTestMethod reason (Part C)\nTestMain reason\n"), 0o600)
	got, err := pendingProblems(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"TestGone", "TestMethod", "TestMain"}
	if len(got) != len(want) {
		t.Fatalf("got %q, want problems naming %q", got, want)
	}
	for i, w := range want {
		if !strings.Contains(got[i], " "+w+":") {
			t.Errorf("got %q, want it to name %s", got[i], w)
		}
	}
}

// TestStaleDatabasesDropped: making its template, a test binary drops the
// test databases and templates of this host's dead test binaries, and
// leaves those of live ones, of other hosts and of unknown names.
func TestStaleDatabasesDropped(t *testing.T) {
	url := StartPostgres(t, "postgres")
	t.Setenv(URLEnv, url)
	t.Setenv(BackendEnv, "postgres")
	resetCluster()
	t.Cleanup(func() { dropTemplate(); resetCluster() })
	admin, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dead, live := strconv.Itoa(gone.Process.Pid), strconv.Itoa(os.Getppid())
	otherHost := "000000"
	if hostTag() == otherHost {
		otherHost = "000001"
	}
	want := map[string]bool{
		"t_" + hostTag() + "_" + dead + "_0a1b2c":     false,
		"t_tpl_" + hostTag() + "_" + dead + "_0a1b":   false,
		"t_" + hostTag() + "_" + live + "_0a1b2c":     true,
		"t_tpl_" + hostTag() + "_" + live + "_0a1b":   true,
		"t_" + otherHost + "_" + dead + "_0a1b2c":     true,
		"t_0123456789abcdef":                          true, // made before names carried a pid
		"t_" + hostTag() + "_" + dead + "_notours_xx": true,
	}
	for name := range want {
		if _, err := admin.Exec(`CREATE DATABASE "` + name + `"`); err != nil {
			t.Fatal(err)
		}
	}
	// A connection left open must not keep a stale database.
	left, err := sql.Open("pgx", strings.Replace(url, "/postgres?", "/t_"+hostTag()+"_"+dead+"_0a1b2c?", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer left.Close()
	if err := left.Ping(); err != nil {
		t.Fatal(err)
	}
	Fresh(t, "", func(string) error { return nil })
	for name, kept := range want {
		var n int
		if err := admin.QueryRow(`SELECT COUNT(*) FROM pg_database WHERE datname = $1`, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if (n == 1) != kept {
			t.Errorf("%s: got %d databases, want kept %v", name, n, kept)
		}
		if kept {
			admin.Exec(`DROP DATABASE "` + name + `" WITH (FORCE)`)
		}
	}
}

func TestSQLiteFileCopiesTheTemplate(t *testing.T) {
	if Postgres() {
		t.Skip("SQLite only: the template is a file")
	}
	migrations := 0
	migrate := func(path string) error {
		migrations++
		return os.WriteFile(path, []byte("migrated"), 0o644)
	}
	dir := t.TempDir()
	fresh := filepath.Join(dir, "sub", "fresh.db")
	SQLiteFile(t, fresh, migrate)
	SQLiteFile(t, filepath.Join(dir, "second.db"), migrate)
	own := filepath.Join(dir, "own.db")
	os.WriteFile(own, []byte("old layout"), 0o644)
	SQLiteFile(t, own, migrate)
	SQLiteFile(t, ":memory:", migrate)
	for _, c := range []struct{ path, want string }{
		{fresh, "migrated"},
		{filepath.Join(dir, "second.db"), "migrated"},
		{own, "old layout"},
	} {
		got, err := os.ReadFile(c.path)
		if err != nil || string(got) != c.want {
			t.Errorf("%s: got %q (%v), want %q", c.path, got, err, c.want)
		}
	}
	if migrations > 1 {
		t.Errorf("got %d migrations, want at most one per process", migrations)
	}
	if _, err := os.Stat(":memory:"); err == nil {
		t.Errorf("got a file named :memory:, want none")
	}
}

// TestSharedDatabases: the tests of one binary share one cluster, each in
// databases of its own, dropped at its end though a connection is left
// open.
func TestSharedDatabases(t *testing.T) {
	cluster := SharedCluster(t)
	if again := SharedCluster(t); again != cluster {
		t.Fatalf("got clusters %s and %s, want one per test binary", cluster, again)
	}
	admin, err := sql.Open("pgx", cluster)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var names []string
	t.Run("a test", func(t *testing.T) {
		a, b := SharedDatabase(t, ""), SharedDatabase(t, "ENCODING 'UTF8'")
		if a == b {
			t.Fatalf("got %s twice, want a database each", a)
		}
		for i, u := range []string{a, b} {
			if !strings.HasPrefix(u, cluster[:strings.LastIndex(cluster, "/")+1]) {
				t.Errorf("got %s, want a database on %s", u, cluster)
			}
			db, err := sql.Open("pgx", u)
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				if _, err := db.Exec(`CREATE TABLE mine (n int)`); err != nil {
					t.Fatal(err)
				}
			} else if _, err := db.Exec(`SELECT * FROM mine`); err == nil {
				t.Errorf("%s sees the table of %s, want databases apart", u, a)
			}
			names = append(names, u[strings.LastIndex(u, "/")+1:strings.Index(u, "?")])
		}
	})
	for _, name := range names {
		var n int
		if err := admin.QueryRow(`SELECT COUNT(*) FROM pg_database WHERE datname = $1`, name).Scan(&n); err != nil || n != 0 {
			t.Errorf("database %s: got %d (%v) after its test, want it dropped", name, n, err)
		}
	}
}
