package server

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/web"
)

// script serves the tracking script: cacheable for an hour, then
// revalidated with its ETag (304 when unchanged).
//
// GET /v1/script.js (collector)
func (s *Server) script(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	h := w.Header()
	h.Set("ETag", web.ScriptETag)
	h.Set("Cache-Control", "public, max-age=3600")
	h.Set("Content-Type", "text/javascript; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatches(inm, web.ScriptETag) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	w.Write(web.Script())
	return nil
}

// etagMatches reports whether an If-None-Match value names etag.
func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}

// dashboardETags holds each dashboard file's entity tag, a hash of its
// embedded bytes, computed on its first request.
var dashboardETags sync.Map

// dashboard serves the embedded dashboard: index.html at / and /v1/ui/,
// its assets under /v1/ui/. A missing asset is the JSON 404. Every answer
// is revalidated (no-cache) with its ETag, so an unchanged file (the
// 51 KB world map, docs/dashboard.md#locations) is a 304.
//
// GET /, GET /v1/ui/*filepath (query API)
func (s *Server) dashboard(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	name := strings.TrimPrefix(path.Clean("/"+ps.ByName("filepath")), "/")
	if name == "" {
		name = "index.html"
	}
	return serveDashboardFile(w, r, name, "'none'")
}

// serveDashboardFile answers the dashboard's file name, which the pages of
// ancestors (a CSP frame-ancestors source list) may frame: with 'none',
// X-Frame-Options DENY too, for browsers without CSP.
func serveDashboardFile(w http.ResponseWriter, r *http.Request, name, ancestors string) error {
	b, err := fs.ReadFile(web.Dashboard(), name)
	if err != nil {
		return errNotFound
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	if ancestors == "'none'" {
		h.Set("X-Frame-Options", "DENY")
	}
	h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:; frame-ancestors "+ancestors)
	tag, ok := dashboardETags.Load(name)
	if !ok {
		sum := sha256.Sum256(b)
		tag, _ = dashboardETags.LoadOrStore(name, `"`+hex.EncodeToString(sum[:8])+`"`)
	}
	h.Set("ETag", tag.(string))
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatches(inm, tag.(string)) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	w.Write(b)
	return nil
}
