package dbtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// PendingFile lists, per package, the tests that do not pass on
// PostgreSQL yet (docs/development.md#both-backends); the PostgreSQL run skips
// them.
const PendingFile = "testdata/postgres_pending.txt"

// reportEnv names the file where the PostgreSQL run writes which tests
// skipped themselves as SQLite-only.
const reportEnv = "TALLY_TEST_REPORT"

// Main is a TestMain for a package whose tests open storage: it runs the
// tests (on SQLite); then, when TEST_DATABASE_URL is set and this is not
// already the PostgreSQL run, it runs the same test binary again with the
// same flags and TALLY_TEST_BACKEND=postgres, its output lines prefixed
// "[postgres] ", skipping the tests of PendingFile, and prints one line
// of counts. It exits non-zero when either run failed.
func Main(m *testing.M) {
	flag.Parse()
	parallelByDefault()
	start := time.Now()
	shared.mu.Lock()
	shared.main = true
	shared.mu.Unlock()
	code := m.Run()
	stopShared()
	removeSQLiteTemplate()
	if Postgres() {
		if err := dropTemplate(); err != nil {
			fmt.Fprintf(os.Stderr, "dbtest: dropping the template database: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
		writeReport()
		os.Exit(code)
	}
	// TALLY_TEST_BACKEND=sqlite: this run only, TEST_DATABASE_URL left to
	// the tests that start instances on it themselves (.ci/run runs
	// SQLite under the race detector, then both backends without it).
	if os.Getenv(URLEnv) == "" || os.Getenv(BackendEnv) == "sqlite" || flagValue("test.list") != "" {
		os.Exit(code)
	}
	if pcode := runPostgres(start); code == 0 {
		code = pcode
	}
	os.Exit(code)
}

// runPostgres runs this test binary again on PostgreSQL and returns its
// exit code.
func runPostgres(start time.Time) int {
	name := strings.TrimSuffix(filepath.Base(os.Args[0]), ".test")
	pending, err := ReadPending(PendingFile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "[postgres] %s: %v\n", name, err)
		return 1
	}
	runPending := os.Getenv(PendingEnv) == "run"
	var skip []string
	if !runPending {
		skip = pending
	}
	args, err := childArgs(flagsSet(), flag.Args(), skip, time.Since(start))
	if err != nil {
		fmt.Fprintf(os.Stderr, "[postgres] %s: %v\n", name, err)
		return 1
	}
	report, err := os.CreateTemp("", "tally-test-report-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "[postgres] %s: %v\n", name, err)
		return 1
	}
	report.Close()
	defer os.Remove(report.Name())

	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), BackendEnv+"=postgres", reportEnv+"="+report.Name())
	// go test -json (-test.v=test2json) frames its lines: a prefix would
	// break the framing, and the test names already tell the runs apart.
	prefix := "[postgres] "
	if flagValue("test.v") == "test2json" {
		prefix = ""
	}
	stdout := &prefixWriter{w: os.Stdout, prefix: prefix}
	stderr := &prefixWriter{w: os.Stderr, prefix: prefix}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err = cmd.Run()
	stdout.Flush()
	stderr.Flush()
	code := 0
	if err != nil {
		code = 1
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() > 0 {
			code = ee.ExitCode()
		} else {
			fmt.Fprintf(os.Stderr, "[postgres] %s: %v\n", name, err)
		}
	}
	line := summary(name, pending, runPending, report.Name())
	fmt.Println(line)
	// go test shows a passing package's output only with -v: a file
	// gathers the lines of a whole go test ./... run (.ci/run prints it).
	if path := os.Getenv(SummaryEnv); path != "" {
		if f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintln(f, line)
			f.Close()
		}
	}
	return code
}

// summary is the PostgreSQL run's line of counts: top-level tests (fuzz
// tests' seeds included) that ran, that skipped themselves as
// SQLite-only, and that were pending.
func summary(name string, pending []string, runPending bool, reportPath string) string {
	selected, err := selectedTests()
	if err != nil {
		return fmt.Sprintf("[postgres] %s: counting the tests: %v", name, err)
	}
	var sqliteOnly []string
	if b, err := os.ReadFile(reportPath); err == nil && len(b) > 0 {
		json.Unmarshal(b, &sqliteOnly)
	}
	isPending := map[string]bool{}
	for _, p := range pending {
		isPending[p] = true
	}
	topSkipped := map[string]bool{}
	subSkipped := 0
	for _, n := range sqliteOnly {
		if strings.Contains(n, "/") {
			subSkipped++
		} else {
			topSkipped[n] = true
		}
	}
	ran, onlySQLite, pend := 0, 0, 0
	for _, n := range selected {
		switch {
		case isPending[n] && !runPending:
			pend++
		case topSkipped[n]:
			onlySQLite++
		default:
			ran++
		}
	}
	s := fmt.Sprintf("[postgres] %s: %d tests ran, %d skipped as SQLite-only, %d skipped as pending (%s)", name, ran, onlySQLite, pend, PendingFile)
	if subSkipped > 0 {
		s += fmt.Sprintf("; %d subtests skipped as SQLite-only", subSkipped)
	}
	if runPending {
		s += fmt.Sprintf("; %s=run: the %d pending tests ran too", PendingEnv, len(pending))
	}
	return s
}

