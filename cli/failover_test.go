package cli

import (
	"bytes"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestFailoverBehindHAProxy runs two instances of the binary on one
// PostgreSQL database behind Debian's HAProxy, configured as
// docs/postgresql.md#failover says (the test reads the configuration
// there), with several senders posting events through it and sending
// again, with the same ids, whatever was not answered 202:
//  1. one instance killed with SIGKILL: the other keeps answering, HAProxy
//     takes the dead one out of rotation once its /healthz fails, at most
//     one request per sender fails meanwhile, and every request sent after
//     that is answered 202; the instance started again on its port comes
//     back into rotation;
//  2. PostgreSQL stopped in fast mode, then (3.) in immediate mode, and
//     started again: each instance asked directly answers 503 with
//     Retry-After, every 503 through HAProxy has Retry-After, no answer is
//     a 500, a 502 or no answer at all, and both instances come back into
//     rotation by themselves, the same processes;
//
// and at the end every event answered 202 is in the database, none
// twice, and no instance logged an internal error.
func TestFailoverBehindHAProxy(t *testing.T) {
	t.Parallel()
	haproxy := needHAProxy(t)
	pg, dbURL := startTallyDatabase(t)
	bin := buildBinary(t)
	env := []string{"DATABASE_URL=" + dbURL, "ADMIN_TOKEN=tok", "INGEST_RATE_LIMIT=0"}

	a := startFailoverInstance(t, bin, env, "127.0.0.1:0")
	for _, c := range []struct{ path, body string }{
		{"/v1/workspaces", `{"name":"Acme","slug":"acme"}`},
		{"/v1/workspaces/acme/sites", `{"id":"web","name":"Web"}`},
	} {
		if code, body := multiCall(t, "POST", a.query+c.path, "tok", c.body, nil); code != 201 {
			t.Fatalf("POST %s: got %d %s, want 201", c.path, code, body)
		}
	}
	b := startFailoverInstance(t, bin, env, "127.0.0.1:0")
	failoverPoll(t, "the second instance to see the site", func() (bool, string) {
		code, body := multiCall(t, "GET", b.query+"/v1/sites/web", "tok", "", nil)
		return code == 200, fmt.Sprintf("%d %s", code, body)
	})
	instances := []*failoverInstance{a, b}
	started := []*failoverInstance{a, b} // every one, for their logs

	lb := startHAProxy(t, haproxy, a.addr(), b.addr())
	lb.waitStatus(t, "tally1", "UP")
	lb.waitStatus(t, "tally2", "UP")

	const senders = 4
	load := startFailoverLoad(t, lb.collector, senders)
	load.waitOK(t, 50)

	// 1. One instance killed mid-load.
	killed := time.Now()
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-a.exited
	lb.waitStatus(t, "tally1", "DOWN")
	down := time.Now()
	load.waitOK(t, load.okCount()+100)
	answers := load.between(killed, time.Now())
	failed, after := 0, failoverErrors{t: t}
	for _, ans := range answers {
		if ans.status == http.StatusAccepted {
			continue
		}
		if ans.sent.After(down) {
			after.add("a request sent after HAProxy took the dead instance out: got %s, want 202", ans)
		} else {
			failed++
			t.Logf("failed while HAProxy still had the dead instance in rotation: %s", ans)
		}
	}
	// At most the request each sender had in flight: HAProxy sends
	// the others again to the living instance.
	if failed > senders || failed*20 > len(answers) {
		t.Errorf("after the kill: %d of %d requests failed, want at most %d and at most 5%%", failed, len(answers), senders)
	}
	after.done()
	t.Logf("kill -9: out of rotation after %v; %d of %d requests failed meanwhile, %d after",
		down.Sub(killed).Round(time.Millisecond), failed, len(answers), after.n)

	// Started again on its port, it comes back into rotation.
	a = startFailoverInstance(t, bin, env, a.addr())
	instances[0] = a
	started = append(started, a)
	lb.waitStatus(t, "tally1", "UP")
	load.waitOK(t, load.okCount()+25)

	// 2, 3. PostgreSQL restarted mid-load, fast and immediate.
	for _, outage := range []struct {
		mode string
		stop func()
	}{
		{"fast", pg.Stop},
		{"immediate", pg.StopImmediately},
	} {
		began := time.Now()
		outage.stop()
		// Each instance, asked directly, says the database is away.
		for i, inst := range instances {
			failoverPoll(t, fmt.Sprintf("instance %d to answer 503 with the database stopped (%s)", i+1, outage.mode), func() (bool, string) {
				ans := load.send(&http.Client{Timeout: 20 * time.Second}, inst.collector, load.ids(1))
				if ans.status == http.StatusServiceUnavailable && ans.retryAfter != "" && ans.code == "unavailable" {
					return true, ""
				}
				t.Fatalf("instance %d asked directly, PostgreSQL stopped (%s): got %s, want 503 with Retry-After and code unavailable", i+1, outage.mode, ans)
				return false, ""
			})
		}
		lb.waitStatus(t, "tally1", "DOWN")
		lb.waitStatus(t, "tally2", "DOWN")
		restart := time.Now()
		pg.Start()
		back := time.Now()
		lb.waitStatus(t, "tally1", "UP")
		lb.waitStatus(t, "tally2", "UP")
		up := time.Now()
		load.waitOK(t, load.okCount()+50)
		var fromInstances, fromHAProxy int
		wrong, late := failoverErrors{t: t}, failoverErrors{t: t}
		for _, ans := range load.between(began, time.Now()) {
			switch {
			case ans.status == http.StatusAccepted:
			case ans.status == http.StatusServiceUnavailable && ans.retryAfter != "" && ans.code == "unavailable":
				if ans.message == haproxyUnavailable {
					fromHAProxy++
				} else {
					fromInstances++
				}
			default:
				wrong.add("PostgreSQL restarted (%s): got %s, want 202, or 503 with Retry-After and code unavailable", outage.mode, ans)
			}
			if ans.status != http.StatusAccepted && ans.sent.After(up) {
				late.add("PostgreSQL restarted (%s), a request sent once both instances were back in rotation: got %s, want 202", outage.mode, ans)
			}
		}
		wrong.done()
		late.done()
		for i, inst := range instances {
			select {
			case err := <-inst.exited:
				t.Fatalf("instance %d exited during the outage (%s): %v\n%s", i+1, outage.mode, err, inst.log)
			default:
			}
		}
		t.Logf("PostgreSQL %s restart: down %v (HAProxy took both out in %v), both back in rotation %v after it answered; 503s with Retry-After: %d from the instances, %d from HAProxy",
			outage.mode, back.Sub(began).Round(time.Millisecond), restart.Sub(began).Round(time.Millisecond), up.Sub(back).Round(time.Millisecond), fromInstances, fromHAProxy)
	}

	load.finish()
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stored := map[string]int{}
	rows, err := db.Query(`SELECT id_text, count(*) FROM events WHERE site_id = 'web' GROUP BY id_text`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		stored[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	missing, twice := 0, 0
	for _, id := range load.acked {
		if stored[id] == 0 {
			missing++
		}
	}
	for id, n := range stored {
		if n > 1 {
			twice++
			if twice <= 5 {
				t.Errorf("event %s stored %d times, want once", id, n)
			}
		}
	}
	if missing > 0 || twice > 0 {
		t.Errorf("%d of %d events answered 202 are missing, %d stored more than once; want none", missing, len(load.acked), twice)
	}
	t.Logf("%d events answered 202 in %d requests, all stored once (%d rows)", len(load.acked), len(load.answers), len(stored))
	for i, inst := range started {
		if strings.Contains(inst.log.String(), `"msg":"internal error"`) {
			t.Errorf("instance %d of the %d started logged an internal error:\n%s", i+1, len(started), inst.log)
		}
	}
}

// needHAProxy returns the haproxy command, skipping t when it is missing
// (failing it under CI, whose .ci/run installs Debian's haproxy).
func needHAProxy(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("haproxy")
	if err != nil {
		path, err = exec.LookPath("/usr/sbin/haproxy")
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("haproxy is missing; .ci/run installs it (Debian's haproxy package)")
		}
		t.Skip("haproxy is missing (Debian's haproxy package; .ci/run installs it)")
	}
	return path
}

// failoverPoll calls cond until it holds, for at most 60 s; what it returns
// beside says what was seen, for the failure's message.
func failoverPoll(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok, seen := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 60 s for %s; last seen: %s", what, seen)
		}
		time.Sleep(20 * time.Millisecond) // polling for a condition, not ordering
	}
}

