package cli

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/tally-analytics/tally/privacy"
	"github.com/tally-analytics/tally/storage"
)

// version is the release, stamped by scripts/release with
// -ldflags "-X github.com/tally-analytics/tally/cli.version=v1.2.0".
// Unstamped, the module version (`go install ...@v1.2.0`) stands in, else
// "devel".
var version string

// buildVersion is what `tally version` prints.
type buildVersion struct {
	Version, Commit, Go, SQLite string
	Flags                       []string // -ldflags, -tags, -trimpath, CGO_ENABLED, GOOS, GOARCH
}

// currentBuild reads the stamped version and what the Go toolchain
// recorded in the binary: the VCS revision (absent with -buildvcs=false
// or outside a checkout) and the build flags.
func currentBuild(ctx context.Context) buildVersion {
	info, _ := debug.ReadBuildInfo()
	b := readBuild(info)
	b.SQLite = "unknown"
	if v, err := storage.SQLiteVersion(ctx); err == nil {
		b.SQLite = v
	}
	return b
}

// readBuild is currentBuild from info (nil: none recorded), apart from
// the SQLite version: a test gives it a release build's settings
// (cli/version_test.go) where the binary the end-to-end tests run is built
// as the tests are, to share their compiled packages.
func readBuild(info *debug.BuildInfo) buildVersion {
	b := buildVersion{Version: version, Commit: "unknown", Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH}
	if info != nil {
		if b.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
		}
		var rev, at string
		modified := false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			case "-ldflags", "-tags", "-gcflags":
				b.Flags = append(b.Flags, s.Key+"="+quoteIfSpaced(s.Value))
			case "-trimpath", "-race":
				if s.Value == "true" {
					b.Flags = append(b.Flags, s.Key)
				}
			case "CGO_ENABLED", "GOOS", "GOARCH", "GOAMD64", "GOARM64":
				b.Flags = append(b.Flags, s.Key+"="+s.Value)
			}
		}
		if rev != "" {
			b.Commit = rev
			if at != "" {
				b.Commit += " (" + at
				if modified {
					b.Commit += ", modified"
				}
				b.Commit += ")"
			}
		}
	}
	if b.Version == "" {
		b.Version = "devel"
	}
	return b
}

func quoteIfSpaced(s string) string {
	if strings.ContainsAny(s, " \t") {
		return fmt.Sprintf("%q", s)
	}
	return s
}

// versionCommand is `tally version` and `tally --version`.
func versionCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "tally version: unexpected argument %q (see 'tally help')\n", args[0])
		return 2
	}
	b := currentBuild(context.Background())
	fmt.Fprintf(stdout, "tally %s\ncommit  %s\ngo      %s\nsqlite  %s\nbuild   %s\ngeoip   %s, built %s\n",
		b.Version, b.Commit, b.Go, b.SQLite, strings.Join(b.Flags, " "),
		privacy.BuiltinGeoIPCredit, privacy.BuiltinGeoIPBuilt().Format(time.DateOnly))
	if url := getenv("DATABASE_URL"); url != "" {
		ctx, cancel := context.WithTimeout(context.Background(), checkPostgresTimeout)
		defer cancel()
		v, err := storage.PostgresVersion(ctx, url)
		if err != nil {
			v = "unknown (" + err.Error() + ")"
		}
		fmt.Fprintf(stdout, "postgres %s\n", v)
	}
	return 0
}
