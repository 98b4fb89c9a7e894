package server

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
)

// goatCounterExport is testdata/import/goatcounter-v2.csv: 8 rows and a bot.
func goatCounterExport(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../testdata/import/goatcounter-v2.csv")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// An export file uploaded as it is goes through the readers of `tally
// import`: GoatCounter's CSV, gzipped or not, Umami's CSV; the answer
// counts what was stored, a second upload stores nothing twice, and the
// audit entry names the file by its base name.
func TestImportFileUpload(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	goat := goatCounterExport(t)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(goat)
	zw.Close()
	umami, err := os.ReadFile("../testdata/import/umami.csv")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		body       []byte
		want       map[string]float64
	}{
		{"goatcounter", "/v1/sites/web/imports/goatcounter?file=C:%5Cfakepath%5Cgoatcounter.csv", goat,
			map[string]float64{"rows": 8, "imported": 8, "duplicates": 0, "skipped": 1}},
		{"goatcounter again, gzipped", "/v1/sites/web/imports/goatcounter?file=goatcounter.csv.gz", gz.Bytes(),
			map[string]float64{"rows": 8, "imported": 0, "duplicates": 8, "skipped": 1}},
		{"umami", "/v1/sites/web/imports/umami", umami, nil},
	} {
		r := h.q("POST", tc.path, tn.adminKey, tc.body, "Content-Type", "text/csv")
		mustStatus(t, r, 200, "")
		got := r.json(t)
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s: got %s = %v, want %v (%s)", tc.name, k, got[k], v, r.body)
			}
		}
		if got["source"] != strings.Fields(tc.name)[0] || got["rows"].(float64) == 0 {
			t.Errorf("%s: got %s, want rows of its source", tc.name, r.body)
		}
	}
	audit := string(h.q("GET", "/v1/workspaces/acme/audit", testAdminToken, nil).body)
	for _, want := range []string{`"files":["goatcounter.csv"]`, `"files":["goatcounter.csv.gz"]`, `"files":["upload"]`} {
		if !strings.Contains(audit, want) {
			t.Errorf("the audit log has no site.import with %s: %s", want, audit)
		}
	}
}

// A file that cannot be imported is 400 invalid_import naming the file
// (as ?file= gave it) and the line, and nothing of it is stored: it is
// read whole before anything is. Who may upload is who may import; an
// unknown source is 404.
func TestImportFileUploadRefusals(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	h.setupTenant("other", "theirs")
	goat := goatCounterExport(t)
	bad := append(append([]byte{}, goat...), []byte("/late,,false,,,,s9,0,,,,,false,yesterday\n")...)
	for _, tc := range []struct {
		name, path, token string
		body              []byte
		status            int
		code, message     string
	}{
		{"a bad row after good ones", "/v1/sites/web/imports/goatcounter?file=export.csv", tn.adminKey, bad, 400, "invalid_import",
			`export.csv:11: Date: want an RFC 3339 time, got \"yesterday\"`},
		{"not GoatCounter's", "/v1/sites/web/imports/goatcounter?file=x.csv", tn.adminKey, []byte("a,b\n1,2\n"), 400, "invalid_import",
			"x.csv:1: not a GoatCounter CSV export"},
		{"an empty file", "/v1/sites/web/imports/umami", tn.adminKey, nil, 400, "invalid_import", "upload:1: the file is empty"},
		{"no such source", "/v1/sites/web/imports/matomo", tn.adminKey, goat, 404, "not_found", `no import source \"matomo\"`},
		{"a read key", "/v1/sites/web/imports/goatcounter", tn.readKey, goat, 403, "forbidden", ""},
		{"another workspace's site", "/v1/sites/theirs/imports/goatcounter", tn.adminKey, goat, 404, "not_found", ""},
	} {
		r := h.q("POST", tc.path, tc.token, tc.body)
		if r.status != tc.status || r.code() != tc.code || !strings.Contains(string(r.body), tc.message) {
			t.Errorf("%s: got %d %s, want %d %s with %s", tc.name, r.status, r.body, tc.status, tc.code, tc.message)
		}
	}
	if n := h.count(`SELECT COUNT(*) FROM events`); n != 0 {
		t.Errorf("got %d events stored, want none", n)
	}
}

// A signed-in admin uploads as the dashboard does, with the session's
// CSRF token; a viewer is refused.
func TestImportFileUploadWithSession(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	h.addUser("admin@example.com", "admin", "acme")
	h.addUser("viewer@example.com", "viewer", "acme")
	admin, viewer := h.client(), h.client()
	admin.signin("admin@example.com", testPassword)
	viewer.signin("viewer@example.com", testPassword)
	goat := goatCounterExport(t)
	mustStatus(t, viewer.do("POST", "/v1/sites/web/imports/goatcounter", goat), 403, "forbidden")
	noCSRF := *admin
	noCSRF.csrf = ""
	mustStatus(t, noCSRF.do("POST", "/v1/sites/web/imports/goatcounter", goat), 403, "forbidden")
	r := admin.do("POST", "/v1/sites/web/imports/goatcounter?file=gc.csv", goat)
	mustStatus(t, r, 200, "")
	if got := r.json(t)["imported"]; got != float64(8) {
		t.Errorf("got imported %v, want 8: %s", got, r.body)
	}
}

// A Plausible upload with ?file= is kept under that name: the audit entry
// and the messages name the sender's zip, never the temporary folder;
// a name that is not a file's ("..", a path) cannot leave that folder.
func TestImportPlausibleUploadNamed(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	for _, tc := range []struct {
		file, status, says string
	}{
		{"example_com_20260104.zip", "200", ""},
		{"..", "400", "upload:imported_visitors_20260101_20260102.csv: line 2"},
		{"../../etc/export", "400", "export:imported_visitors_20260101_20260102.csv: line 2"},
	} {
		body := plausibleZip(t, "2026-01-01,10,30,4,12,600\n")
		if tc.status == "400" {
			body = plausibleZip(t, "yesterday,10,30,4,12,600\n")
		}
		r := h.q("POST", "/v1/sites/web/imports/plausible?file="+url.QueryEscape(tc.file), testAdminToken, body)
		if fmt.Sprint(r.status) != tc.status || !strings.Contains(string(r.body), tc.says) || strings.Contains(string(r.body), os.TempDir()) {
			t.Errorf("?file=%s: got %d %s, want %s naming %q", tc.file, r.status, r.body, tc.status, tc.says)
		}
	}
	audit := string(h.q("GET", "/v1/workspaces/acme/audit", testAdminToken, nil).body)
	if !strings.Contains(audit, `"file_names":["example_com_20260104.zip:imported_visitors_20260101_20260102.csv"]`) {
		t.Errorf("the audit entry: got %s, want the sender's zip named", audit)
	}
}
