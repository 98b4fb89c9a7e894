package cli

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tally-analytics/tally/internal/dbtest"
)

// importEnv is the environment `tally import` runs with in these tests.
func importEnv(extra map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := extra[k]; ok {
			return v
		}
		if k == "ADMIN_TOKEN" {
			return "tok"
		}
		return ""
	}
}

// runImport runs `tally import` in this process.
func runImport(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr strings.Builder
	code := Run(append([]string{"import"}, args...), importEnv(env), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// call sends a request to a server process's query API with the admin token.
func call(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// newSite creates workspace a and site web on a server process.
func newSite(t *testing.T, p *process) {
	t.Helper()
	for _, r := range [][2]string{{"/v1/workspaces", `{"name":"a","slug":"a"}`}, {"/v1/workspaces/a/sites", `{"id":"web","name":"w"}`}} {
		if code, b := call(t, "POST", p.query+r[0], r[1]); code != 201 {
			t.Fatalf("POST %s: got %d %s, want 201", r[0], code, b)
		}
	}
}

// report is what the query API answers about an imported site: the
// totals, pages and sources, as [dimension..., metrics...] rows.
func report(t *testing.T, p *process) map[string][][]any {
	t.Helper()
	out := map[string][][]any{}
	for name, q := range map[string]string{
		"totals":  `{"metrics":["visitors","visits","pageviews","events"],"date_range":"all"}`,
		"pages":   `{"metrics":["visitors","pageviews"],"date_range":"all","dimensions":["event:page"],"order_by":[["pageviews","desc"],["event:page","asc"]]}`,
		"sources": `{"metrics":["visitors"],"date_range":"all","dimensions":["visit:source"],"order_by":[["visitors","desc"],["visit:source","asc"]]}`,
		"names":   `{"metrics":["events"],"date_range":"all","dimensions":["event:name"],"order_by":[["events","desc"],["event:name","asc"]]}`,
	} {
		code, b := call(t, "POST", p.query+"/v1/sites/web/query", q)
		if code != 200 {
			t.Fatalf("query %s: got %d %s, want 200", name, code, b)
		}
		var ans struct {
			Results []struct {
				Dimensions []any `json:"dimensions"`
				Metrics    []any `json:"metrics"`
			} `json:"results"`
		}
		if err := json.Unmarshal(b, &ans); err != nil {
			t.Fatal(err)
		}
		for _, r := range ans.Results {
			out[name] = append(out[name], append(r.Dimensions, r.Metrics...))
		}
	}
	return out
}

// rows turns a compact literal into report rows for comparison.
func rows(t *testing.T, s string) [][]any {
	t.Helper()
	var v [][]any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func checkReport(t *testing.T, got map[string][][]any, want map[string]string) {
	t.Helper()
	for name, w := range want {
		if !reflect.DeepEqual(got[name], rows(t, w)) {
			gb, _ := json.Marshal(got[name])
			t.Errorf("%s: got %s, want %s", name, gb, w)
		}
	}
}

// auditImports are the workspace's site.import audit entries, newest first.
func auditImports(t *testing.T, p *process) []map[string]any {
	t.Helper()
	code, b := call(t, "GET", p.query+"/v1/workspaces/a/audit", "")
	if code != 200 {
		t.Fatalf("audit: got %d %s", code, b)
	}
	var ans struct {
		Entries []map[string]any `json:"entries"`
	}
	json.Unmarshal(b, &ans)
	var out []map[string]any
	for _, e := range ans.Entries {
		if e["action"] == "site.import" {
			out = append(out, e)
		}
	}
	return out
}

func gzipFile(t *testing.T, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	dst := filepath.Join(t.TempDir(), filepath.Base(src)+".gz")
	os.WriteFile(dst, buf.Bytes(), 0o644)
	return dst
}

// GoatCounter's export into a running server: the totals counted by hand
// from testdata/import/goatcounter-v2.csv (see testdata/import/README.md), read back
// through the query API; the same rows again (gzipped) import nothing and
// change no answer; each run is one audit entry with counts and names only.
func TestImportGoatCounter(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	p := start(t, bin, "DATABASE_PATH="+filepath.Join(t.TempDir(), "a.db"), "ADMIN_TOKEN=tok")
	newSite(t, p)
	file := filepath.Join("../testdata", "import", "goatcounter-v2.csv")
	code, stdout, stderr := runImport(t, nil, "--site", "web", "--from", "goatcounter", "--url", p.query, file)
	if code != 0 {
		t.Fatalf("import: got exit %d, %s", code, stderr)
	}
	if !strings.Contains(stdout, "8 rows from goatcounter: 8 imported, 0 already there, 1 skipped") {
		t.Errorf("got %q, want 8 rows imported and the bot skipped", stdout)
	}
	// Three sessions, three visits; seven pageviews and one event; /blog/a
	// twice in one second is two pageviews; the event has no page (its
	// path is its name), so it counts under (not set). Sources: an h referrer's host
	// by its name (google.com is Google, docs/intake.md#source-names), a g
	// referrer ("Hacker News") as utm_source, which news.ycombinator.com is too.
	want := map[string]string{
		"totals":  `[[3,3,7,8]]`,
		"pages":   `[["/blog/a",1,3],["/",2,2],["/about",1,1],["/contact",1,1],["(not set)",1,0]]`,
		"sources": `[["Hacker News",2],["Google",1]]`,
		"names":   `[["pageview",7],["signup-click",1]]`,
	}
	first := report(t, p)
	checkReport(t, first, want)

	code, stdout, stderr = runImport(t, nil, "--site", "web", "--from", "goatcounter", "--url", p.query, gzipFile(t, file))
	if code != 0 || !strings.Contains(stdout, "8 rows from goatcounter: 0 imported, 8 already there") {
		t.Fatalf("second import: got exit %d, %q %q; want 0 imported, 8 already there", code, stdout, stderr)
	}
	if again := report(t, p); !reflect.DeepEqual(again, first) {
		t.Errorf("after the second import: got %v, want %v", again, first)
	}
	entries := auditImports(t, p)
	if len(entries) != 2 {
		t.Fatalf("got %d site.import audit entries, want 2 (one per import)", len(entries))
	}
	meta, _ := json.Marshal(entries[1]["metadata"])
	wantMeta := `{"duplicates":0,"duration_ms":`
	if !strings.HasPrefix(string(meta), wantMeta) || !strings.Contains(string(meta), `"files":["goatcounter-v2.csv"],"imported":8,"rows":8,"skipped":1,"source":"goatcounter"}`) {
		t.Errorf("got audit metadata %s, want source, files and counts only", meta)
	}
	if strings.Contains(string(meta), "/blog") || strings.Contains(string(meta), "1b9d6bcd") {
		t.Errorf("got row data in the audit entry: %s", meta)
	}
}

// Umami's CSV into a stopped server's file: the command opens the file
// itself; the server started again answers the hand-counted totals.
// While a server has the file open, the command refuses.
func TestImportUmamiCSVIntoAStoppedServer(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	dbPath := filepath.Join(t.TempDir(), "a.db")
	p := start(t, bin, "DATABASE_PATH="+dbPath, "ADMIN_TOKEN=tok")
	newSite(t, p)
	file := filepath.Join("../testdata", "import", "umami.csv")
	nobody := "127.0.0.1:1" // no server answers there: the command goes to the file
	code, _, stderr := runImport(t, map[string]string{"DATABASE_PATH": dbPath, "QUERY_ADDR": nobody}, "--site", "web", "--from", "umami", file)
	if code != 1 || !strings.Contains(stderr, "open in another process") {
		t.Fatalf("import beside a running server: got exit %d, %q; want 1 and a refusal", code, stderr)
	}
	p.cmd.Process.Signal(interruptSignal)
	p.cmd.Wait()

	code, stdout, stderr := runImport(t, map[string]string{"DATABASE_PATH": dbPath, "QUERY_ADDR": nobody}, "--site", "web", "--from", "umami", file)
	if code != 0 || !strings.Contains(stdout, "6 rows from umami: 6 imported, 0 already there, 1 skipped") {
		t.Fatalf("import into the file: got exit %d, %q %q", code, stdout, stderr)
	}
	code, stdout, _ = runImport(t, map[string]string{"DATABASE_PATH": dbPath, "QUERY_ADDR": nobody}, "--site", "web", "--from", "umami", file)
	if code != 0 || !strings.Contains(stdout, "0 imported, 6 already there") {
		t.Fatalf("second import into the file: got exit %d, %q", code, stdout)
	}
	p = start(t, bin, "DATABASE_PATH="+dbPath, "ADMIN_TOKEN=tok")
	// Three sessions; five pageviews and one custom event; the event_type 3
	// row is skipped. Sources: the referrer_domain's host, www. dropped, by
	// its name.
	checkReport(t, report(t, p), map[string]string{
		"totals":  `[[3,3,5,6]]`,
		"pages":   `[["/",2,2],["/pricing",2,2],["/docs",1,1]]`,
		"sources": `[["Direct / None",1],["Google",1],["Hacker News",1]]`,
		"names":   `[["pageview",5],["signup",1]]`,
	})
	if n := len(auditImports(t, p)); n != 2 {
		t.Errorf("got %d site.import audit entries, want 2", n)
	}
}

// A site exported from one server and imported into a fresh one exports
// the same bytes (ids, times, received times, properties, agent and place),
// and importing it again changes nothing.
func TestImportTallyExportRoundTrip(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	a := start(t, bin, "DATABASE_PATH="+filepath.Join(t.TempDir(), "a.db"), "ADMIN_TOKEN=tok", "BOT_FILTER=off")
	newSite(t, a)
	var batch []string
	for i := 0; i < 1200; i++ { // three import chunks
		props := `null`
		if i%3 == 0 {
			props = fmt.Sprintf(`{"plan":"pro","n":%d,"nested":{"a":[1,2]}}`, i)
		}
		user := ""
		if i%7 == 0 {
			user = fmt.Sprintf(`,"user_id":"u%d"`, i%5)
		}
		typ := "pageview"
		if i%4 == 0 {
			typ = "signup"
		}
		batch = append(batch, fmt.Sprintf(`{"id":"%08x-0000-4000-8000-%012x","site_id":"web","anon_id":"v%d","type":"%s","ts":"2026-01-%02dT%02d:%02d:00.%03dZ","url":"https://acme.example/p/%d?utm_source=n%d","referrer":"https://ref%d.example/x","user_agent":"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36","properties":%s%s}`,
			i, i, i%40, typ, 10+i%20, i%24, i%60, i%1000, i%9, i%3, i%4, props, user))
		if len(batch) == 300 {
			req, _ := http.NewRequest("POST", a.collector+"/v1/s2s/events", strings.NewReader("["+strings.Join(batch, ",")+"]"))
			req.Header.Set("Authorization", "Bearer web")
			res, err := http.DefaultClient.Do(req)
			if err != nil || res.StatusCode != 202 {
				t.Fatalf("send: got %v %v, want 202", res, err)
			}
			res.Body.Close()
			batch = nil
		}
	}
	export := func(p *process) []byte {
		code, b := call(t, "GET", p.query+"/v1/sites/web/export?from=2026-01-01&to=2026-01-31&format=ndjson", "")
		if code != 200 {
			t.Fatalf("export: got %d %s", code, b)
		}
		return b
	}
	exported := export(a)
	if n := bytes.Count(exported, []byte("\n")); n != 1200 {
		t.Fatalf("got %d exported events, want 1200", n)
	}
	file := filepath.Join(t.TempDir(), "web.ndjson")
	os.WriteFile(file, exported, 0o644)

	b := start(t, bin, "DATABASE_PATH="+filepath.Join(t.TempDir(), "b.db"), "ADMIN_TOKEN=tok")
	newSite(t, b)
	code, stdout, stderr := runImport(t, nil, "--site", "web", "--from", "tally", "--url", b.query, file)
	if code != 0 || !strings.Contains(stdout, "1200 rows from tally: 1200 imported") {
		t.Fatalf("import: got exit %d, %q %q", code, stdout, stderr)
	}
	if got := export(b); !bytes.Equal(got, exported) {
		t.Fatalf("the fresh instance's export differs from the original's:\n got %.300s\nwant %.300s", got, exported)
	}
	before := report(t, b)
	totals, _ := json.Marshal(report(t, a)["totals"])
	checkReport(t, before, map[string]string{"totals": string(totals)})
	code, stdout, _ = runImport(t, nil, "--site", "web", "--from", "tally", "--url", b.query, file)
	if code != 0 || !strings.Contains(stdout, "0 imported, 1200 already there") {
		t.Fatalf("second import: got exit %d, %q", code, stdout)
	}
	if got := export(b); !bytes.Equal(got, exported) {
		t.Fatal("the export changed after importing again")
	}
	if after := report(t, b); !reflect.DeepEqual(after, before) {
		t.Errorf("after importing again: got %v, want %v", after, before)
	}

	// The CSV export, into a third instance, gives the same events too.
	code, csvExport := call(t, "GET", a.query+"/v1/sites/web/export?from=2026-01-01&to=2026-01-31&format=csv", "")
	if code != 200 {
		t.Fatalf("CSV export: got %d", code)
	}
	csvFile := filepath.Join(t.TempDir(), "web.csv")
	os.WriteFile(csvFile, csvExport, 0o644)
	c := start(t, bin, "DATABASE_PATH="+filepath.Join(t.TempDir(), "c.db"), "ADMIN_TOKEN=tok")
	newSite(t, c)
	if code, stdout, stderr := runImport(t, nil, "--site", "web", "--from", "tally", "--url", c.query, csvFile); code != 0 || !strings.Contains(stdout, "1200 imported") {
		t.Fatalf("CSV import: got exit %d, %q %q", code, stdout, stderr)
	}
	if got := export(c); !bytes.Equal(got, exported) {
		t.Fatalf("the export after importing the CSV export differs:\n got %.300s\nwant %.300s", got, exported)
	}
}

// A file that cannot be imported is refused before anything is stored,
// with its name and line: a bad row after several chunks' worth of good
// ones stores none of them.
func TestImportRefusesBadFiles(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	p := start(t, bin, "DATABASE_PATH="+filepath.Join(t.TempDir(), "a.db"), "ADMIN_TOKEN=tok")
	newSite(t, p)
	gcHead := "2Path,Title,Event,UserAgent,Browser,System,Session,Bot,Referrer,Referrer scheme,Screen size,Location,FirstVisit,Date\n"
	gcRow := func(path, date string) string {
		return path + ",T,false,,Firefox 1,Linux,s1,0,,,\"1,1,1\",DE,true," + date + "\n"
	}
	many := gcHead + strings.Repeat(gcRow("/a", "2024-03-01T10:00:00Z"), 1200) + gcRow("/a", "yesterday")
	tests := []struct {
		name, from, file, content, want string
	}{
		{"GoatCounter version 1", "goatcounter", "v1.csv", "1Path,Title,Event,Bot,Session,FirstVisit,Referrer,Referrer scheme,Browser,Screen size,Location,Date\n", `v1.csv:1: GoatCounter export format version "1"`},
		{"GoatCounter bad date after 1200 good rows", "goatcounter", "many.csv", many, `many.csv:1202: Date: want an RFC 3339 time, got "yesterday"`},
		{"GoatCounter short row", "goatcounter", "short.csv", gcHead + "/a,T,false\n", "short.csv:2: 3 fields, want 14"},
		{"GoatCounter bad CSV quoting", "goatcounter", "quote.csv", gcHead + gcRow("\"/a", "2024-03-01T10:00:00Z"), "quote.csv:2: not CSV"},
		{"Umami without event_id", "umami", "u.csv", "session_id,created_at,url_path,event_type\n", `u.csv:1: not an Umami CSV export: no column "event_id"`},
		{"Umami bad time", "umami", "t.csv", "event_id,session_id,created_at,url_path,event_type\ne1,s1,2024-03-15 10:00:00,/,1\ne2,s1,soon,/,1\n", `t.csv:3: created_at`},
		{"Tally NDJSON broken line", "tally", "x.ndjson", `{"id":"a","type":"pageview","url":null,"ts":"2026-01-01T00:00:00.000Z","anon_id":"v","referrer":null,"country":null,"city":null,"browser":null,"os":null,"device_type":null,"user_id":null,"properties":null,"received_at":"2026-01-01T00:00:00.000Z"}` + "\n{\"id\":\n", "x.ndjson:2: not a line of Tally's NDJSON export"},
		{"Tally bad type", "tally", "y.ndjson", `{"id":"a","type":"no spaces","ts":"2026-01-01T00:00:00.000Z","anon_id":"v","received_at":"2026-01-01T00:00:00.000Z"}` + "\n", "y.ndjson:1: type"},
		{"Tally CSV of another header", "tally", "z.csv", "id,type\n", "z.csv:1: not Tally's CSV export"},
		{"not gzip after gzip's magic", "goatcounter", "bad.csv.gz", "\x1f\x8b\x08garbage", "bad.csv.gz: not a gzip file"},
		{"missing file", "umami", "", "", "no such file"},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(dir, "absent.csv")
			if tt.file != "" {
				file = filepath.Join(dir, tt.file)
				os.WriteFile(file, []byte(tt.content), 0o644)
			}
			code, _, stderr := runImport(t, nil, "--site", "web", "--from", tt.from, "--url", p.query, file)
			if code != 1 || !strings.Contains(stderr, tt.want) || !strings.Contains(stderr, "nothing was imported") {
				t.Errorf("got exit %d, %q; want 1 and a message containing %q", code, stderr, tt.want)
			}
		})
	}
	checkReport(t, report(t, p), map[string]string{"totals": `[[0,0,0,0]]`})
	if n := len(auditImports(t, p)); n != 0 {
		t.Errorf("got %d site.import audit entries, want none", n)
	}
}

func TestImportUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no site", []string{"--from", "umami", "a.csv"}, "--site is required"},
		{"unknown source", []string{"--site", "web", "--from", "matomo", "a.csv"}, `--from "matomo": want one of goatcounter, plausible, tally, umami`},
		{"no file", []string{"--site", "web", "--from", "umami"}, "want at least one FILE"},
		{"database without website", []string{"--site", "web", "--from", "umami", "postgres://u@h/db"}, "--website"},
		{"website without database", []string{"--site", "web", "--from", "umami", "--website", "w", "a.csv"}, "--website goes with an Umami database URL only"},
		{"unknown flag", []string{"--fast"}, "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runImport(t, nil, tt.args...)
			if code != 2 || !strings.Contains(stderr, tt.want) {
				t.Errorf("got exit %d, %q; want 2 and %q", code, stderr, tt.want)
			}
		})
	}
}