// failoverErrors reports the first few of many like failures, then
// their number.
type failoverErrors struct {
	t *testing.T
	n int
}

func (e *failoverErrors) add(format string, args ...any) {
	e.t.Helper()
	if e.n++; e.n <= 3 {
		e.t.Errorf(format, args...)
	}
}

func (e *failoverErrors) done() {
	e.t.Helper()
	if e.n > 3 {
		e.t.Errorf("... and %d more like them", e.n-3)
	}
}

// failoverInstance is one instance of the binary, its log kept.
type failoverInstance struct {
	cmd              *exec.Cmd
	collector, query string // base URLs
	log              *syncBuffer
	exited           <-chan error
}

// startFailoverInstance starts the binary with env, its collector on
// collectorAddr.
func startFailoverInstance(t *testing.T, bin string, env []string, collectorAddr string) *failoverInstance {
	t.Helper()
	cmd, collector, query, log, exited := startLogged(t, bin, append(env[:len(env):len(env)], "COLLECTOR_ADDR="+collectorAddr)...)
	return &failoverInstance{cmd: cmd, collector: collector, query: query, log: log, exited: exited}
}

// addr is the collector's host:port.
func (i *failoverInstance) addr() string { return strings.TrimPrefix(i.collector, "http://") }

// haproxyUnavailable is the message of HAProxy's own 503 in the
// configuration of docs/postgresql.md#failover.
const haproxyUnavailable = "no instance is available; retry later"

