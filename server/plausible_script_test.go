package server

import (
	"strings"
	"testing"
)

// The collector serves Plausible's legacy script by its file name: the
// extensions in any order; an unknown or repeated one, or another file, is
// 404; and the 2025 script of a known site (docs/intake.md#plausibles-snippet);
// Umami's at /script.js (docs/intake.md#umamis-snippet).
func TestPlausibleScriptVariants(t *testing.T) {
	t.Parallel()
	h := trackerHarness(t)
	for _, tt := range []struct {
		path   string
		status int
		has    string
	}{
		{"/js/script.js", 200, "{}"},
		{"/js/script.outbound-links.js", 200, `{"outbound-links":1}`},
		{"/js/script.local.hash.js", 200, `{"hash":1,"local":1}`},
		{"/js/script.hash.local.js", 200, `{"hash":1,"local":1}`},
		{"/js/script.compat.js", 200, `{"compat":1}`},
		{"/js/script.outbound-links.compat.js", 200, `{"compat":1,"outbound-links":1}`},
		{"/js/script.nope.js", 404, "unknown extension"},
		{"/js/script.hash.hash.js", 404, "named twice"},
		{"/js/script.hashjs", 404, "no such script"},
		{"/js/other.js", 404, "no such script"},
		// The 2025 script: pa-<site id or alias>.js, that name baked in.
		{"/js/pa-web.js", 200, `{"web":1,"d":"web"}`},
		{"/js/pa-example.com.js", 200, `{"web":1,"d":"example.com"}`},
		{"/js/pa-nope.js", 404, `no site has the id or al`},
		{"/js/pa-.js", 404, "no such script"},
		// Umami's tracker at Umami's own path.
		{"/script.js", 200, `attr("website-id")`},
	} {
		r := h.c("GET", tt.path, "", "")
		if r.status != tt.status || !strings.Contains(string(r.body), tt.has) {
			t.Errorf("%s: got %d %.80s, want %d with %s", tt.path, r.status, r.body, tt.status, tt.has)
		}
	}
}
