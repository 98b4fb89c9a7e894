package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/schema"
	"github.com/tally-analytics/tally/storage"
	"github.com/tally-analytics/tally/web"
)

// Paths of Plausible's and Umami's intake: their own, outside /v1, so that
// their trackers only change the host
// (docs/intake.md#plausible--and-umami-compatible-intake).
const (
	pathPlausibleEvent = "/api/event"
	pathUmamiSend      = "/api/send"
	pathUmamiScript    = "/script.js"
)

// trackerRoutes registers Plausible's and Umami's intake on the collector.
// Their messages carry no credential, only the site's name, as in
// Plausible and Umami; so with REQUIRE_API_KEY=require, where every
// request must bring a key, they do not exist and answer the ordinary 404.
//
// POST /api/event, POST /api/send, GET /js/:file, GET /script.js (collector)
func (s *Server) trackerRoutes(rt *router) {
	if s.cfg.RequireAPIKey == KeyModeRequire {
		return
	}
	rt.route(http.MethodPost, pathPlausibleEvent, s.ingest(plausibleEvents))
	rt.route(http.MethodPost, pathUmamiSend, s.ingest(umamiEvents))
	rt.route(http.MethodGet, pathPlausibleScript, s.plausibleScript)
	rt.route(http.MethodGet, pathUmamiScript, s.umamiScript)
}

// umamiScript serves Tally's stand-in for Umami's tracker, so that Umami's
// snippet keeps its form with only the host changed
// (docs/intake.md#umamis-snippet).
//
// GET /script.js (collector)
func (s *Server) umamiScript(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	b, etag := web.UmamiScript()
	serveScript(w, r, b, etag)
	return nil
}

// serveScript writes a tracker script, cached for an hour as
// /v1/script.js is, 304 on a matching If-None-Match.
func serveScript(w http.ResponseWriter, r *http.Request, b []byte, etag string) {
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Cache-Control", "public, max-age=3600")
	h.Set("Content-Type", "text/javascript; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatches(inm, etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Write(b)
}

// peekBody reads the request body, at most ingestBodyLimit bytes and one
// more, and puts it back for the pipeline's body step (which then says
// 413 for a longer one).
func peekBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, ingestBodyLimit+1))
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
	if err != nil {
		return nil, fault.Errorf(fault.InvalidEvent, "could not read the request body")
	}
	if len(body) > ingestBodyLimit {
		return nil, fault.Errorf(fault.PayloadTooLarge, "the request body is larger than %d bytes", ingestBodyLimit)
	}
	return body, nil
}

// trackerCredential is the credential of a format whose message names its
// site (Plausible's domain, Umami's website): the first name that is a
// site's alias or id (storage.SiteNamed). A malformed body is 400, a body
// over the limit 413, and a name no site has 401, as an unknown site
// bearer is on /events. Events record the credential "site".
func trackerCredential(names func(body []byte) ([]string, error)) func(*Server, *http.Request) (*storage.Site, string, error) {
	return func(s *Server, r *http.Request) (*storage.Site, string, error) {
		body, err := peekBody(r)
		if err != nil {
			return nil, "", err
		}
		list, err := names(body)
		if err != nil {
			return nil, "", err
		}
		for _, n := range list {
			if site, ok := s.db.SiteNamed(n); ok {
				return site, credentialSite, nil
			}
		}
		return nil, "", fault.Errorf(fault.Unauthorized,
			"unknown site: no site has the alias or id %q; give the site its names with PATCH /v1/sites/:siteId {\"aliases\": [...]}", list[0])
	}
}

// nativeDLQPayload is what the DLQ keeps of a quarantined event of a
// tracker format: the event as Tally's own envelope (its cookieless anon
// id, consent denied), which a replay re-posts to /events, where it maps
// to the same event.
func nativeDLQPayload(ev *schema.Event) json.RawMessage {
	m := map[string]any{"id": ev.ID, "site_id": ev.SiteID, "anon_id": ev.AnonID, "type": ev.Type,
		"ts": ev.TS.UTC().Format(time.RFC3339Nano), "consent": ev.Consent}
	if ev.URL != nil {
		m["url"] = *ev.URL
	}
	if ev.Referrer != nil {
		m["referrer"] = *ev.Referrer
	}
	if ev.Properties != nil {
		m["properties"] = ev.Properties
	}
	b, _ := json.Marshal(m)
	return b
}

// writeText writes a text/plain answer.
func writeText(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, text)
}