// zipFiles writes files into a zip at name, by their base names.
func zipFiles(t *testing.T, name string, files []string) {
	t.Helper()
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		w, err := zw.Create(filepath.Base(file))
		if err == nil {
			_, err = w.Write(data)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// Plausible's CSV export (testdata/import/plausible: 35 visitors, 43
// visits, 88 pageviews over three days, counted in importer's
// TestPlausibleImportReadBack) through a running server: the command zips
// the CSVs and uploads them (POST /v1/sites/:siteId/imports/plausible);
// again changes nothing; a bad file is refused naming its line and not the
// server's temporary file; the same export into a stopped server's file
// answers alike.
func TestImportPlausible(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	files, err := filepath.Glob(filepath.Join("../testdata", "import", "plausible", "*.csv"))
	if err != nil || len(files) != 10 {
		t.Fatalf("got %d sample files (%v), want 10", len(files), err)
	}
	totals := func(p *process) string {
		t.Helper()
		code, b := call(t, "POST", p.query+"/v1/sites/web/query",
			`{"metrics":["visitors","visits","pageviews"],"date_range":"all","include":{"imports":true}}`)
		if code != 200 {
			t.Fatalf("query: got %d %s, want 200", code, b)
		}
		var ans struct {
			Results []struct {
				Metrics []any `json:"metrics"`
			} `json:"results"`
		}
		if err := json.Unmarshal(b, &ans); err != nil || len(ans.Results) != 1 {
			t.Fatalf("query: got %s", b)
		}
		got, _ := json.Marshal(ans.Results[0].Metrics)
		return string(got)
	}
	const want = `[35,43,88]`

	path := filepath.Join(t.TempDir(), "a.db")
	p := start(t, bin, "DATABASE_PATH="+path, "ADMIN_TOKEN=tok")
	newSite(t, p)
	for i := range 2 {
		code, stdout, stderr := runImport(t, nil, append([]string{"--site", "web", "--from", "plausible", "--url", p.query}, files...)...)
		if code != 0 || !strings.Contains(stdout, "through the server at") {
			t.Fatalf("import %d: got exit %d, %q %q; want it through the server", i+1, code, stdout, stderr)
		}
		if got := totals(p); got != want {
			t.Errorf("after import %d: got visitors, visits, pageviews %s, want %s", i+1, got, want)
		}
	}
	// One zip, as Plausible hands it out: the server keeps it under its
	// name, which the import's audit entry gives.
	zipped := filepath.Join(t.TempDir(), "example_com_20260104.zip")
	zipFiles(t, zipped, files)
	if code, stdout, stderr := runImport(t, nil, "--site", "web", "--from", "plausible", "--url", p.query, zipped); code != 0 {
		t.Fatalf("import of the zip: got exit %d, %q %q", code, stdout, stderr)
	}
	if _, b := call(t, "GET", p.query+"/v1/workspaces/a/audit?limit=1", ""); !strings.Contains(string(b), `"example_com_20260104.zip:imported_visitors_20260101_20260103.csv"`) {
		t.Errorf("the zip's audit entry: got %s, want its files named after the zip", b)
	}
	bad := filepath.Join(t.TempDir(), "imported_visitors_20260101_20260103.csv")
	if err := os.WriteFile(bad, []byte("date,visitors,pageviews,bounces,visits,visit_duration\n2026-01-01,ten,1,1,1,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runImport(t, nil, "--site", "web", "--from", "plausible", "--url", p.query, bad)
	if code != 1 || !strings.Contains(stderr, "line 2") || !strings.Contains(stderr, "invalid_import") || strings.Contains(stderr, os.TempDir()) {
		t.Errorf("bad file: got exit %d, %q; want 1, naming line 2, invalid_import, no temporary path", code, stderr)
	}
	if got := totals(p); got != want {
		t.Errorf("after the bad file: got %s, want %s (unchanged)", got, want)
	}

	path2 := filepath.Join(t.TempDir(), "b.db")
	p2 := start(t, bin, "DATABASE_PATH="+path2, "ADMIN_TOKEN=tok")
	newSite(t, p2)
	p2.cmd.Process.Signal(interruptSignal)
	p2.cmd.Wait()
	nobody := "127.0.0.1:1" // no server answers there: the command goes to the file
	code, stdout, stderr := runImport(t, map[string]string{"DATABASE_PATH": path2, "QUERY_ADDR": nobody}, append([]string{"--site", "web", "--from", "plausible"}, files...)...)
	if code != 0 {
		t.Fatalf("into the stopped server's file: got exit %d, %q %q", code, stdout, stderr)
	}
	p2 = start(t, bin, "DATABASE_PATH="+path2, "ADMIN_TOKEN=tok")
	if got := totals(p2); got != want {
		t.Errorf("imported into the file: got %s, want %s", got, want)
	}
}

// Umami's PostgreSQL tables (testdata/import/umami-postgres.sql: the events
// of testdata/import/umami.csv) read by the command itself, with --website
// and the database's URL, into a running server: the same hand-counted
// totals as the CSV's; the custom event keeps its event_data; another
// website's event is not read; running it again imports nothing.
func TestImportUmamiDatabase(t *testing.T) {
	t.Parallel()
	conn := dbtest.StartPostgres(t, "umami")
	script, err := os.ReadFile(filepath.Join("../testdata", "import", "umami-postgres.sql"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := sql.Open("pgx", conn)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := src.Exec(string(script)); err != nil {
		t.Fatal(err)
	}
	bin := buildBinary(t)
	p := start(t, bin, "DATABASE_PATH="+filepath.Join(t.TempDir(), "a.db"), "ADMIN_TOKEN=tok")
	newSite(t, p)
	args := []string{"--site", "web", "--from", "umami", "--website", "4fb7c6e2-6a1b-4b8e-9a53-6f2f0f5ad0c1", "--url", p.query, conn}
	code, stdout, stderr := runImport(t, nil, args...)
	if code != 0 || !strings.Contains(stdout, "6 rows from umami: 6 imported, 0 already there, 1 skipped") {
		t.Fatalf("import: got exit %d, %q %q; want 6 rows imported, the event_type 3 row skipped", code, stdout, stderr)
	}
	want := map[string]string{
		"totals":  `[[3,3,5,6]]`,
		"pages":   `[["/",2,2],["/pricing",2,2],["/docs",1,1]]`,
		"sources": `[["Direct / None",1],["Google",1],["Hacker News",1]]`,
		"names":   `[["pageview",5],["signup",1]]`,
	}
	first := report(t, p)
	checkReport(t, first, want)
	code, b := call(t, "POST", p.query+"/v1/sites/web/query",
		`{"metrics":["events"],"date_range":"all","dimensions":["event:props:plan","event:props:amount"],"filters":[["is","event:name",["signup"]]]}`)
	if code != 200 || !strings.Contains(string(b), `["pro","49.5"]`) {
		t.Errorf("the custom event's properties: got %d %s, want plan pro and amount 49.5", code, b)
	}
	code, stdout, stderr = runImport(t, nil, args...)
	if code != 0 || !strings.Contains(stdout, "0 imported, 6 already there") {
		t.Fatalf("second import: got exit %d, %q %q", code, stdout, stderr)
	}
	if again := report(t, p); !reflect.DeepEqual(again, first) {
		t.Errorf("after the second import: got %v, want %v", again, first)
	}
	if entries := auditImports(t, p); len(entries) != 2 || !strings.Contains(fmt.Sprint(entries[0]["metadata"]), "postgres://127.0.0.1") || strings.Contains(fmt.Sprint(entries), "umami@") {
		t.Errorf("got audit entries %v, want two naming the database without its user", entries)
	}
}

// With DATABASE_URL set (variable or flag) and no server answering, the
// command refuses with exit 2 rather than write a SQLite file the servers
// never read, for rows and rollups alike; it neither creates that file
// nor repeats the URL's credentials.
func TestImportRefusesPostgresWithoutServer(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	const url = "postgres://owner:s3cret@127.0.0.1:1/analytics"
	for _, tt := range []struct {
		name string
		env  []string
		args []string
	}{
		{"variable, rows", []string{"DATABASE_URL=" + url}, []string{"--from", "umami", filepath.Join("../testdata", "import", "umami.csv")}},
		{"flag, rows", nil, []string{"--database-url", url, "--from", "umami", filepath.Join("../testdata", "import", "umami.csv")}},
		{"variable, rollups", []string{"DATABASE_URL=" + url}, []string{"--from", "plausible", filepath.Join("../testdata", "import", "plausible")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dbPath := filepath.Join(t.TempDir(), "a.db")
			cmd := exec.Command(bin, append([]string{"import", "--site", "web"}, tt.args...)...)
			cmd.Env = append(os.Environ(), append(tt.env, "DATABASE_PATH="+dbPath, "QUERY_ADDR=127.0.0.1:1", "ADMIN_TOKEN=tok")...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Fatalf("got %v, %q; want exit 2", err, stderr.String())
			}
			msg := stderr.String()
			if !strings.Contains(msg, "DATABASE_URL is set and no server answered") || !strings.Contains(msg, "nothing was imported") {
				t.Errorf("got %q, want the refusal", msg)
			}
			if strings.Contains(msg, "s3cret") || strings.Contains(msg, "owner") {
				t.Errorf("got %q, want neither the password nor the user", msg)
			}
			if _, err := os.Stat(dbPath); !os.IsNotExist(err) {
				t.Errorf("got %v, want no SQLite file created", err)
			}
		})
	}
}
