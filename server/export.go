package server

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// exportRoute names the export in logs.
const exportRoute = "/v1/sites/:siteId/export"

// exportWriteTimeout is how long one page of an export may take to write:
// the listener's own write timeout would cut off any export longer than
// it, so each page sets the deadline anew (docs/query-api.md#export).
const exportWriteTimeout = 60 * time.Second

// exportFormats are the export's formats and their Content-Type.
var exportFormats = map[string]string{
	"ndjson": "application/x-ndjson",
	"csv":    "text/csv; charset=utf-8",
}

// export streams the site's events whose ts lies in the from..to UTC days
// as NDJSON or CSV, page by page, flushing each: memory holds one page,
// however many events the range holds.
//
// GET /v1/sites/:siteId/export
func (s *Server) export(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	site, from, to, err := s.readSite(r, ps)
	if err != nil {
		return err
	}
	format := r.URL.Query().Get("format")
	if _, ok := exportFormats[format]; !ok {
		return fault.Errorf(fault.InvalidFormat, "format is required, as ndjson or csv")
	}
	out := &exportWriter{w: w, rc: http.NewResponseController(w), format: format,
		filename: fmt.Sprintf("tally-%s-%s-%s.%s", site.ID, from.Format(time.DateOnly), to.Format(time.DateOnly), format)}
	err = s.db.ExportEvents(r.Context(), site.ID, from, to.AddDate(0, 0, 1), s.cfg.QueryTimeout, out.page)
	switch {
	case err == nil:
		out.start() // an empty export is still a file
		_ = out.flush()
		return nil
	case !out.started:
		return err
	case out.writeErr != nil || errors.Is(err, r.Context().Err()):
		return nil // the client went away: nobody to tell
	case fault.Code(err) == fault.QueryTimeout:
		// A page's read past its deadline, after the status went out:
		// the client sees a broken transfer, as below, but it is no bug.
		panic(http.ErrAbortHandler)
	default:
		// The status is sent: end the response without its last chunk, so
		// the client sees a broken transfer rather than a short export.
		s.log.Error("internal error", "method", r.Method, "route", exportRoute, "err", err.Error())
		panic(http.ErrAbortHandler)
	}
}

// exportWriter writes an export's pages as they come: the status and
// headers with the first, then each page's rows, flushed.
type exportWriter struct {
	w                http.ResponseWriter
	rc               *http.ResponseController
	format, filename string

	started  bool
	csv      *csv.Writer
	json     *json.Encoder
	writeErr error // the client's connection failed
}

// start sends the status and headers (and the CSV header), once.
func (o *exportWriter) start() {
	if o.started {
		return
	}
	o.started = true
	h := o.w.Header()
	h.Set("Content-Type", exportFormats[o.format])
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Disposition", `attachment; filename="`+o.filename+`"`)
	o.w.WriteHeader(http.StatusOK)
	if o.format == "csv" {
		o.csv = csv.NewWriter(o.w)
		o.csv.Write(exportCSVHeader)
	} else {
		o.json = json.NewEncoder(o.w)
		o.json.SetEscapeHTML(false)
	}
}

// page writes one page and flushes it to the client.
func (o *exportWriter) page(page []storage.ExportEvent) error {
	o.start()
	_ = o.rc.SetWriteDeadline(time.Now().Add(exportWriteTimeout))
	for i := range page {
		if o.csv != nil {
			o.csv.Write(exportCSVRecord(&page[i]))
		} else if err := o.json.Encode(exportEventOf(&page[i])); err != nil {
			o.writeErr = err
			return err
		}
	}
	o.writeErr = o.flush()
	return o.writeErr
}

// flush sends what is buffered.
func (o *exportWriter) flush() error {
	if o.csv != nil {
		o.csv.Flush()
		if err := o.csv.Error(); err != nil {
			return err
		}
	}
	return o.rc.Flush()
}
