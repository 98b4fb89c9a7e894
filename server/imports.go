package server

import (
	"io"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/importer"
	"github.com/tally-analytics/tally/storage"
)

// importIdle is how long an import's request may go without a byte of
// its body, or its answer wait, before the listener gives up on it.
const importIdle = 60 * time.Second

// importEvents stores an import stream (README "Switching from Plausible
// / Umami / GoatCounter"), as `tally import` sends it to a running
// server: the admin token or an admin key that reaches the site. The body
// is NDJSON (a header, rows, an end line) of any length, read as it
// comes and stored a chunk at a time by the writer, so the request lives
// as long as the import; each chunk gives it importIdle more.
//
// POST /v1/sites/:siteId/imports
func (s *Server) importEvents(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	extend := func() {
		rc.SetReadDeadline(time.Now().Add(importIdle))
		rc.SetWriteDeadline(time.Now().Add(importIdle))
	}
	extend()
	sum, err := importer.Apply(r.Context(), s.db, site, p.actor(), &idleReader{r: r.Body, extend: extend}, func(importer.Counts) { extend() })
	if err != nil {
		return err
	}
	s.log.Info("import stored", "source", sum.Source, "rows", sum.Rows, "imported", sum.Imported,
		"duplicates", sum.Duplicates, "duration_ms", sum.Took.Milliseconds())
	writeJSON(w, http.StatusOK, importAnswer{Source: sum.Source, Rows: sum.Rows, Imported: sum.Imported,
		Duplicates: sum.Duplicates, Skipped: sum.Skipped, DurationMS: sum.Took.Milliseconds()})
	return nil
}

// idleReader gives the request more time whenever a read brings bytes.
type idleReader struct {
	r      io.Reader
	extend func()
	n      int
}

func (i *idleReader) Read(b []byte) (int, error) {
	n, err := i.r.Read(b)
	if i.n += n; i.n >= 1<<20 {
		i.n = 0
		i.extend()
	}
	return n, err
}
