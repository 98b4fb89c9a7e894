package server

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tally-analytics/tally/storage"
)

// importHistory writes days days of imported history for site ending on
// last, through storage's import writes (the importer package parses the
// products' files into them): per day, 10 visitors on / from Google, the
// n-th day's figures n times those of the first.
func importHistory(t *testing.T, db *storage.DB, site, last string, days int) {
	t.Helper()
	ctx := context.Background()
	end, err := time.Parse(time.DateOnly, last)
	if err != nil {
		t.Fatal(err)
	}
	im, err := db.BeginImport(ctx, site, "plausible", []string{"imported_visitors.csv"})
	if err != nil {
		t.Fatal(err)
	}
	var rows []storage.ImportedRow
	for i := 1; i <= days; i++ {
		day := end.AddDate(0, 0, i-days).Format(time.DateOnly)
		n := int64(i)
		for _, dv := range [][2]string{{"", ""}, {"visit:source", "Google"}, {"event:page", "/"}} {
			rows = append(rows, storage.ImportedRow{Day: day, Dim: dv[0], Value: dv[1], Visitors: 10 * n, Visits: 12 * n,
				Pageviews: 30 * n, Events: 30 * n, Bounces: 4 * n, Duration: 600 * n})
		}
	}
	if err := im.Add(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if err := im.Finish(ctx, int64(days), nil); err != nil {
		t.Fatal(err)
	}
}

// plausibleZip is a zip of one imported_visitors CSV with body as its
// rows, as `tally import --from plausible` uploads an export.
func plausibleZip(t *testing.T, rows string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.Create("imported_visitors_20260101_20260102.csv")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "date,visitors,pageviews,bounces,visits,visit_duration\n"+rows)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// POST /v1/sites/:siteId/imports/plausible: an admin of the site only
// (another workspace's site is the ordinary 404); an upload that is not an
// export, or holds a bad line, is 400 invalid_import naming the line and
// not the server's temporary file, never a 500; a good one is imported.
func TestImportPlausibleEndpoint(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	h.setupTenant("other", "theirs")
	good := plausibleZip(t, "2026-01-01,10,30,4,12,600\n2026-01-02,20,50,10,25,1000\n")
	tests := []struct {
		name, site, token, body string
		status                  int
		code, message           string
	}{
		{"no credential", "web", "", good, 401, "unauthorized", ""},
		{"read key", "web", tn.readKey, good, 403, "forbidden", ""},
		{"admin key of another workspace's site", "theirs", tn.adminKey, good, 404, "not_found", ""},
		{"not a zip", "web", testAdminToken, "hello", 400, "invalid_import", "not a readable zip"},
		{"bad line", "web", testAdminToken, plausibleZip(t, "2026-01-01,ten,30,4,12,600\n"), 400, "invalid_import", "line 2"},
		{"admin key", "web", tn.adminKey, good, 200, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := h.q("POST", "/v1/sites/"+tt.site+"/imports/plausible", tt.token, tt.body)
			mustStatus(t, res, tt.status, tt.code)
			if !strings.Contains(string(res.body), tt.message) || strings.Contains(string(res.body), os.TempDir()) {
				t.Errorf("got %s, want a message with %q and no temporary path", res.body, tt.message)
			}
		})
	}
	if n := h.count(`SELECT COUNT(*) FROM imports WHERE site_id = 'web' AND complete = 1`); n != 1 {
		t.Errorf("got %d complete imports, want 1", n)
	}
	if n := h.count(`SELECT COUNT(*) FROM imports WHERE site_id = 'theirs'`); n != 0 {
		t.Errorf("got %d imports in the other workspace's site, want 0", n)
	}
}
