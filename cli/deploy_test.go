package cli

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// unitPath is the systemd unit docs/operations.md#run-it-on-a-vm installs.
const unitPath = "../deploy/tally.service"

// The unit passes `systemd-analyze verify` without a warning (it exits 0
// on many), with ExecStart pointed at a binary built from this tree, as
// verify checks that the command exists.
func TestSystemdUnitVerifies(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("systemd-analyze is missing; .ci/run installs Debian's systemd package")
		}
		t.Skip("systemd-analyze is missing: apt-get install systemd to check deploy/tally.service")
	}
	unit, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	const installed = "ExecStart=/usr/local/bin/tally "
	if !strings.Contains(string(unit), installed) {
		t.Fatalf("got no %q line in %s", installed, unitPath)
	}
	bin := buildBinary(t)
	path := filepath.Join(t.TempDir(), "tally.service")
	if err := os.WriteFile(path, []byte(strings.Replace(string(unit), installed, "ExecStart="+bin+" ", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Fatalf("systemd-analyze verify: got %v, %q, want success and no output", err, out)
	}
}

// The unit holds what the issue asks of it: a dedicated user, its state
// directory, no privilege but binding 80 and 443, a restart on failure,
// and a stop timeout longer than the server's drain at its longest.
func TestSystemdUnitSettings(t *testing.T) {
	t.Parallel()
	f, err := os.Open(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && !strings.HasPrefix(k, "#") {
			got[k] = v
		}
	}
	want := map[string]string{
		"User": "tally", "Group": "tally", "StateDirectory": "tally", "NoNewPrivileges": "yes",
		"ProtectSystem": "strict", "AmbientCapabilities": "CAP_NET_BIND_SERVICE",
		"CapabilityBoundingSet": "CAP_NET_BIND_SERVICE", "Restart": "on-failure", "KillSignal": "SIGTERM",
		"ExecStart": "/usr/local/bin/tally serve", "Environment": "DATABASE_PATH=/var/lib/tally/analytics.db",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	// The longest SHUTDOWN_DRAIN, then the wait for requests in flight.
	stop, err := time.ParseDuration(strings.TrimSpace(got["TimeoutStopSec"]) + "s")
	if drain := maxShutdownDrain + shutdownTimeout; err != nil || stop <= drain {
		t.Errorf("TimeoutStopSec: got %q, want seconds beyond the %s drain", got["TimeoutStopSec"], drain)
	}
}
