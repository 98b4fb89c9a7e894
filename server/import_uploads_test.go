package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tally-analytics/tally/internal/bombtest"
	"github.com/tally-analytics/tally/internal/smallfs"
)

// A Plausible export whose visitors file inflates to one 256 MiB field,
// uploaded (issue 29: 611 KB took the server to 5.7 GB and the answer
// quoted the 600 MB value): 400 invalid_import naming the line in a short
// message, the request allocating a small part of the field.
func TestImportPlausibleUploadBomb(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	name := filepath.Join(t.TempDir(), "export.zip")
	bombtest.Zip(t, name, "imported_visitors_20260101_20260102.csv",
		"date,visitors,pageviews,bounces,visits,visit_duration\n2026-01-01,", '9', 256<<20, ",1,1,1,1\n")
	body, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var res response
	mem := bombtest.Measure(func() { res = h.q("POST", "/v1/sites/web/imports/plausible", testAdminToken, body) })
	t.Logf("a %d KB upload of a 256 MiB field: %.1f MiB allocated, heap grew by %.1f MiB at most; %d %s",
		len(body)>>10, float64(mem.Allocated)/(1<<20), float64(mem.PeakHeap)/(1<<20), res.status, res.body)
	mustStatus(t, res, 400, "invalid_import")
	if msg := string(res.body); !strings.Contains(msg, "the uploaded export:imported_visitors_20260101_20260102.csv: line 2: a record longer than 2 MiB") || len(msg) > 1200 {
		t.Errorf("got %d bytes %.2000s, want the line named in a short message", len(msg), msg)
	}
	if mem.Allocated > 64<<20 {
		t.Errorf("allocated %d MiB, want at most 64", mem.Allocated>>20)
	}
}

// Uploads in flight are bounded: one per site, uploadsPerWorkspace per
// workspace, uploadsInAll in all; past a bound 429 imports_busy with
// Retry-After, before a byte is kept; a slot ends with its request, its
// temporary file deleted.
func TestImportPlausibleUploadsInFlight(t *testing.T) {
	defer func(w, a int) { uploadsPerWorkspace, uploadsInAll = w, a }(uploadsPerWorkspace, uploadsInAll)
	uploadsPerWorkspace, uploadsInAll = 2, 3
	h := newHarness(t)
	h.setupTenant("acme", "web")
	h.setupTenant("other", "theirs")
	for _, s := range []struct{ ws, site string }{{"acme", "web2"}, {"acme", "web3"}, {"other", "theirs2"}} {
		mustStatus(t, h.q("POST", "/v1/workspaces/"+s.ws+"/sites", testAdminToken, map[string]any{"id": s.site, "name": s.site}), 201, "")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	kept := func() int {
		files, _ := filepath.Glob(filepath.Join(tmp, "tally-plausible-*"))
		return len(files)
	}
	// hold starts an upload whose body stays open until finish, which
	// returns its status; it returns once the server keeps its file.
	hold := func(site string) (finish func() int) {
		t.Helper()
		n := kept()
		pr, pw := io.Pipe()
		status := make(chan int, 1)
		go func() {
			req, _ := http.NewRequest("POST", h.query.URL+"/v1/sites/"+site+"/imports/plausible", pr)
			req.Header.Set("Authorization", "Bearer "+testAdminToken)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				status <- 0
				return
			}
			res.Body.Close()
			status <- res.StatusCode
		}()
		for deadline := time.Now().Add(10 * time.Second); kept() == n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the upload into %s never reached its temporary file", site)
			}
		}
		return func() int { pw.Close(); return <-status }
	}
	good := plausibleZip(t, "2026-01-01,10,30,4,12,600\n")
	busy := func(site, says string) {
		t.Helper()
		res := h.q("POST", "/v1/sites/"+site+"/imports/plausible", testAdminToken, good)
		mustStatus(t, res, 429, "imports_busy")
		if !strings.Contains(string(res.body), says) || res.header.Get("Retry-After") != "10" {
			t.Errorf("%s: got %s Retry-After %q, want %q and 10", site, res.body, res.header.Get("Retry-After"), says)
		}
	}
	web := hold("web")
	busy("web", "an upload into this site is in progress")
	web2 := hold("web2")
	busy("web3", "2 uploads into this workspace's sites are in progress")
	theirs := hold("theirs")
	busy("theirs2", "the server is taking 3 uploads")
	if n := kept(); n != 3 {
		t.Errorf("got %d temporary files, want 3 (a refused upload keeps none)", n)
	}
	if status := web(); status != 400 {
		t.Errorf("the held upload (an empty body): got %d, want 400", status)
	}
	mustStatus(t, h.q("POST", "/v1/sites/web/imports/plausible", testAdminToken, good), 200, "")
	web2()
	theirs()
	if n := kept(); n != 0 {
		t.Errorf("got %d temporary files after the uploads, want 0", n)
	}
}

// An upload that says it is over importUploadMax is 413 before a byte
// of it is read.
func TestImportPlausibleUploadTooLarge(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.query.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/sites/web/imports/plausible HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n", testAdminToken, importUploadMax+1)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 413 || !strings.Contains(string(b), "payload_too_large") {
		t.Errorf("got %d %s, want 413 payload_too_large", res.StatusCode, b)
	}
}

// A temporary folder too full to keep the upload is 503 unavailable with
// Retry-After, as a full disk is for the database, not a 500.
func TestImportPlausibleUploadTempFull(t *testing.T) {
	h := newHarness(t)
	h.setupTenant("acme", "web")
	t.Setenv("TMPDIR", smallfs.Mount(t, "1m"))
	res := h.q("POST", "/v1/sites/web/imports/plausible", testAdminToken, strings.Repeat("x", 2<<20))
	mustStatus(t, res, 503, "unavailable")
	if !strings.Contains(string(res.body), "temporary folder is full") || res.header.Get("Retry-After") != "5" {
		t.Errorf("got %s Retry-After %q", res.body, res.header.Get("Retry-After"))
	}
}
