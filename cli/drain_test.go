package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestShutdownDrainSetting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		env  string
		want time.Duration
	}{
		{nil, "", 0}, // a lone instance stops as soon as it is asked
		{nil, "15s", 15 * time.Second},
		{nil, "0", 0},
		{nil, "90s", 90 * time.Second},
		{[]string{"--shutdown-drain", "1m"}, "5s", time.Minute},
	}
	for _, tt := range tests {
		c, err := loadConfig(tt.args, func(k string) string { return map[string]string{"SHUTDOWN_DRAIN": tt.env}[k] }, io.Discard)
		if err != nil || c.ShutdownDrain != tt.want {
			t.Errorf("args %v, SHUTDOWN_DRAIN=%q: got %s (%v), want %s", tt.args, tt.env, c.ShutdownDrain, err, tt.want)
		}
	}
	for _, bad := range []string{"-1s", "soon", "15", "91s", "1h"} {
		_, err := loadConfig(nil, func(k string) string { return map[string]string{"SHUTDOWN_DRAIN": bad}[k] }, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "SHUTDOWN_DRAIN") {
			t.Errorf("SHUTDOWN_DRAIN=%q: got %v, want an error naming the setting", bad, err)
		}
	}
}

// waitDraining waits until base's /healthz answers 503 "draining".
func waitDraining(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := get(t, base+"/healthz")
		var h struct{ Status, Reason string }
		json.Unmarshal([]byte(body), &h)
		if code == http.StatusServiceUnavailable && h.Status == "draining" && h.Reason != "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/healthz: got %d %s, want 503 with status draining", base, code, body)
		}
		time.Sleep(5 * time.Millisecond) // polling; the order is the condition's
	}
}

// adminCall sends an admin-token request to the query API and fails
// unless it gets want.
func adminCall(t *testing.T, p *process, method, path, body string, want int) []byte {
	t.Helper()
	req, _ := http.NewRequest(method, p.query+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer tok")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		t.Fatalf("%s %s: got %d %s, want %d", method, path, res.StatusCode, b, want)
	}
	return b
}

