package server

import (
	"strings"
	"testing"

	"github.com/tally-analytics/tally/web"
)

func TestScriptServing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.c("GET", "/v1/script.js", "", nil)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/javascript") || r.header.Get("ETag") != web.ScriptETag ||
		!strings.Contains(r.header.Get("Cache-Control"), "max-age") || string(r.body) != string(web.Script()) || r.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("got %d %v", r.status, r.header)
	}
	for _, inm := range []string{web.ScriptETag, "W/" + web.ScriptETag, `"other", ` + web.ScriptETag} {
		if r := h.c("GET", "/v1/script.js", "", nil, "If-None-Match", inm); r.status != 304 || len(r.body) != 0 {
			t.Errorf("If-None-Match %s: got %d", inm, r.status)
		}
	}
	if r := h.c("GET", "/v1/script.js", "", nil, "If-None-Match", `"stale"`); r.status != 200 {
		t.Errorf("stale ETag: got %d", r.status)
	}
	// Tally's own endpoints exist only under /v1 (/script.js is Umami's
	// tracker's stand-in: TestUmamiScriptSizeBudget).
	mustStatus(t, h.c("GET", "/tally.js", "", nil), 404, "not_found")
}

func TestDashboardServing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, p := range []string{"/", "/v1/ui/", "/v1/ui/index.html"} {
		r := h.q("GET", p, "", nil)
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || !strings.Contains(string(r.body), "<title>Tally</title>") {
			t.Errorf("%s: got %d %q", p, r.status, r.header.Get("Content-Type"))
		}
	}
	if r := h.q("GET", "/v1/ui/app.js", "", nil); r.status != 200 || !strings.Contains(r.header.Get("Content-Type"), "javascript") {
		t.Errorf("app.js: got %d %q", r.status, r.header.Get("Content-Type"))
	}
	if r := h.q("GET", "/v1/ui/style.css", "", nil); r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/css") {
		t.Errorf("style.css: got %d %q", r.status, r.header.Get("Content-Type"))
	}
	// the world map: JSON, revalidated with its ETag
	r := h.q("GET", "/v1/ui/world.json", "", nil)
	if tag := r.header.Get("ETag"); r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") || tag == "" || r.header.Get("Cache-Control") != "no-cache" {
		t.Errorf("world.json: got %d %v", r.status, r.header)
	} else if r := h.q("GET", "/v1/ui/world.json", "", nil, "If-None-Match", tag); r.status != 304 || len(r.body) != 0 {
		t.Errorf("world.json again with its ETag: got %d, want 304", r.status)
	}
	mustStatus(t, h.q("GET", "/v1/ui/nope.js", "", nil), 404, "not_found")
	mustStatus(t, h.q("GET", "/v1/ui/../../etc/passwd", "", nil), 404, "not_found")
	mustStatus(t, h.q("GET", "/anything-else", "", nil), 404, "not_found") // unknown paths stay JSON 404s
	mustStatus(t, h.q("GET", "/ui/", "", nil), 404, "not_found")
}
