package server

import (
	"bytes"
	"encoding/csv"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// The query API's routes: Plausible's Stats API v2 request and answer
// (docs/query-api.md), over the site's visits and events. The query
// itself (its validation, reads and maths) is storage's, from
// storage/query_model.go on: a handler reads the body, finds the site,
// calls db.Query once and encodes the answer as JSON or CSV.

// queryBodyLimit caps a query's JSON body.
const queryBodyLimit = 64 << 10

// siteQuery answers POST /v1/sites/:siteId/query: the site is the path's.
// A site_id in the body is not checked (a request copied from Plausible's
// documentation names their demo site); the answer's query.site_id is the
// path's.
func (s *Server) siteQuery(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	_, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeQueryRead)
	if err != nil {
		return err
	}
	req, err := decodeQueryBody(w, r)
	if err != nil {
		return err
	}
	return s.answerQuery(w, r, site, req)
}

// plausibleQuery answers POST /api/v2/query: the site is the body's
// site_id; one the caller cannot read is the ordinary 404.
func (s *Server) plausibleQuery(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if _, err := s.authenticate(r); err != nil {
		return err
	}
	req, err := decodeQueryBody(w, r)
	if err != nil {
		return err
	}
	name, err := req.SiteID()
	if err != nil {
		return err
	}
	site, err := s.namedSite(r, name)
	if err != nil {
		return err
	}
	return s.answerQuery(w, r, site, req)
}

// namedSite resolves a body's site_id as Plausible's clients send it: the
// site's id, its domain or any of its aliases
// (docs/query-api.md#plausible-compatibility). An unknown site and one the
// caller cannot read get the same 404, naming what was asked for, so
// neither tells a foreign site from none.
func (s *Server) namedSite(r *http.Request, name string) (*storage.Site, error) {
	id := name
	if site, ok := s.db.SiteNamed(name); ok {
		id = site.ID
	}
	_, site, err := s.site(r, id, storage.ScopeQueryRead)
	if fault.As(err) == errNotFound {
		return nil, fault.Errorf(fault.NotFound, "site %q not found, or this key cannot read it: site_id takes a site's id, its domain or one of its aliases", clipName(name))
	}
	return site, err
}

// clipName shortens a name echoed in an error message.
func clipName(name string) string {
	const most = 100
	if len(name) > most {
		return name[:most] + "..."
	}
	return name
}

// decodeQueryBody reads the body (at most queryBodyLimit bytes) as a
// query's JSON object.
func decodeQueryBody(w http.ResponseWriter, r *http.Request) (*storage.QueryRequest, error) {
	raw, err := readBody(w, r, queryBodyLimit)
	if err != nil {
		return nil, err
	}
	return storage.DecodeQuery(raw)
}

// answerQuery runs req on site and encodes the answer, as CSV when the
// client asked for it.
func (s *Server) answerQuery(w http.ResponseWriter, r *http.Request, site *storage.Site, req *storage.QueryRequest) error {
	answer, err := s.db.Query(r.Context(), site, req, s.now())
	if err != nil {
		return err
	}
	if acceptsCSV(r) {
		return writeQueryCSV(w, answer)
	}
	writeJSON(w, http.StatusOK, queryAnswerOf(answer))
	return nil
}

// acceptsCSV reports whether the client asked for text/csv.
func acceptsCSV(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(part, ";")
		if strings.EqualFold(strings.TrimSpace(mt), "text/csv") {
			return true
		}
	}
	return false
}

// csvUnsafe matches a cell a spreadsheet would run as a formula.
var csvUnsafe = regexp.MustCompile(`^[=+\-@\t\r]`)

// writeQueryCSV writes the results as CSV: a header row of the dimension
// and metric names, then one row per result.
func writeQueryCSV(w http.ResponseWriter, a *storage.QueryAnswer) error {
	var buf bytes.Buffer
	cw := csv.NewWriter(&buf)
	header := append(slices.Clone(a.Query.Dimensions), a.Query.Metrics...)
	_ = cw.Write(header)
	for _, r := range a.Results {
		rec := make([]string, 0, len(header))
		for _, d := range r.Dims {
			// A value starting like a formula is quoted with a leading
			// apostrophe, so opening the file cannot run it.
			if csvUnsafe.MatchString(d) {
				d = "'" + d
			}
			rec = append(rec, d)
		}
		for _, m := range r.Metrics {
			// A metric without a value (a revenue metric of a group
			// without revenue) is an empty cell; revenue is its value.
			cell := ""
			if !math.IsNaN(m) {
				cell = strconv.FormatFloat(m, 'f', -1, 64)
			}
			rec = append(rec, cell)
		}
		_ = cw.Write(rec)
	}
	cw.Flush()
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
	return nil
}