// haproxyConfig is the configuration of docs/postgresql.md#failover,
// with the test's addresses and faster checks: each documented value is
// replaced by the test's, and must be there.
func haproxyConfig(t *testing.T, front, stats, a, b string) string {
	t.Helper()
	raw, err := os.ReadFile("../docs/postgresql.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)\n## Failover\n.*?```haproxy\n(.*?)```").FindSubmatch(raw)
	if m == nil {
		t.Fatal("docs/postgresql.md has no Failover section with a ```haproxy block")
	}
	config := string(m[1])
	for _, r := range []struct{ doc, test string }{
		{"bind :8080\n", "bind " + front + "\n"},
		{"bind 127.0.0.1:8404\n", "bind " + stats + "\n"},
		{"server tally1 10.0.0.11:8080 check\n", "server tally1 " + a + " check\n"},
		{"server tally2 10.0.0.12:8080 check\n", "server tally2 " + b + " check\n"},
		{"inter 2s fall 3 rise 2\n", "inter 500ms fall 2 rise 2\n"},
		{"message\":\"" + haproxyUnavailable + "\"", "message\":\"" + haproxyUnavailable + "\""},
	} {
		if strings.Count(config, r.doc) != 1 {
			t.Fatalf("docs/postgresql.md#failover's HAProxy configuration: got %d of %q, want one (the test replaces it)", strings.Count(config, r.doc), r.doc)
		}
		config = strings.Replace(config, r.doc, r.test, 1)
	}
	return config
}

// failoverBalancer is a running HAProxy: its collector frontend's URL and its
// stats page's.
type failoverBalancer struct {
	collector, stats string
	log              *syncBuffer
}

