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
// it, so each page sets the deadline anew (README "Export").
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
	contentType, ok := exportFormats[format]
	if !ok {
		return fault.Errorf(fault.InvalidFormat, "format is required, as ndjson or csv")
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="tally-%s-%s-%s.%s"`,
		site.ID, from.Format(time.DateOnly), to.Format(time.DateOnly), format))

	var write func(page []storage.ExportEvent) error
	var cw *csv.Writer
	switch format {
	case "csv":
		cw = csv.NewWriter(w)
		write = func(page []storage.ExportEvent) error {
			for i := range page {
				cw.Write(exportCSVRecord(&page[i]))
			}
			cw.Flush()
			return cw.Error()
		}
	default:
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		write = func(page []storage.ExportEvent) error {
			for i := range page {
				if err := enc.Encode(exportEventOf(&page[i])); err != nil {
					return err
				}
			}
			return nil
		}
	}

	started := false
	start := func() {
		started = true
		w.WriteHeader(http.StatusOK)
		if cw != nil {
			cw.Write(exportCSVHeader)
		}
	}
	var writeErr error
	err = s.db.ExportEvents(r.Context(), site.ID, from, to.AddDate(0, 0, 1), func(page []storage.ExportEvent) error {
		if !started {
			start()
		}
		_ = rc.SetWriteDeadline(time.Now().Add(exportWriteTimeout))
		if writeErr = write(page); writeErr == nil {
			writeErr = rc.Flush()
		}
		return writeErr
	})
	switch {
	case err == nil:
		if !started {
			start()
			if cw != nil {
				cw.Flush()
			}
		}
		return nil
	case !started:
		return err
	case writeErr != nil || errors.Is(err, r.Context().Err()):
		return nil // the client went away: nobody to tell
	default:
		// The status is sent: end the response without its last chunk, so
		// the client sees a broken transfer rather than a short export.
		s.log.Error("internal error", "method", r.Method, "route", exportRoute, "err", err.Error())
		panic(http.ErrAbortHandler)
	}
}
