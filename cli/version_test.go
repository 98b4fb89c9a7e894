package cli

import (
	"runtime/debug"
	"slices"
	"testing"
)

// What a release build records, as `go version -m` prints it for a binary
// of scripts/release (CGO_ENABLED=0 go build -trimpath -ldflags "-X
// ..."; -trimpath leaves -ldflags out). The binary the end-to-end tests
// run is built as the tests are (cli/binary_test.go), so the release's
// flags are read here.
const releaseBuildInfo = `path	github.com/tally-analytics/tally
mod	github.com/tally-analytics/tally	v1.2.0
build	-buildmode=exe
build	-compiler=gc
build	-trimpath=true
build	CGO_ENABLED=0
build	GOARCH=arm64
build	GOOS=linux
build	vcs=git
build	vcs.revision=0123abc
build	vcs.time=2026-12-01T10:00:00Z
build	vcs.modified=true
`

func TestVersionShowsTheReleaseBuild(t *testing.T) {
	t.Parallel()
	info, err := debug.ParseBuildInfo(releaseBuildInfo)
	if err != nil {
		t.Fatal(err)
	}
	b := readBuild(info)
	if version == "" && b.Version != "v1.2.0" {
		t.Errorf("got version %q, want the module's v1.2.0", b.Version)
	}
	if want := "0123abc (2026-12-01T10:00:00Z, modified)"; b.Commit != want {
		t.Errorf("got commit %q, want %q", b.Commit, want)
	}
	if want := []string{"-trimpath", "CGO_ENABLED=0", "GOARCH=arm64", "GOOS=linux"}; !slices.Equal(b.Flags, want) {
		t.Errorf("got flags %q, want %q", b.Flags, want)
	}
	if b := readBuild(nil); b.Commit != "unknown" || b.Flags != nil {
		t.Errorf("no build info: got %+v, want commit unknown and no flags", b)
	}
}