// startHAProxy writes the configuration to a folder of the test's and
// runs HAProxy in the foreground on free ports of 127.0.0.1, in front of
// the collectors at a and b; it is stopped at the test's cleanup.
func startHAProxy(t *testing.T, haproxy, a, b string) *failoverBalancer {
	t.Helper()
	front, stats := failoverAddr(t), failoverAddr(t)
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(haproxyConfig(t, front, stats, a, b)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(haproxy, "-c", "-q", "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
	lb := &failoverBalancer{collector: "http://" + front, stats: "http://" + stats + "/stats;csv", log: &syncBuffer{}}
	cmd := exec.Command(haproxy, "-db", "-f", path)
	cmd.Stdout, cmd.Stderr = lb.log, lb.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return lb
}

// failoverAddr is a free port of 127.0.0.1, as host:port.
func failoverAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// status is the state HAProxy's stats page gives server in backend
// collectors ("UP", "DOWN", "UP 1/2" while going down...), or why there
// is none.
func (lb *failoverBalancer) status(server string) string {
	res, err := http.Get(lb.stats)
	if err != nil {
		return err.Error()
	}
	defer res.Body.Close()
	r := csv.NewReader(res.Body)
	r.FieldsPerRecord = -1
	records, err := r.ReadAll()
	if err != nil || len(records) == 0 {
		return fmt.Sprintf("unreadable stats: %v", err)
	}
	col := map[string]int{}
	for i, name := range records[0] {
		col[strings.TrimPrefix(name, "# ")] = i
	}
	for _, rec := range records[1:] {
		if len(rec) > col["status"] && rec[col["pxname"]] == "collectors" && rec[col["svname"]] == server {
			return rec[col["status"]]
		}
	}
	return "no such server in the stats"
}

// waitStatus waits until HAProxy gives server the state want.
func (lb *failoverBalancer) waitStatus(t *testing.T, server, want string) {
	t.Helper()
	failoverPoll(t, "HAProxy to see "+server+" "+want, func() (bool, string) {
		got := lb.status(server)
		return got == want, got + "\n" + lb.log.String()
	})
}

// failoverAnswer is what one request of the load got.
type failoverAnswer struct {
	url            string
	events         int
	sent, answered time.Time
	status         int    // 0: no answer
	err            string // why there was no answer
	retryAfter     string
	code, message  string // the error envelope's
	body           string
}

func (a failoverAnswer) String() string {
	if a.status == 0 {
		return fmt.Sprintf("no answer to %d events after %v: %s", a.events, a.answered.Sub(a.sent).Round(time.Millisecond), a.err)
	}
	return fmt.Sprintf("%d (Retry-After %q) %s", a.status, a.retryAfter, strings.TrimSpace(a.body))
}

// failoverLoad is the senders: each posts a batch of its size (1, 5 or
// 20 events) until it is answered 202, then a new one.
type failoverLoad struct {
	url     string
	stop    atomic.Bool
	seq     atomic.Int64
	wg      sync.WaitGroup
	mu      sync.Mutex
	acked   []string // ids answered 202
	ok      int      // the senders' requests answered 202
	answers []failoverAnswer
}

func startFailoverLoad(t *testing.T, url string, senders int) *failoverLoad {
	l := &failoverLoad{url: url}
	t.Cleanup(l.finish)
	for w := range senders {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			client := &http.Client{Timeout: 20 * time.Second}
			var pending []string
			for !l.stop.Load() {
				if pending == nil {
					pending = l.ids([]int{1, 5, 20}[w%3])
				}
				ans := l.send(client, l.url, pending)
				if ans.status == http.StatusAccepted {
					pending = nil
					continue
				}
				// The same events again, as a client keeps what was not
				// acknowledged; the pause only keeps a sender from
				// spinning while nothing can take them (a client would
				// wait Retry-After, which would only lengthen the test).
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	return l
}

// ids are n new event ids.
func (l *failoverLoad) ids(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("00000000-0000-4000-8000-%012d", l.seq.Add(1))
	}
	return ids
}

// send posts the events of ids to the collector at base and records the
// answer; the ids answered 202 are kept as acknowledged.
func (l *failoverLoad) send(client *http.Client, base string, ids []string) failoverAnswer {
	var events []string
	for _, id := range ids {
		events = append(events, fmt.Sprintf(`{"id":%q,"site_id":"web","anon_id":"visitor-%s","type":"pageview","url":"https://shop.example/p"}`, id, id[len(id)-2:]))
	}
	body := "[" + strings.Join(events, ",") + "]"
	req, _ := http.NewRequest("POST", base+"/v1/events", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer web")
	req.Header.Set("Content-Type", "application/json")
	ans := failoverAnswer{url: base, events: len(ids), sent: time.Now()}
	res, err := client.Do(req)
	ans.answered = time.Now()
	if err != nil {
		ans.err = err.Error()
	} else {
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		ans.status, ans.retryAfter, ans.body = res.StatusCode, res.Header.Get("Retry-After"), string(raw)
		var envelope struct {
			Error      struct{ Code, Message string }
			Accepted   int
			Duplicates int
		}
		json.NewDecoder(bytes.NewReader(raw)).Decode(&envelope)
		ans.code, ans.message = envelope.Error.Code, envelope.Error.Message
		// An event answered 202 but quarantined or dropped is not
		// stored: the test's events must all be accepted (or known).
		if ans.status == http.StatusAccepted && envelope.Accepted+envelope.Duplicates != len(ids) {
			ans.status, ans.err = -1, "202 without every event accepted or a duplicate"
		}
	}
	l.mu.Lock()
	l.answers = append(l.answers, ans)
	if ans.status == http.StatusAccepted {
		l.acked = append(l.acked, ids...)
		if base == l.url {
			l.ok++
		}
	}
	l.mu.Unlock()
	return ans
}

// okCount is how many of the senders' requests were answered 202.
func (l *failoverLoad) okCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ok
}

// waitOK waits until n of the senders' requests are answered 202.
func (l *failoverLoad) waitOK(t *testing.T, n int) {
	t.Helper()
	failoverPoll(t, fmt.Sprintf("%d requests answered 202", n), func() (bool, string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		last := "no answer yet"
		if len(l.answers) > 0 {
			last = l.answers[len(l.answers)-1].String()
		}
		return l.ok >= n, fmt.Sprintf("%d; the last answer: %s", l.ok, last)
	})
}

// between is the answers of the load's senders (not the test's own
// requests) answered from since on and sent before until.
func (l *failoverLoad) between(since, until time.Time) []failoverAnswer {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []failoverAnswer
	for _, a := range l.answers {
		if a.url == l.url && !a.answered.Before(since) && a.sent.Before(until) {
			out = append(out, a)
		}
	}
	return out
}

// finish stops the senders and waits for their last answers.
func (l *failoverLoad) finish() {
	l.stop.Store(true)
	l.wg.Wait()
}