// selectedTests lists the top-level tests that -run and -skip select,
// asking the test binary itself (-test.list).
func selectedTests() ([]string, error) {
	run := topLevel(flagValue("test.run"))
	if run == "" {
		run = "."
	}
	cmd := exec.Command(os.Args[0], "-test.list="+run)
	cmd.Env = append(os.Environ(), BackendEnv+"=postgres")
	out, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	var skip *regexp.Regexp
	if s := flagValue("test.skip"); s != "" && topLevel(s) == s {
		if skip, err = regexp.Compile(s); err != nil {
			return nil, err
		}
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		isTest := strings.HasPrefix(line, "Test") || strings.HasPrefix(line, "Fuzz")
		if !isTest || (skip != nil && skip.MatchString(line)) {
			continue
		}
		names = append(names, line)
	}
	return names, nil
}

// writeReport writes, for the parent run, the names of the tests that
// skipped themselves as SQLite-only.
func writeReport() {
	path := os.Getenv(reportEnv)
	if path == "" {
		return
	}
	skipped.mu.Lock()
	defer skipped.mu.Unlock()
	b, _ := json.Marshal(skipped.names)
	os.WriteFile(path, b, 0o600)
}

// flagsSet returns the flags given to this test binary, as -name=value.
func flagsSet() []string {
	var set []string
	flag.Visit(func(f *flag.Flag) { set = append(set, "-"+f.Name+"="+f.Value.String()) })
	return set
}

func flagValue(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

// profileFlags write a file that the PostgreSQL run would overwrite: it
// writes NAME.postgres instead.
var profileFlags = map[string]bool{
	"test.coverprofile": true, "test.cpuprofile": true, "test.memprofile": true,
	"test.blockprofile": true, "test.mutexprofile": true, "test.trace": true,
}

// childArgs turns this run's flags (as -name=value) into the PostgreSQL
// run's: -skip gains the pending tests, -timeout keeps what is left of
// the time allowed (so the child's timeout, with its stacks, comes before
// the go command kills the package), profiles get their own files, and
// the go command's test log (for its cache, recorded by this process)
// is not shared.
func childArgs(set, rest []string, pending []string, elapsed time.Duration) ([]string, error) {
	var args []string
	skipDone := false
	for _, a := range set {
		name, value, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case name == "test.testlogfile":
			continue
		case name == "test.timeout":
			d, err := time.ParseDuration(value)
			if err != nil {
				return nil, fmt.Errorf("-test.timeout: %v", err)
			}
			if d > 0 {
				d = max(d-elapsed, 30*time.Second)
			}
			a = "-test.timeout=" + d.String()
		case name == "test.skip":
			s, err := mergeSkip(value, pending)
			if err != nil {
				return nil, err
			}
			a, skipDone = "-test.skip="+s, true
		case profileFlags[name] && value != "":
			a = "-" + name + "=" + value + ".postgres"
		}
		args = append(args, a)
	}
	if !skipDone && len(pending) > 0 {
		s, _ := mergeSkip("", pending)
		args = append(args, "-test.skip="+s)
	}
	return append(args, rest...), nil
}

// mergeSkip adds the pending top-level test names to a -skip pattern.
func mergeSkip(skip string, pending []string) (string, error) {
	if len(pending) == 0 {
		return skip, nil
	}
	quoted := make([]string, len(pending))
	for i, p := range pending {
		quoted[i] = regexp.QuoteMeta(p)
	}
	p := "^(" + strings.Join(quoted, "|") + ")$"
	switch {
	case skip == "":
		return p, nil
	case topLevel(skip) != skip:
		// -skip A/B names subtests: an alternative at the top level would
		// pair with B and skip only subtests of the pending tests.
		return "", fmt.Errorf("-skip %q names subtests; the pending tests (%s) cannot be added to it: run the PostgreSQL half with -run instead", skip, PendingFile)
	}
	return "(?:" + skip + ")|" + p, nil
}

// topLevel is the part of a -run or -skip pattern that matches top-level
// test names: up to the first slash outside brackets and parentheses.
func topLevel(pattern string) string {
	depth := 0
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '\\':
			i++
		case '[', '(':
			depth++
		case ']', ')':
			depth--
		case '/':
			if depth == 0 {
				return pattern[:i]
			}
		}
	}
	return pattern
}

// ReadPending reads a pending list: one top-level test (or fuzz test) per
// line, its name first,
// then why it fails on PostgreSQL and the part of the port that will fix
// it; blank lines and lines starting with # are comments. A missing file
// is an empty list.
func ReadPending(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, reason, _ := strings.Cut(line, " ")
		switch {
		case !regexp.MustCompile(`^(Test|Fuzz)\w*$`).MatchString(name):
			return nil, fmt.Errorf("%s:%d: %q is not a top-level test or fuzz test name", path, n, name)
		case strings.TrimSpace(reason) == "":
			return nil, fmt.Errorf("%s:%d: %s has no reason (why it fails, which part ports it)", path, n, name)
		case seen[name]:
			return nil, fmt.Errorf("%s:%d: %s is listed twice", path, n, name)
		}
		seen[name] = true
		names = append(names, name)
	}
	return names, sc.Err()
}

// prefixWriter writes each line with prefix in front.
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		if _, err := io.WriteString(p.w, p.prefix+string(p.buf[:i+1])); err != nil {
			return 0, err
		}
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

// Flush writes a last line that has no newline.
func (p *prefixWriter) Flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.buf) > 0 {
		io.WriteString(p.w, p.prefix+string(p.buf)+"\n")
		p.buf = nil
	}
}

// testParallel is how many parallel tests run at once unless -parallel
// says. The tests of storage and server mostly wait (on commits, on
// PostgreSQL, on the writer's group commit and the background loops),
// not on the CPU: more than GOMAXPROCS (go test's default, 2 on the
// project's machine) at once shortens the run. The PostgreSQL run
// inherits it with the other flags.
const testParallel = "4"

// parallelByDefault sets -test.parallel to testParallel unless the
// command line set it.
func parallelByDefault() {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", testParallel)
	}
}
