package importer_test

import (
	"archive/zip"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/tally-analytics/tally/importer"
	"github.com/tally-analytics/tally/privacy"
	"github.com/tally-analytics/tally/server"
	"github.com/tally-analytics/tally/storage"
)

// The sample export in testdata/import/plausible is written in the format of
// Plausible's CSV export: the files and columns of
// plausible/analytics lib/plausible/exports.ex (export_queries, one
// export_*_q per file, column order as selected there, the date suffix of
// export_queries) and lib/plausible/imported/csv_importer.ex
// (input_structures, parse_filename!), as ClickHouse writes CSVWithNames
// (strings and dates quoted, Nullable empty as \N). The pages file has the
// scroll depth columns of newer exports, which the importer ignores.
//
// Its figures, by day (hand-checked: every report's per-day sums of
// visitors, visits, pageviews, bounces and duration equal the visitors
// file's):
//
//	2026-01-01: 10 visitors, 30 pageviews, 12 visits, 4 bounces, 600 s
//	2026-01-02: 20 visitors, 50 pageviews, 25 visits, 10 bounces, 1000 s
//	2026-01-03:  5 visitors,  8 pageviews,  6 visits, 3 bounces, 120 s
//	sources (visitors, visits): Google 4+12=16, 5+15=20 (6 bounces, 900 s);
//	  Direct 4+8=12, 5+10=15; Hacker News 5, 6; Newsletter 2, 2
//	pages (visitors, pageviews): / 9+18=27, 18+35=53; /pricing 5+4=9,
//	  12+8=20; /blog/hello 6, 15
//	countries (visitors): DE 6+15=21, FR 4+5=9, US 5
//
// The native data (nativeEvents) is two visits on the two days after:
// Jan 4 (google.com, / then /pricing two minutes later, DE) and Jan 5
// (/pricing, a bounce, FR): 2 visitors, 2 visits, 3 pageviews, 1 bounce,
// 120 s.
const sampleDir = "../testdata/import/plausible"

// rig is a real server (collector and query API) over a real SQLite file
// (or a PostgreSQL database: docs/development.md#both-backends).
type rig struct {
	t    *testing.T
	db   *storage.DB
	path string
	// url is the PostgreSQL database's, "" on SQLite.
	url   string
	query *httptest.Server
	coll  *httptest.Server
	mu    sync.Mutex
	now   time.Time
}

