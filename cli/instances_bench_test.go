package cli

import (
	"cmp"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tally-analytics/tally/internal/dbtest"
)

// Run with (docs/benchmarks.md#postgresql):
//
//	go test . -run '^$' -bench Instances -benchtime 20000x -count 3
//
// BenchmarkInstances runs the real binary: one instance on a SQLite file
// (sqlite), one instance on PostgreSQL (pg1) and two instances on one
// PostgreSQL database (pg2), each fed single events (single) and batches
// of 100 (batch100) over HTTP by 32 senders of this process, spread
// round-robin over the instances. The PostgreSQL is a throw-away cluster
// of the benchmark's own (internal/dbtest, fsync off unless
// TALLY_BENCH_PG_FSYNC=on), so its processes' CPU is the benchmark's
// alone. DURABILITY is TALLY_BENCH_DURABILITY (default power: SQLite
// fsyncs each commit, PostgreSQL runs synchronous_commit=on).
//
// Reported per run, beside events/s: the CPU time of the instances per
// event (inst-us/event, user+sys from /proc/<pid>/stat) and of every
// process of the PostgreSQL cluster (pg-us/event: the postmaster, its
// children and the children it reaped), the WAL it wrote per event
// (wal-B/event, pg_current_wal_lsn) and, with fsync on, how many WAL
// flushes it made per event (wal-syncs/event, pg_stat_wal); the mean
// number of the database's sessions waiting on a row lock and on an
// advisory lock (sampled every 50 ms), and its deadlocks. CPU per event does not
// depend on what else the shared machine runs, events/s does.
func BenchmarkInstances(b *testing.B) {
	bin := buildBinary(b)
	var settings []string
	if os.Getenv("TALLY_BENCH_PG_FSYNC") == "on" {
		settings = append(settings, "fsync=on")
	}
	statements := os.Getenv("TALLY_BENCH_PG_STATEMENTS") != ""
	if statements {
		settings = append(settings, "shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track_planning=on")
	}
	cluster := dbtest.StartPostgresWith(b, "tally", settings...)
	admin, err := sql.Open("pgx", cluster)
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	if statements {
		if _, err := admin.Exec(`CREATE EXTENSION pg_stat_statements`); err != nil {
			b.Fatal(err)
		}
	}
	postmaster := postmasterPID(b, admin)
	durability := cmp.Or(os.Getenv("TALLY_BENCH_DURABILITY"), "power")
	for _, backend := range []string{"sqlite", "pg1", "pg2"} {
		for _, shape := range []struct {
			name string
			per  int
		}{{"single", 1}, {"batch100", 100}} {
			b.Run(backend+"/"+shape.name, func(b *testing.B) {
				env := []string{"ADMIN_TOKEN=tok", "INGEST_RATE_LIMIT=0", "DURABILITY=" + durability}
				instances := 1
				var db string
				if backend == "sqlite" {
					env = append(env, "DATABASE_PATH="+filepath.Join(b.TempDir(), "bench.db"))
				} else {
					db = fmt.Sprintf("bench_%d", time.Now().UnixNano())
					if _, err := admin.Exec(`CREATE DATABASE ` + db); err != nil {
						b.Fatal(err)
					}
					u := strings.Replace(cluster, "/postgres?", "/"+db+"?", 1)
					env = append(env, "DATABASE_URL="+u)
					if backend == "pg2" {
						instances = 2
					}
				}
				var procs []*process
				for i := range instances {
					procs = append(procs, start(b, bin, env...))
					if i == 0 {
						benchProvision(b, procs[0])
					}
				}
				for _, p := range procs[1:] {
					deadline := time.Now().Add(30 * time.Second)
					for code := 0; code != 200; {
						if time.Now().After(deadline) {
							b.Fatalf("the second instance does not see the site: got %d, want 200 within 30 s", code)
						}
						code, _ = multiCall(b, "GET", p.query+"/v1/sites/bench", "tok", "", nil)
						time.Sleep(10 * time.Millisecond) // polling for the other instance to see the site
					}
				}
				// Warm-up, outside the figures: connections, caches, the
				// first pages of every table.
				benchSend(b, procs, 500/shape.per, shape.per, 0)

				var walFrom string
				if statements && db != "" {
					if err := admin.QueryRow(`SELECT pg_stat_statements_reset()::text, pg_current_wal_lsn()::text`).Scan(new(string), &walFrom); err != nil {
						b.Fatal(err)
					}
				}
				before := benchSnapshot(b, procs, admin, postmaster, db != "")
				requests := max(1, b.N/shape.per)
				// What the database's sessions wait for meanwhile, sampled
				// every 50 ms: row locks (transactionid, tuple: two
				// writers on one row) and advisory locks (one visitor's
				// or id's events on two instances at once).
				var samples, rowWaits, advisoryWaits int
				stopSampling, sampled := make(chan struct{}), make(chan struct{})
				go func() {
					defer close(sampled)
					for {
						select {
						case <-stopSampling:
							return
						case <-time.After(50 * time.Millisecond):
						}
						if db == "" {
							continue
						}
						var row, adv int
						if admin.QueryRow(`SELECT count(*) FILTER (WHERE wait_event IN ('transactionid', 'tuple')),
							count(*) FILTER (WHERE wait_event = 'advisory') FROM pg_stat_activity WHERE datname = $1`, db).Scan(&row, &adv) == nil {
							samples++
							rowWaits += row
							advisoryWaits += adv
						}
					}
				}()
				b.ResetTimer()
				t0 := time.Now()
				benchSend(b, procs, requests, shape.per, 1)
				elapsed := time.Since(t0)
				b.StopTimer()
				close(stopSampling)
				<-sampled
				after := benchSnapshot(b, procs, admin, postmaster, db != "")
				events := float64(requests * shape.per)
				b.ReportMetric(events/elapsed.Seconds(), "events/s")
				b.ReportMetric(float64(after.instances-before.instances)/float64(time.Microsecond)/events, "inst-us/event")
				for i := range procs {
					b.ReportMetric(float64(after.each[i]-before.each[i])/float64(time.Microsecond)/events, fmt.Sprintf("inst%d-us/event", i+1))
				}
				if db != "" {
					b.ReportMetric(float64(after.pg-before.pg)/float64(time.Microsecond)/events, "pg-us/event")
					b.ReportMetric(float64(after.wal-before.wal)/events, "wal-B/event")
					if samples > 0 {
						b.ReportMetric(float64(rowWaits)/float64(samples), "rowlock-waiters")
						b.ReportMetric(float64(advisoryWaits)/float64(samples), "advisory-waiters")
					}
				}
				if statements && db != "" {
					benchStatements(b, admin, db, events)
					benchWAL(b, strings.Replace(cluster, "/postgres?", "/"+db+"?", 1), walFrom, events)
				}
				load, _ := os.ReadFile("/proc/loadavg")
				b.Logf("%s %s durability=%s fsync=%s: %.0f events in %s; load average %s", backend, shape.name, durability,
					cmp.Or(os.Getenv("TALLY_BENCH_PG_FSYNC"), "off"), events, elapsed.Round(time.Millisecond), strings.Join(strings.Fields(string(load))[:3], " "))
				for _, p := range procs {
					p.cmd.Process.Kill()
					p.cmd.Wait()
				}
				// WAL flushes per event (fsync=on only: with fsync off
				// PostgreSQL counts none). The instances' backends report
				// their counts when they exit, so this reads after the
				// kill; counts the warm-up did not report before the run
				// began are in it (at most 500 commits).
				if db != "" && os.Getenv("TALLY_BENCH_PG_FSYNC") == "on" {
					var syncs float64
					if err := admin.QueryRow(`SELECT wal_sync::float8 FROM pg_stat_wal`).Scan(&syncs); err != nil {
						b.Fatal(err)
					}
					b.ReportMetric((syncs-before.syncs)/events, "wal-syncs/event")
				}
				if db != "" {
					var deadlocks float64
					if err := admin.QueryRow(`SELECT deadlocks::float8 FROM pg_stat_database WHERE datname = $1`, db).Scan(&deadlocks); err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(deadlocks, "deadlocks")
				}
				if db != "" {
					if _, err := admin.Exec(`DROP DATABASE ` + db + ` WITH (FORCE)`); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// benchStatements logs what pg_stat_statements counted in database db
// during the run (TALLY_BENCH_PG_STATEMENTS=1): the statements by total
// time, with their calls, planning and execution time a call, to find
// where the database's CPU per event goes (docs/benchmarks.md#postgresql).
func benchStatements(b *testing.B, admin *sql.DB, db string, events float64) {
	rows, err := admin.Query(`SELECT calls, plans, total_plan_time / greatest(calls, 1) * 1000, total_exec_time / greatest(calls, 1) * 1000,
		rows, left(regexp_replace(query, '\s+', ' ', 'g'), 90)
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)
		ORDER BY total_plan_time + total_exec_time DESC LIMIT 20`, db)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var out strings.Builder
	var total float64
	fmt.Fprintf(&out, "%8s %8s %10s %10s %8s  %s\n", "calls", "plans", "plan-us", "exec-us", "rows", "statement")
	for rows.Next() {
		var calls, plans, nrows int64
		var plan, exec float64
		var query string
		if err := rows.Scan(&calls, &plans, &plan, &exec, &nrows, &query); err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(&out, "%8d %8d %10.1f %10.1f %8d  %s\n", calls, plans, plan, exec, nrows, query)
		total += float64(calls) * (plan + exec)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	// Printed whole: a benchmark's log keeps only its first lines.
	fmt.Fprintf(os.Stderr, "%s statements of the run, by total time (%.1f us of statements an event):\n%s", b.Name(), total/events, out.String())
}

// benchWAL prints the WAL written since LSN from (TALLY_BENCH_PG_STATEMENTS=1),
// by the relation of each record's first block (pg_walinspect), in bytes
// per event: which tables and indexes the WAL per event goes to.
func benchWAL(b *testing.B, url, from string, events float64) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE EXTENSION IF NOT EXISTS pg_walinspect`); err != nil {
		b.Fatal(err)
	}
	rows, err := db.Query(`SELECT coalesce(c.relname, w.rmgr || ' ' || w.kind), count(*), sum(w.len)::float8, sum(w.fpi)::float8
		FROM (SELECT resource_manager AS rmgr, split_part(record_type, ' ', 1) AS kind, record_length AS len, fpi_length AS fpi,
			(regexp_match(block_ref, 'rel \d+/\d+/(\d+)'))[1]::oid AS node
			FROM pg_get_wal_records_info($1::pg_lsn, pg_current_wal_lsn())) w
		LEFT JOIN pg_class c ON c.relfilenode = w.node
		GROUP BY 1 ORDER BY 3 DESC LIMIT 20`, from)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var out strings.Builder
	fmt.Fprintf(&out, "%-34s %10s %12s %12s\n", "relation (or record)", "records", "B/event", "fpi-B/event")
	for rows.Next() {
		var name string
		var n int64
		var bytes, fpi float64
		if err := rows.Scan(&name, &n, &bytes, &fpi); err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(&out, "%-34s %10d %12.1f %12.1f\n", name, n, bytes/events, fpi/events)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "%s WAL of the run by relation:\n%s", b.Name(), out.String())
}

// benchProvision makes workspace bench and site bench through p.
func benchProvision(b *testing.B, p *process) {
	for _, c := range []struct{ path, body string }{
		{"/v1/workspaces", `{"name":"Bench","slug":"bench"}`},
		{"/v1/workspaces/bench/sites", `{"id":"bench","name":"Bench"}`},
	} {
		if code, body := multiCall(b, "POST", p.query+c.path, "tok", c.body, nil); code != 201 {
			b.Fatalf("POST %s: got %d %s, want 201", c.path, code, body)
		}
	}
}

// benchSend posts requests requests of per events each (native single
// events to /v1/events, batches to /v1/s2s/events) from 32 senders,
// round-robin over procs; seed varies the visitors between calls.
func benchSend(b *testing.B, procs []*process, requests, per int, seed uint64) {
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for {
				n := int(next.Add(1)) - 1
				if n >= requests {
					return
				}
				p := procs[n%len(procs)]
				path, body := "/v1/events", ""
				if per == 1 {
					body = benchEventJSON(rng)
				} else {
					path = "/v1/s2s/events"
					parts := make([]string, per)
					for i := range parts {
						parts[i] = benchEventJSON(rng)
					}
					body = "[" + strings.Join(parts, ",") + "]"
				}
				req, _ := http.NewRequest("POST", p.collector+path, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer bench")
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("User-Agent", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36")
				res, err := client.Do(req)
				if err != nil {
					failed.Store(err.Error())
					return
				}
				res.Body.Close()
				if res.StatusCode != 202 {
					failed.Store(fmt.Sprintf("%s: got %d, want 202", path, res.StatusCode))
					return
				}
			}
		}()
	}
	wg.Wait()
	client.CloseIdleConnections()
	if f := failed.Load(); f != nil {
		b.Fatal(f)
	}
}

var benchPages = []string{"/", "/pricing", "/docs", "/blog/post-1", "/blog/post-2", "/signup", "/checkout"}

// benchEventJSON is a realistic event of about 400 bytes, as server's
// BenchmarkIngest sends: a pageview (80%), a purchase or a click, of one
// of 20,000 recurring visitors.
func benchEventJSON(rng *rand.Rand) string {
	e := map[string]any{
		"id": uuid.NewString(), "site_id": "bench", "anon_id": "visitor-" + strconv.Itoa(rng.IntN(20000)),
		"type": "pageview", "url": "https://shop.example" + benchPages[rng.IntN(len(benchPages))] + "?utm_source=newsletter",
		"referrer":   "https://news.example/article/" + strconv.Itoa(rng.IntN(500)),
		"user_agent": "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36",
		"properties": map[string]any{"title": "A page of the shop", "lang": "en", "screen": "1920x1080"},
	}
	switch r := rng.IntN(10); {
	case r == 0:
		e["type"], e["properties"] = "purchase", map[string]any{"amount": 49.5, "currency": "EUR", "plan": "pro", "items": 3}
	case r == 1:
		e["type"], e["properties"] = "click", map[string]any{"button": "signup", "position": "header"}
	}
	out, _ := json.Marshal(e)
	return string(out)
}

// benchCPU is what benchSnapshot reads: CPU time of the instances (in
// all and each) and of the PostgreSQL cluster, the WAL position and its
// flushes.
type benchCPU struct {
	instances, pg time.Duration
	each          []time.Duration
	wal, syncs    float64
}

func benchSnapshot(b *testing.B, procs []*process, admin *sql.DB, postmaster int, pg bool) benchCPU {
	var s benchCPU
	for _, p := range procs {
		c := procCPU(p.cmd.Process.Pid, false)
		s.each = append(s.each, c)
		s.instances += c
	}
	if pg {
		s.pg = procCPU(postmaster, true)
		for _, child := range childPIDs(postmaster) {
			s.pg += procCPU(child, false)
		}
		if err := admin.QueryRow(`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8, wal_sync::float8 FROM pg_stat_wal`).Scan(&s.wal, &s.syncs); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// clockTick is the kernel's USER_HZ, the unit of /proc/<pid>/stat's times
// (100 on Linux everywhere).
const clockTick = 10 * time.Millisecond

// procStat is the fields of /proc/pid/stat after the command's name.
func procStat(pid int) []string {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(raw)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
}

// procCPU is pid's user+sys time, with its reaped children's when
// children is set.
func procCPU(pid int, children bool) time.Duration {
	f := procStat(pid)
	if len(f) < 15 {
		return 0
	}
	// After the name: state ppid ... utime(12th) stime(13th) cutime cstime.
	fields := []int{11, 12}
	if children {
		fields = append(fields, 13, 14)
	}
	var ticks int64
	for _, i := range fields {
		n, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * clockTick
}

// childPIDs lists the processes whose parent is pid.
func childPIDs(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := procStat(n); len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}

// postmasterPID is the pid of the cluster's postmaster, from its data
// directory's postmaster.pid.
func postmasterPID(b *testing.B, admin *sql.DB) int {
	var dir string
	if err := admin.QueryRow(`SHOW data_directory`).Scan(&dir); err != nil {
		b.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		b.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0]))
	if err != nil {
		b.Fatal(err)
	}
	return pid
}
