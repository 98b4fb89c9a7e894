package cli

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tally-analytics/tally/storage"
)

// The binary purges a site whose retention_days is lowered (at once, not
// the next day), then `tally vacuum` refuses while the server has the file
// open, and once it is stopped shrinks the file to its data, rollups,
// tenants and audit triggers kept.
func TestVacuumCommand(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	dbPath := filepath.Join(t.TempDir(), "analytics.db")
	p := start(t, bin, "DATABASE_PATH="+dbPath, "ADMIN_TOKEN=tok", "INGEST_RATE_LIMIT=0")
	send := func(method, url, token, body string) {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode >= 300 {
			t.Fatalf("%s %s: got %d", method, url, res.StatusCode)
		}
	}
	send("POST", p.query+"/v1/workspaces", "tok", `{"name":"Acme","slug":"acme"}`)
	send("POST", p.query+"/v1/workspaces/acme/sites", "tok", `{"id":"web","name":"Web"}`)
	// Each event's pad is its own letters, which raw's compression cannot
	// fold away: the events must take most of the file.
	rng := rand.New(rand.NewPCG(1, 2))
	pad := func() string {
		b := make([]byte, 1000)
		for i := range b {
			b[i] = byte('a' + rng.IntN(26))
		}
		return string(b)
	}
	for b := range 20 {
		var batch []string
		for i := range 100 {
			batch = append(batch, fmt.Sprintf(`{"id":"00000000-0000-4000-8000-%012d","site_id":"web","anon_id":"v%d","type":"pageview","ts":"2020-01-%02dT10:00:00Z","url":"https://a.test/","properties":{"pad":"%s"}}`,
				b*100+i, i%50, 1+b, pad()))
		}
		send("POST", p.collector+"/v1/s2s/events", "web", "["+strings.Join(batch, ",")+"]")
	}

	vacuum := func() (int, string, string) {
		var out, errOut bytes.Buffer
		cmd := exec.Command(bin, "vacuum", "--database-path", dbPath)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), out.String(), errOut.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, out.String(), errOut.String()
	}
	if code, _, msg := vacuum(); code != 1 || !strings.Contains(msg, "stop it first") {
		t.Fatalf("got exit %d %q vacuuming under the running server, want 1 and a message asking to stop it", code, msg)
	}

	send("PATCH", p.query+"/v1/sites/web", "tok", `{"retention_days":1}`)
	query := func(q string) int {
		t.Helper()
		db, err := sql.Open("sqlite", storage.FileURI(dbPath)+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var n int
		if err := db.QueryRow(q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	deadline := time.Now().Add(20 * time.Second)
	for query(`SELECT COUNT(*) FROM events`) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the events older than the site's retention were not purged")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(interruptSignal); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("got exit %v after SIGTERM, want 0", err)
	}
	fi, err := os.Stat(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	code, out, msg := vacuum()
	if code != 0 || !strings.Contains(out, "vacuumed") {
		t.Fatalf("got exit %d, %q %q, want 0 and what it did", code, out, msg)
	}
	after, _ := os.Stat(dbPath)
	t.Logf("%s", out)
	if after.Size() > fi.Size()/2 {
		t.Errorf("got %d bytes after vacuum, from %d, want under half: every event was purged", after.Size(), fi.Size())
	}
	if _, err := os.Stat(dbPath + "-wal"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("got a WAL left after vacuum (%v), want none", err)
	}
	if n := query(`SELECT COUNT(*) FROM daily_events WHERE site_id = 'web'`); n == 0 {
		t.Error("got no rollup rows after vacuum, want them kept")
	}
	if n := query(`SELECT COUNT(*) FROM sites`); n != 1 {
		t.Errorf("got %d sites after vacuum, want 1", n)
	}
	if n := query(`SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'audit_log'`); n != 2 {
		t.Errorf("got %d audit triggers after vacuum, want 2", n)
	}
	missing := filepath.Join(t.TempDir(), "none.db")
	if err := exec.Command(bin, "vacuum", "--database-path", missing).Run(); err == nil {
		t.Error("got exit 0 vacuuming a missing file, want non-zero")
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("got %v for the missing file after vacuum, want it still missing", err)
	}
}