const adminToken = "test-admin-token"

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{t: t, path: filepath.Join(t.TempDir(), "test.db"), now: time.Date(2026, 1, 31, 9, 0, 0, 0, time.UTC)}
	clock := func() time.Time { r.mu.Lock(); defer r.mu.Unlock(); return r.now }
	opts := testOptions(t, storage.Options{Path: r.path, Now: clock})
	r.url = opts.DatabaseURL
	db, err := storage.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	r.db = db
	loc, err := privacy.NewLocator("", true)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Config{AdminToken: adminToken, Now: clock, Locator: loc,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, db)
	r.query = httptest.NewServer(srv.Query())
	r.coll = httptest.NewServer(srv.Collector())
	t.Cleanup(func() {
		r.query.Close()
		r.coll.Close()
		if err := db.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return r
}

// do sends a request and returns the status and body.
func (r *rig) do(url, method, token string, body any, headers ...string) (int, []byte) {
	r.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			r.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// must sends a request to the query API and fails unless it gets want.
func (r *rig) must(want int, method, path string, body any) []byte {
	r.t.Helper()
	status, b := r.do(r.query.URL+path, method, adminToken, body)
	if status != want {
		r.t.Fatalf("%s %s: got %d, want %d: %s", method, path, status, want, b)
	}
	return b
}

// site creates workspace acme and site shop in it.
func (r *rig) site(id string) {
	r.t.Helper()
	r.do(r.query.URL+"/v1/workspaces", "POST", adminToken, map[string]any{"name": "acme", "slug": "acme"})
	r.must(201, "POST", "/v1/workspaces/acme/sites", map[string]any{"id": id, "name": id})
}

// nativeEvents are the site's own events (see sampleDir).
var nativeEvents = []struct {
	id, anon, url, ref, ts, country string
}{
	{"0f8fad5b-d9cb-469f-a165-70867728950e", "n1", "https://shop.test/", "https://www.google.com/", "2026-01-04T10:00:00Z", "DE"},
	{"7c9e6679-7425-40de-944b-e07fc1f90ae7", "n1", "https://shop.test/pricing", "", "2026-01-04T10:02:00Z", "DE"},
	{"16fd2706-8baf-433b-82eb-8c7fada847da", "n2", "https://shop.test/pricing", "", "2026-01-05T09:00:00Z", "FR"},
}

func (r *rig) sendNative(site string) {
	r.t.Helper()
	for _, e := range nativeEvents {
		ev := map[string]any{"id": e.id, "site_id": site, "anon_id": e.anon, "type": "pageview", "url": e.url, "ts": e.ts,
			"user_agent": "Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0"}
		if e.ref != "" {
			ev["referrer"] = e.ref
		}
		status, b := r.do(r.coll.URL+"/v1/s2s/events", "POST", site, ev, "CF-IPCountry", e.country)
		if status != 202 {
			r.t.Fatalf("send: got %d, want 202: %s", status, b)
		}
	}
}

// rows posts a query and renders its results as "dims: metrics" joined by
// "; ", and returns the meta.
func (r *rig) rows(site string, body map[string]any) (string, map[string]any) {
	r.t.Helper()
	b := r.must(200, "POST", "/v1/sites/"+site+"/query", body)
	var a struct {
		Results []struct {
			Dimensions []string  `json:"dimensions"`
			Metrics    []float64 `json:"metrics"`
			Comparison *struct {
				Metrics []float64 `json:"metrics"`
			} `json:"comparison"`
		} `json:"results"`
		Meta map[string]any `json:"meta"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, res := range a.Results {
		m := make([]string, len(res.Metrics))
		for i, v := range res.Metrics {
			m[i] = strconv.FormatFloat(v, 'f', -1, 64)
		}
		line := strings.Join(m, " ")
		if c := res.Comparison; c != nil {
			for _, v := range c.Metrics {
				line += " vs " + strconv.FormatFloat(v, 'f', -1, 64)
			}
		}
		if len(res.Dimensions) > 0 {
			line = strings.Join(res.Dimensions, " ") + ": " + line
		}
		out = append(out, line)
	}
	return strings.Join(out, "; "), a.Meta
}

// sampleFiles are the sample export's CSVs.
func sampleFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(sampleDir, "*.csv"))
	if err != nil || len(files) != 10 {
		t.Fatalf("sample export: got %d files (%v), want 10", len(files), err)
	}
	return files
}

// sampleZip writes the sample as Plausible's zip: its CSVs side by side,
// stored (exports.ex, stream_archive: Zstream.Coder.Stored).
func sampleZip(t *testing.T) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "shop_test_20260104.zip")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	z := zip.NewWriter(f)
	for _, p := range sampleFiles(t) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		w, err := z.CreateHeader(&zip.FileHeader{Name: filepath.Base(p), Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return name
}

// withImports is a query over Jan 1-5 including imported days.
func withImports(metrics []string, dims []string, filters ...any) map[string]any {
	b := map[string]any{"metrics": metrics, "date_range": []string{"2026-01-01", "2026-01-05"},
		"include": map[string]any{"imports": true}}
	if dims != nil {
		b["dimensions"] = dims
	}
	if len(filters) > 0 {
		b["filters"] = filters
	}
	return b
}

// TestPlausibleImportReadBack imports the sample export's zip and reads the
// hand-checked figures back through the query API, alone and mixed with
// the site's own days after them.
func TestPlausibleImportReadBack(t *testing.T) {
	r := newRig(t)
	r.site("shop")
	r.sendNative("shop")
	var last [2]int64
	n, err := importer.Plausible(context.Background(), r.db, "shop", []string{sampleZip(t)}, func(done, total int64) { last = [2]int64{done, total} })
	if err != nil {
		t.Fatal(err)
	}
	if n != 41 {
		t.Errorf("rows imported: got %d, want 41 (the sample's data rows)", n)
	}
	if last[0] != last[1] || last[1] == 0 {
		t.Errorf("last progress: got %d of %d, want all of the CSVs' bytes", last[0], last[1])
	}
	all := []string{"visitors", "visits", "pageviews", "bounce_rate", "visit_duration", "views_per_visit"}
	for _, c := range []struct {
		name string
		body map[string]any
		want string
	}{
		// 35+2 visitors, 43+2 visits, 88+3 pageviews, 17+1 of 45 visits
		// bounced (40%), (1720+120)/45 = 40.9 s, 91/45 = 2.02.
		{"totals", withImports(all, nil), "37 45 91 40 41 2.02"},
		{"imported days alone", map[string]any{"metrics": all, "date_range": []string{"2026-01-01", "2026-01-03"}, "include": map[string]any{"imports": true}},
			"35 43 88 40 40 2.05"},
		// The days compared with are the two before: imported.
		{"compared with imported days", map[string]any{"metrics": list("visitors"), "date_range": []string{"2026-01-04", "2026-01-05"},
			"include": map[string]any{"imports": true, "comparisons": map[string]any{"mode": "previous_period"}}}, "2 vs 25"},
		{"without include.imports", map[string]any{"metrics": all, "date_range": []string{"2026-01-01", "2026-01-05"}}, "2 2 3 50 60 1.5"},
		{"by day", withImports(list("visitors", "pageviews"), list("time:day")),
			"2026-01-01: 10 30; 2026-01-02: 20 50; 2026-01-03: 5 8; 2026-01-04: 1 2; 2026-01-05: 1 1"},
		// "all" starts at the first imported day with include.imports, at
		// the first visit without.
		{"all", map[string]any{"metrics": list("visitors"), "date_range": "all", "dimensions": list("time:month"), "include": map[string]any{"imports": true}},
			"2026-01-01: 37"},
		{"all, by day", map[string]any{"metrics": list("visitors"), "date_range": "all", "include": map[string]any{"imports": true, "time_labels": true},
			"dimensions": list("time:day")}, "2026-01-01: 10; 2026-01-02: 20; 2026-01-03: 5; 2026-01-04: 1; 2026-01-05: 1"},
		{"by month", withImports(list("visitors", "visits"), list("time:month")), "2026-01-01: 37 45"},
		// Imported sources keep Plausible's names, and the site's own visit
		// from google.com is Google too (docs/intake.md#source-names).
		{"top sources", withImports(list("visitors", "visits", "percentage"), list("visit:source")),
			"Google: 17 21 45.9; Direct / None: 13 16 35.1; Hacker News: 5 6 13.5; Newsletter: 2 2 5.4"},
		{"pages", withImports(list("visitors", "pageviews"), list("event:page")),
			"/: 28 54; /pricing: 11 22; /blog/hello: 6 15"},
		{"countries", withImports(list("visitors"), list("visit:country")), "DE: 22; FR: 10; US: 5"},
		// Imported regions as the export has them (an empty one is (not set)),
		// beside the site's own two visits without one.
		{"regions", withImports(list("visitors"), list("visit:region")), "(not set): 26; DE-BE: 6; US-NY: 5"},
		{"region names", withImports(list("visitors"), list("visit:region_name")), "(not set): 26; Berlin: 6; New York: 5"},
		{"entry pages", withImports(list("visits", "bounce_rate"), list("visit:entry_page")),
			"/: 36 36; /pricing: 9 56"},
		{"exit pages", withImports(list("visits"), list("visit:exit_page")), "/blog/hello: 25; /pricing: 20"},
		{"devices", withImports(list("visitors"), list("visit:device")), "Desktop: 29; Tablet: 5; Mobile: 3"},
		{"browsers", withImports(list("visitors"), list("visit:browser")), "Firefox: 22; Chrome: 8; Safari: 5; Microsoft Edge: 2"},
		{"operating systems", withImports(list("visitors"), list("visit:os")), "GNU/Linux: 22; Mac: 10; iOS: 5"},
		// The imported visits without a tag are left out, as Plausible
		// leaves them out; the site's own two have none.
		{"utm medium", withImports(list("visitors"), list("visit:utm_medium")), "(not set): 2; email: 2"},
		// Two columns of one imported_sources row: the source and the
		// campaign of the newsletter's visits.
		{"by source, filtered on a UTM tag", withImports(list("visitors"), list("visit:source"),
			[]any{"is", "visit:utm_campaign", []string{"jan"}}), "Newsletter: 2"},
		{"filtered on two UTM tags", withImports(list("visitors"), nil,
			[]any{"is", "visit:utm_medium", []string{"email"}}, []any{"contains", "visit:utm_source", []string{"news"}}), "2"},
		{"filtered on two UTM tags, one not holding", withImports(list("visitors"), nil,
			[]any{"is", "visit:utm_medium", []string{"email"}}, []any{"is_not", "visit:utm_source", []string{"newsletter"}}), "0"},
		{"custom events", withImports(list("visitors", "events"), list("event:name")),
			"Signup: 3 4; pageview: 2 3; Outbound Link: Click: 1 2"},
		// Google's imported rows (16 visitors, 20 visits, 6 bounces, 900 s)
		// and the site's own visit from google.com (two pageviews, 120 s).
		{"filtered on the source", withImports(list("visitors", "visits", "bounce_rate", "visit_duration"), nil,
			[]any{"is", "visit:source", []string{"Google"}}), "17 21 29 49"},
		{"filtered by contains", withImports(list("visitors"), list("visit:source"),
			[]any{"contains", "visit:source", []string{"o"}}), "Google: 17; Direct / None: 13"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got, _ := r.rows("shop", c.body); got != c.want {
				t.Errorf("got %s, want %s", got, c.want)
			}
		})
	}
	// The answer says which days came from the import.
	_, meta := r.rows("shop", withImports(list("visitors"), nil))
	if b, _ := json.Marshal(meta); string(b) != `{"imported_ranges":[["2026-01-01","2026-01-03"]],"imports_included":true}` {
		t.Errorf("meta: got %s", b)
	}
	var imports struct {
		Imports []map[string]any `json:"imports"`
	}
	if err := json.Unmarshal(r.must(200, "GET", "/v1/sites/shop/imports", nil), &imports); err != nil {
		t.Fatal(err)
	}
	if len(imports.Imports) != 1 || imports.Imports[0]["first_day"] != "2026-01-01" || imports.Imports[0]["last_day"] != "2026-01-03" ||
		imports.Imports[0]["source"] != "plausible" || imports.Imports[0]["rows"] != 41.0 {
		t.Errorf("imports: got %v, want one plausible import of 2026-01-01 to 2026-01-03, 41 rows", imports.Imports)
	}
}

func list(s ...string) []string { return s }

// TestPlausibleImportSkipReasons checks meta and figures of queries the
// imported rollups cannot answer, as Plausible's imports_skip_reason.
func TestPlausibleImportSkipReasons(t *testing.T) {
	r := newRig(t)
	r.site("shop")
	r.must(201, "POST", "/v1/workspaces/acme/sites", map[string]any{"id": "empty", "name": "empty"})
	r.sendNative("shop")
	if _, err := importer.Plausible(context.Background(), r.db, "shop", sampleFiles(t), nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		site     string
		body     map[string]any
		want     string
		included bool
		reason   string
	}{
		{"another dimension's filter", "shop", withImports(list("visitors"), list("visit:source"), []any{"is", "visit:country", []string{"DE"}}),
			"Google: 1", false, "unsupported_query"},
		{"two dimensions", "shop", withImports(list("visitors"), list("visit:source", "visit:country")),
			"Direct / None FR: 1; Google DE: 1", false, "unsupported_query"},
		{"a dimension not imported", "shop", withImports(list("visitors"), list("visit:city")), "(not set): 2", false, "unsupported_query"},
		{"by hour", "shop", map[string]any{"metrics": list("visitors"), "date_range": []string{"2026-01-03", "2026-01-03"},
			"dimensions": list("time:hour"), "include": map[string]any{"imports": true}}, "", false, "unsupported_interval"},
		{"out of range", "shop", map[string]any{"metrics": list("visitors"), "date_range": []string{"2026-01-04", "2026-01-05"},
			"include": map[string]any{"imports": true}}, "2", false, "out_of_range"},
		{"no imports", "empty", withImports(list("visitors"), nil), "0", false, "no_imported_data"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, meta := r.rows(c.site, c.body)
			if got != c.want {
				t.Errorf("got %s, want %s", got, c.want)
			}
			if meta["imports_included"] != c.included || meta["imports_skip_reason"] != c.reason {
				t.Errorf("meta: got %v, want imports_included %v, imports_skip_reason %s", meta, c.included, c.reason)
			}
			if w, _ := meta["imports_warning"].(string); (c.reason == "unsupported_query" || c.reason == "unsupported_interval") != (w != "") {
				t.Errorf("imports_warning: got %q for %s", w, c.reason)
			}
		})
	}
}

// count runs a COUNT(*) on the database from a second connection, as an
// operator's sqlite3 shell (or psql) would.
func (r *rig) count(query string) int {
	r.t.Helper()
	driver, dsn := "sqlite", storage.FileURI(r.path)+"?_pragma=busy_timeout(5000)"
	if r.url != "" {
		driver, dsn = "pgx", r.url
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		r.t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(query).Scan(&n); err != nil {
		r.t.Fatalf("%s: %v", query, err)
	}
	return n
}

// TestPlausibleImportIsIdempotent imports the same export twice, as a zip
// and as its CSVs: the second replaces the first, so every figure is
// counted once, and the import is audited without figures.
func TestPlausibleImportIsIdempotent(t *testing.T) {
	r := newRig(t)
	r.site("shop")
	r.sendNative("shop")
	body := withImports(list("visitors", "visits", "pageviews", "bounce_rate"), list("visit:source"))
	if _, err := importer.Plausible(context.Background(), r.db, "shop", []string{sampleZip(t)}, nil); err != nil {
		t.Fatal(err)
	}
	first, _ := r.rows("shop", body)
	rows := r.count(`SELECT COUNT(*) FROM imported_rows`)
	if _, err := importer.Plausible(context.Background(), r.db, "shop", sampleFiles(t), nil); err != nil {
		t.Fatal(err)
	}
	if again, _ := r.rows("shop", body); again != first {
		t.Errorf("after importing again: got %s, want %s", again, first)
	}
	if n := r.count(`SELECT COUNT(*) FROM imported_rows`); n != rows {
		t.Errorf("imported rows after importing again: got %d, want %d", n, rows)
	}
	if n := r.count(`SELECT COUNT(*) FROM imports`); n != 1 {
		t.Errorf("imports listed: got %d, want 1", n)
	}
	var audit struct {
		Entries []struct {
			Action   string         `json:"action"`
			Target   string         `json:"target"`
			Metadata map[string]any `json:"metadata"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(r.must(200, "GET", "/v1/workspaces/acme/audit", nil), &audit); err != nil {
		t.Fatal(err)
	}
	var imports []map[string]any
	for _, e := range audit.Entries {
		if e.Action == "site.import" && e.Target == "shop" {
			imports = append(imports, e.Metadata)
		}
	}
	if len(imports) != 2 {
		t.Fatalf("site.import entries: got %d, want 2", len(imports))
	}
	m := imports[0] // newest first: the second import, which replaced the first
	files, _ := m["file_names"].([]any)
	if m["source"] != "plausible" || m["rows"] != 41.0 || m["first_day"] != "2026-01-01" || m["last_day"] != "2026-01-03" ||
		len(files) != 10 || files[0] != "imported_browsers_20260101_20260103.csv" {
		t.Errorf("audit metadata: got %v", m)
	}
	if replaced, _ := m["replaced"].([]any); len(replaced) != 1 {
		t.Errorf("audit replaced: got %v, want the first import", m["replaced"])
	}
	for k := range m {
		switch k {
		case "import_id", "source", "file_names", "rows", "first_day", "last_day", "replaced", "skipped_rows", "native_from":
		default:
			t.Errorf("audit metadata has %q: only the import's source, files, rows and days belong there", k)
		}
	}
}

// TestPlausibleImportSkipsTheSiteOwnDays leaves out rows of the days from
// the site's first own visit on, as Plausible clamps an import to the days
// before its own data.
func TestPlausibleImportSkipsTheSiteOwnDays(t *testing.T) {
	r := newRig(t)
	r.site("shop")
	r.sendNative("shop") // first visit on Jan 4
	csv := filepath.Join(t.TempDir(), "imported_visitors_20260103_20260105.csv")
	writeFile(t, csv, `"date","visitors","pageviews","bounces","visits","visit_duration"
"2026-01-03",5,8,3,6,120
"2026-01-04",7,9,1,7,70
"2026-01-05",1,1,1,1,0
`)
	n, err := importer.Plausible(context.Background(), r.db, "shop", []string{csv}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("rows imported: got %d, want 1 (Jan 3; Jan 4 and 5 are the site's own)", n)
	}
	if got, _ := r.rows("shop", withImports(list("visitors", "pageviews"), list("time:day"))); got != "2026-01-03: 5 8; 2026-01-04: 1 2; 2026-01-05: 1 1" {
		t.Errorf("by day: got %s", got)
	}
}

func writeFile(t *testing.T, name, body string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestPlausibleImportBadFiles refuses files that are not the export's, or
// broken, with an error naming the file and line, and keeps nothing of the
// failed import: an earlier import of the same days stays as it was.
func TestPlausibleImportBadFiles(t *testing.T) {
	r := newRig(t)
	r.site("shop")
	if _, err := importer.Plausible(context.Background(), r.db, "shop", sampleFiles(t), nil); err != nil {
		t.Fatal(err)
	}
	before, _ := r.rows("shop", withImports(list("visitors", "pageviews"), list("time:day")))
	rows := r.count(`SELECT COUNT(*) FROM imported_rows`)
	dir := t.TempDir()
	good := `"date","visitors","pageviews","bounces","visits","visit_duration"
"2026-01-01",1,1,1,1,1
`
	notZip := filepath.Join(dir, "export.zip")
	writeFile(t, notZip, "not a zip")
	for _, c := range []struct {
		name, file, body string
		want             string
	}{
		{"a count that is not a number", "imported_visitors_20260101_20260103.csv", good + `"2026-01-02",x,1,1,1,1` + "\n",
			`imported_visitors_20260101_20260103.csv: line 3: column "visitors": "x" is not a whole number of 0 or more`},
		{"a negative count", "pages.csv", `"date","hostname","page","visits","visitors","pageviews"` + "\n" + `"2026-01-01","a","/",1,1,-4` + "\n",
			`pages.csv: line 2: column "pageviews": "-4" is not a whole number of 0 or more`},
		{"a bad date", "imported_visitors_20260101_20260103.csv", good + `"2026-02-30",1,1,1,1,1` + "\n",
			`imported_visitors_20260101_20260103.csv: line 3: column "date": "2026-02-30" is not a date (YYYY-MM-DD)`},
		{"a missing column", "imported_sources_20260101_20260103.csv", `"date","source","visitors","visits","bounces"` + "\n",
			`imported_sources_20260101_20260103.csv: line 1: the header has no column "visit_duration"`},
		{"a short row", "imported_visitors_20260101_20260103.csv", good + `"2026-01-02",1,1` + "\n",
			`imported_visitors_20260101_20260103.csv: record on line 3: wrong number of fields`},
		{"an empty file", "imported_visitors_20260101_20260103.csv", "", `imported_visitors_20260101_20260103.csv: empty: the file has no header row`},
		{"another product's file", "goatcounter-export.csv", "2,Path\n", `goatcounter-export.csv: not a file of Plausible's CSV export`},
		{"an unknown report", "imported_screens_20260101_20260103.csv", good, `"screens" is not a report of Plausible's CSV export`},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := filepath.Join(dir, c.file)
			writeFile(t, name, c.body)
			// The good files first: their rows are written before the bad
			// one fails.
			files := append(sampleFiles(t)[:2], name)
			_, err := importer.Plausible(context.Background(), r.db, "shop", files, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), name) {
				t.Fatalf("got error %v, want one naming %s and saying %s", err, name, c.want)
			}
			if n := r.count(`SELECT COUNT(*) FROM imported_rows`); n != rows {
				t.Errorf("imported rows: got %d, want %d (the failed import's rows gone)", n, rows)
			}
			if n := r.count(`SELECT COUNT(*) FROM imports`); n != 1 {
				t.Errorf("imports: got %d, want 1", n)
			}
			if got, _ := r.rows("shop", withImports(list("visitors", "pageviews"), list("time:day"))); got != before {
				t.Errorf("by day: got %s, want %s", got, before)
			}
		})
	}
	t.Run("not a zip", func(t *testing.T) {
		if _, err := importer.Plausible(context.Background(), r.db, "shop", []string{notZip}, nil); err == nil || !strings.Contains(err.Error(), notZip+": not a readable zip") {
			t.Errorf("got %v, want an error naming %s", err, notZip)
		}
	})
	t.Run("a report twice", func(t *testing.T) {
		_, err := importer.Plausible(context.Background(), r.db, "shop", append(sampleFiles(t), sampleZip(t)), nil)
		if err == nil || !strings.Contains(err.Error(), "the report browsers is also in") {
			t.Errorf("got %v, want the report named twice", err)
		}
	})
	t.Run("an unknown site", func(t *testing.T) {
		if _, err := importer.Plausible(context.Background(), r.db, "nope", sampleFiles(t), nil); err == nil || !strings.Contains(err.Error(), `site "nope" not found`) {
			t.Errorf("got %v, want the site not found", err)
		}
	})
}

// TestPlausibleImportGoesWithTheSite deletes a site with imported history:
// its imports and rows go, counted in the audit, and a site created again
// with the same id has none.
func TestPlausibleImportGoesWithTheSite(t *testing.T) {
	r := newRig(t)
	r.site("shop")
	r.must(201, "POST", "/v1/workspaces/acme/sites", map[string]any{"id": "other", "name": "other"})
	for _, s := range []string{"shop", "other"} {
		if _, err := importer.Plausible(context.Background(), r.db, s, sampleFiles(t), nil); err != nil {
			t.Fatal(err)
		}
	}
	rows := r.count(`SELECT COUNT(*) FROM imported_rows WHERE site_id = 'shop'`)
	r.must(204, "DELETE", "/v1/workspaces/acme/sites/shop", nil)
	if n := r.count(`SELECT COUNT(*) FROM imported_rows WHERE site_id = 'shop'`) + r.count(`SELECT COUNT(*) FROM imports WHERE site_id = 'shop'`); n != 0 {
		t.Errorf("rows of the deleted site: got %d, want 0", n)
	}
	if n := r.count(`SELECT COUNT(*) FROM imported_rows WHERE site_id = 'other'`); n != rows {
		t.Errorf("the other site's rows: got %d, want %d", n, rows)
	}
	var audit struct {
		Entries []struct {
			Action   string `json:"action"`
			Metadata struct {
				Deleted map[string]float64 `json:"deleted_rows"`
			} `json:"metadata"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(r.must(200, "GET", "/v1/workspaces/acme/audit", nil), &audit); err != nil {
		t.Fatal(err)
	}
	if e := audit.Entries[0]; e.Action != "site.delete" || e.Metadata.Deleted["imported_rows"] != float64(rows) || e.Metadata.Deleted["imports"] != 1 {
		t.Errorf("site.delete: got %s %v, want imported_rows %d and imports 1", e.Action, e.Metadata.Deleted, rows)
	}
	r.must(201, "POST", "/v1/workspaces/acme/sites", map[string]any{"id": "shop", "name": "shop"})
	if got, meta := r.rows("shop", withImports(list("visitors"), nil)); got != "0" || meta["imports_skip_reason"] != "no_imported_data" {
		t.Errorf("the new site: got %s %v, want 0 and no_imported_data", got, meta)
	}
}

// TestPlausibleImportOutlivesRetentionAndReset: a retention purge removes
// raw events, never imported history (aggregate, like the daily rollups),
// and dev mode's resets remove collected data only.
func TestPlausibleImportOutlivesRetentionAndReset(t *testing.T) {
	r := newRig(t)
	r.site("shop")
	r.sendNative("shop")
	if _, err := importer.Plausible(context.Background(), r.db, "shop", sampleFiles(t), nil); err != nil {
		t.Fatal(err)
	}
	rows := r.count(`SELECT COUNT(*) FROM imported_rows`)
	r.must(200, "PATCH", "/v1/sites/shop", map[string]any{"retention_days": 1})
	if _, err := r.db.Purge(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if n := r.count(`SELECT COUNT(*) FROM events`); n != 0 {
		t.Fatalf("events after the purge: got %d, want 0", n)
	}
	if n := r.count(`SELECT COUNT(*) FROM imported_rows`); n != rows {
		t.Errorf("imported rows after the purge: got %d, want %d", n, rows)
	}
	if got, _ := r.rows("shop", map[string]any{"metrics": list("visitors"), "date_range": []string{"2026-01-01", "2026-01-03"},
		"include": map[string]any{"imports": true}}); got != "35" {
		t.Errorf("imported visitors after the purge: got %s, want 35", got)
	}
	if _, err := r.db.ResetSiteData(context.Background(), "shop"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.db.ResetData(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := r.count(`SELECT COUNT(*) FROM imported_rows`) + r.count(`SELECT COUNT(*) FROM imports`); n != rows+1 {
		t.Errorf("imported rows and imports after the resets: got %d, want %d", n, rows+1)
	}
}

// TestPlausibleImportCutsLongValues keeps a value of at most 512 bytes,
// cut between characters, as a visit's values are.
func TestPlausibleImportCutsLongValues(t *testing.T) {
	r := newRig(t)
	r.site("shop")
	long := "/" + strings.Repeat("é", 300) // 601 bytes
	csv := filepath.Join(t.TempDir(), "pages.csv")
	writeFile(t, csv, `"date","hostname","page","visits","visitors","pageviews"`+"\n"+`"2026-01-01","shop.test","`+long+`",1,1,1`+"\n"+
		`"2026-01-01","shop.test","`+"\xff"+strings.Repeat("a", 600)+`",1,1,1`+"\n")
	if _, err := importer.Plausible(context.Background(), r.db, "shop", []string{csv}, nil); err != nil {
		t.Fatal(err)
	}
	got, _ := r.rows("shop", withImports(list("visitors"), list("event:page")))
	want := "/" + strings.Repeat("é", 255) + ": 1; \uFFFD" + strings.Repeat("a", 509) + ": 1"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
