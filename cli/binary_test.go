package cli

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// testVersion is stamped into the test binary, as scripts/release stamps
// a release's (TestCommandLine reads it back).
const testVersion = "v0.0.0-test"

// versionVar is what -ldflags -X sets to stamp the version.
const versionVar = "github.com/tally-analytics/tally/cli.version"

// binaryDir holds the binary every end-to-end test of this package runs:
// made by TestMain, removed when the tests are done.
var binaryDir string

// binary is the one build of the tally binary per test run: building it
// took seconds each time, and some twenty tests need it.
var binary struct {
	once sync.Once
	path string
	err  error
}

// testParallel is how many tests of this package run at once unless
// -parallel says: they mostly wait on the processes and PostgreSQL
// clusters they start, so more than GOMAXPROCS (the default, 2 on the
// project's machine) at once shortens the run (68 s -> 53 s at 6).
const testParallel = "4"

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", testParallel)
	}
	dir, err := os.MkdirTemp("", "tally-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binaryDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildBinary returns the tally binary (the repository root's main
// package), building it on first use with the version stamped in, as
// scripts/release does, but with the settings go test builds with: a
// release's -trimpath and CGO_ENABLED=0 change every package's build, so
// on an empty build cache they compiled everything a second time (109
// CPU-s of 2026-12's fresh run); with the tests' settings the build reuses
// their packages (2 CPU-s). CI builds the releases themselves
// (docs/development.md#ci) and TestVersionShowsTheReleaseBuild reads a
// release's flags.
func buildBinary(t testing.TB) string {
	t.Helper()
	binary.once.Do(func() {
		bin := filepath.Join(binaryDir, "tally")
		cmd := exec.Command("go", "build", "-ldflags", "-X "+versionVar+"="+testVersion, "-o", bin, "github.com/tally-analytics/tally")
		if out, err := cmd.CombinedOutput(); err != nil {
			binary.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		binary.path = bin
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

// scripts/release stamps the version where it now lives (it was
// main.version before the commands moved to this package).
func TestReleaseStampsTheVersion(t *testing.T) {
	t.Parallel()
	script, err := os.ReadFile("../scripts/release")
	if err != nil {
		t.Fatal(err)
	}
	if want := "-X " + versionVar + "="; !strings.Contains(string(script), want) {
		t.Fatalf("got no %q in scripts/release", want)
	}
}
