package server

import (
	"net/http"
	"slices"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/web"
)

// pathPlausibleScript is where Plausible's snippets load their script
// from: the legacy /js/script.js, or /js/script.<ext>[.<ext>...].js with
// extensions, and the 2025 per-site /js/pa-<id>.js
// (docs/intake.md#plausibles-snippet).
const pathPlausibleScript = "/js/:file"

// plausibleScript serves Tally's stand-in for Plausible's legacy script,
// with the extensions the file's name lists in any order, or for its 2025
// script of the site whose id or alias <id> is; an unknown or repeated
// extension, an unknown site, or another file, is 404. Cached as
// /v1/script.js is.
//
// GET /js/script[.<ext>...].js, GET /js/pa-<id>.js (collector)
func (s *Server) plausibleScript(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	var b []byte
	var etag string
	if name, ok := plausibleWebScriptSite(ps.ByName("file")); ok {
		if _, known := s.db.SiteNamed(name); !known {
			return fault.Errorf(fault.NotFound, "no such script: no site has the id or alias %q; the 2025 snippet loads /js/pa-<site id or alias>.js", name)
		}
		b, etag = web.PlausibleWebScript(name)
	} else {
		exts, err := plausibleScriptExtensions(ps.ByName("file"))
		if err != nil {
			return err
		}
		b, etag = web.PlausibleScript(exts)
	}
	serveScript(w, r, b, etag)
	return nil
}

// plausibleWebScriptSite is the site name of a 2025 script's file name:
// example.com for pa-example.com.js.
func plausibleWebScriptSite(file string) (string, bool) {
	mid, ok := strings.CutPrefix(file, "pa-")
	if ok {
		mid, ok = strings.CutSuffix(mid, ".js")
	}
	return mid, ok && mid != ""
}

// plausibleScriptExtensions is the extensions a script's file name lists:
// none for script.js, hash and local for script.hash.local.js.
func plausibleScriptExtensions(file string) ([]string, error) {
	if file == "script.js" {
		return nil, nil
	}
	mid, ok := strings.CutPrefix(file, "script.")
	if ok {
		mid, ok = strings.CutSuffix(mid, ".js")
	}
	if !ok {
		return nil, fault.Errorf(fault.NotFound, "no such script: the collector serves /js/script.js, /js/script.<extension>...js and /js/pa-<site id or alias>.js")
	}
	exts := strings.Split(mid, ".")
	for i, e := range exts {
		if !slices.Contains(web.PlausibleExtensions, e) {
			return nil, fault.Errorf(fault.NotFound, "no such script: unknown extension %q; known: %s", e, strings.Join(web.PlausibleExtensions, ", "))
		}
		if slices.Contains(exts[:i], e) {
			return nil, fault.Errorf(fault.NotFound, "no such script: extension %q is named twice", e)
		}
	}
	return exts, nil
}