// sendEvent posts one event with id to the collector; acked is whether it
// was answered 202, closed whether the server asked to close the
// connection.
func sendEvent(client *http.Client, collector, id string) (acked, closed bool, err error) {
	body := fmt.Sprintf(`{"id":%q,"site_id":"web","anon_id":"v","type":"pageview"}`, id)
	req, _ := http.NewRequest("POST", collector+"/v1/events", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer web")
	res, err := client.Do(req)
	if err != nil {
		return false, false, err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode == http.StatusAccepted, res.Close, nil
}

// TestDrainAnswersUnhealthyThenStops stops the binary started with
// --shutdown-drain under a load of single events: /healthz turns 503
// "draining" on both listeners while intake and reads answer as before,
// the process exits 0 once the drain and the usual shutdown are over, and
// after a restart every event answered 202 is stored.
func TestDrainAnswersUnhealthyThenStops(t *testing.T) {
	t.Parallel()
	const drainFor = 2 * time.Second
	bin := buildBinary(t)
	dbPath := filepath.Join(t.TempDir(), "drain.db")
	env := []string{"DATABASE_PATH=" + dbPath, "ADMIN_TOKEN=tok", "INGEST_RATE_LIMIT=0"}
	p := startArgs(t, bin, []string{"--shutdown-drain", drainFor.String()}, env...)
	adminCall(t, p, "POST", "/v1/workspaces", `{"name":"d","slug":"d"}`, http.StatusCreated)
	adminCall(t, p, "POST", "/v1/workspaces/d/sites", `{"id":"web","name":"w"}`, http.StatusCreated)

	var (
		mu    sync.Mutex
		acked []string
		seq   atomic.Int64
		wg    sync.WaitGroup
	)
	exited := make(chan error, 1)
	stopped := make(chan struct{})
	go func() { exited <- p.cmd.Wait(); close(stopped) }()
	t.Cleanup(func() { p.cmd.Process.Kill(); <-stopped }) // before start's own cleanup waits
	client := &http.Client{Timeout: 10 * time.Second}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stopped:
					return
				default:
				}
				id := fmt.Sprintf("00000000-0000-4000-8000-%012d", seq.Add(1))
				if ok, _, err := sendEvent(client, p.collector, id); err == nil && ok {
					mu.Lock()
					acked = append(acked, id)
					mu.Unlock()
				}
			}
		}()
	}

	signaled := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitDraining(t, p.collector)
	waitDraining(t, p.query)
	// Draining: intake and reads answer as before; each connection is
	// closed after its answer.
	ok, closed, err := sendEvent(client, p.collector, "00000000-0000-4000-8000-d00000000001")
	if err != nil || !ok || !closed {
		t.Fatalf("event sent while draining: got 202 %v, Connection: close %v, err %v; want 202 and close", ok, closed, err)
	}
	mu.Lock()
	acked = append(acked, "00000000-0000-4000-8000-d00000000001")
	mu.Unlock()
	adminCall(t, p, "GET", "/v1/workspaces", "", http.StatusOK)

	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("got exit %v after SIGTERM, want 0", err)
		}
	case <-time.After(drainFor + shutdownTimeout + 15*time.Second):
		t.Fatalf("still running %s after SIGTERM, want an exit after the %s drain and the %s shutdown", time.Since(signaled), drainFor, shutdownTimeout)
	}
	if took := time.Since(signaled); took < drainFor {
		t.Fatalf("exited %s after SIGTERM, want the %s drain served first", took, drainFor)
	}
	wg.Wait()

	// Restarted on the same file, the export holds every event answered 202.
	p2 := start(t, bin, env...)
	day := func(d time.Duration) string { return time.Now().UTC().Add(d).Format(time.DateOnly) }
	export := adminCall(t, p2, "GET", "/v1/sites/web/export?format=ndjson&from="+day(-24*time.Hour)+"&to="+day(24*time.Hour), "", http.StatusOK)
	stored := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(export))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e struct{ ID string }
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("export line %q: %v", sc.Bytes(), err)
		}
		stored[e.ID] = true
	}
	missing := 0
	for _, id := range acked {
		if !stored[id] {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d events answered 202 are missing after the restart", missing, len(acked))
	}
	t.Logf("%d events answered 202 under a load from before SIGTERM to the exit, all stored; exit %s after SIGTERM", len(acked), time.Since(signaled).Round(time.Millisecond))
}

// TestSecondSignalEndsDrain stops a binary draining for 90 s with a second
// signal: it exits 0 well before the drain would have ended.
func TestSecondSignalEndsDrain(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			dbPath := filepath.Join(t.TempDir(), "drain.db")
			p := start(t, bin, "DATABASE_PATH="+dbPath, "SHUTDOWN_DRAIN="+maxShutdownDrain.String())
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			waitDraining(t, p.query)
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- p.cmd.Wait() }()
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("got exit %v after a second %s, want 0", err, sig)
				}
			case <-time.After(maxShutdownDrain / 2):
				p.cmd.Process.Kill()
				<-exited
				t.Fatalf("still running %s after a second %s, want the %s drain cut short", maxShutdownDrain/2, sig, maxShutdownDrain)
			}
		})
	}
}

// DATABASE_POOL sizes the read pool of the database serve opens.
func TestDatabasePoolSetting(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		env  string
		want int
		err  string
	}{
		{nil, "", 4, ""},
		{nil, "12", 12, ""},
		{[]string{"--database-pool", "2"}, "12", 2, ""},
		{nil, "64", 64, ""},
		{nil, "0", 0, "DATABASE_POOL must be a whole number from 1 to 64, not \"0\""},
		{nil, "65", 0, "from 1 to 64"},
		{nil, "-1", 0, "from 1 to 64"},
		{nil, "four", 0, "from 1 to 64"},
	} {
		c, err := loadConfig(tt.args, func(k string) string { return map[string]string{"DATABASE_POOL": tt.env}[k] }, io.Discard)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("args %v, DATABASE_POOL=%q: got %v, want %q", tt.args, tt.env, err, tt.err)
		case tt.err == "" && (err != nil || c.storageOptions(nil).ReadConns != tt.want):
			t.Errorf("args %v, DATABASE_POOL=%q: got %d (%v), want %d", tt.args, tt.env, c.storageOptions(nil).ReadConns, err, tt.want)
		}
	}
}
