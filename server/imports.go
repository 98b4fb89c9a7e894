package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/importer"
	"github.com/tally-analytics/tally/storage"
)

// importIdle is how long an import's request may go without a byte of
// its body, or its answer wait, before the listener gives up on it.
const importIdle = 60 * time.Second

// importEvents stores an import stream (docs/import.md), as `tally import`
// sends it to a running server: the admin token or an admin key that reaches
// the site. The body is NDJSON (a header, rows, an end line) of any length,
// read as it comes and stored a chunk at a time by the writer, so the request
// lives as long as the import; each chunk gives it importIdle more.
//
// POST /v1/sites/:siteId/imports
func (s *Server) importEvents(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	extend := importDeadlines(w)
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

// importUploadMax bounds the Plausible export one request may upload:
// a year of a site with a few thousand pages and sources is a few MB
// zipped (testdata/import/plausible's generator, BenchmarkPlausibleImport:
// 308,425 CSV rows), so 256 MiB holds any site this service serves while
// no single request can fill the disk.
const importUploadMax = 256 << 20

// importPlausible imports Plausible's CSV export into a running server's
// site as imported rollups (docs/import.md), as `tally import --from plausible`
// sends it: the body is the export's zip (the command zips CSV files given one
// by one), kept in a temporary file while it is read; ?file= names it. The admin token or an
// admin key that reaches the site.
//
// POST /v1/sites/:siteId/imports/plausible (importUpload)
func (s *Server) importPlausible(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	_, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	if r.ContentLength > importUploadMax {
		return fault.Errorf(fault.PayloadTooLarge, "request body is larger than %d bytes", importUploadMax)
	}
	release, err := s.imports.take(site.ID, site.WorkspaceID)
	if err != nil {
		return err
	}
	defer release()
	extend := importDeadlines(w)
	// The upload is kept under the name the sender gave (?file=), in a
	// folder of its own, so that the import's audit entry names the
	// export's files as the sender knows them; without one, messages say
	// "the uploaded export".
	dir, err := os.MkdirTemp("", "tally-plausible-")
	if err != nil {
		return tempErr(err)
	}
	defer os.RemoveAll(dir)
	shown, name := "the uploaded export", "export.zip"
	if q := r.URL.Query().Get("file"); q != "" {
		shown = uploadName(q)
		name = shown
		if !strings.EqualFold(filepath.Ext(name), ".zip") {
			name += ".zip" // the reader tells a zip by its name
		}
	}
	kept := filepath.Join(dir, name)
	tmp, err := os.Create(kept)
	if err != nil {
		return tempErr(err)
	}
	defer tmp.Close()
	if _, err := io.Copy(tmp, &idleReader{r: http.MaxBytesReader(w, r.Body, importUploadMax), extend: extend}); err != nil {
		return tempErr(err)
	}
	if err := tmp.Close(); err != nil {
		return tempErr(err)
	}
	start := time.Now()
	n, err := importer.Plausible(r.Context(), s.db, site.ID, []string{kept}, func(int64, int64) { extend() })
	var bad *importer.BadExportError
	switch {
	case errors.As(err, &bad):
		// The temporary folder means nothing to the sender.
		return fault.Errorf(fault.InvalidImport, "%s", strings.ReplaceAll(bad.Error(), kept, shown))
	case err != nil:
		if _, ok := s.db.Site(site.ID); !ok {
			return fault.Errorf(fault.NotFound, "site not found")
		}
		return err
	}
	s.log.Info("import stored", "source", "plausible", "rows", n, "duration_ms", time.Since(start).Milliseconds())
	writeJSON(w, http.StatusOK, importAnswer{Source: "plausible", Rows: n, Imported: n, DurationMS: time.Since(start).Milliseconds()})
	return nil
}

// importUpload takes an export file as it is, the source named by the
// path: Plausible's zip (importPlausible) or a file of a row source
// (importFile); 404 for a source of no other name.
//
// POST /v1/sites/:siteId/imports/:source
func (s *Server) importUpload(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	switch source := ps.ByName("source"); source {
	case "plausible":
		return s.importPlausible(w, r, ps)
	case "goatcounter", "umami", "tally":
		return s.importFile(w, r, ps, source)
	default:
		return fault.Errorf(fault.NotFound, "no import source %q: want plausible, goatcounter, umami or tally", clipName(source))
	}
}

// importFile imports one export file of source uploaded as it is (a CSV,
// or NDJSON for a Tally export, plain or gzipped), as `tally import --from
// source FILE` would: the dashboard's settings page uploads the file a
// browser picked, so the conversion is the command's own Go readers, in
// one place. The body is kept in a temporary file under the bounds of
// Plausible's uploads (importUploads, importUploadMax), read once to
// check it (a bad file is 400 invalid_import naming the line, nothing
// stored), then read again into the import stream that Apply stores, as
// POST /v1/sites/:siteId/imports would. ?file= names the file in messages
// and in the audit entry (its base name; "upload" without it). The admin
// token, an admin key that reaches the site, or a signed-in admin.
func (s *Server) importFile(w http.ResponseWriter, r *http.Request, ps httprouter.Params, source string) error {
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	if r.ContentLength > importUploadMax {
		return fault.Errorf(fault.PayloadTooLarge, "request body is larger than %d bytes", importUploadMax)
	}
	name := uploadName(r.URL.Query().Get("file"))
	release, err := s.imports.take(site.ID, site.WorkspaceID)
	if err != nil {
		return err
	}
	defer release()
	extend := importDeadlines(w)
	tmp, err := os.CreateTemp("", "tally-import-*")
	if err != nil {
		return tempErr(err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if _, err := io.Copy(tmp, &idleReader{r: http.MaxBytesReader(w, r.Body, importUploadMax), extend: extend}); err != nil {
		return tempErr(err)
	}
	if err := tmp.Close(); err != nil {
		return tempErr(err)
	}
	read := func(emit func(importer.Row) error) (importer.ReadStats, error) {
		st, err := importer.ReadFiles(r.Context(), source, []string{tmp.Name()}, emit, nil)
		var le *importer.LineError
		if errors.As(err, &le) {
			// The temporary file's name means nothing to the sender.
			le.File = name
			return st, fault.Errorf(fault.InvalidImport, "%s", le.Error())
		}
		return st, err
	}
	checked := 0
	if _, err := read(func(importer.Row) error {
		if checked++; checked%checkedPerExtend == 0 {
			extend()
		}
		return nil
	}); err != nil {
		return err
	}
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pw.CloseWithError(writeImportStream(pw, importer.Header{Source: source, Files: []string{name}}, read))
	}()
	sum, err := importer.Apply(r.Context(), s.db, site, p.actor(), pr, func(importer.Counts) { extend() })
	pr.CloseWithError(errors.New("the import stopped"))
	<-done
	if err != nil {
		return err
	}
	s.log.Info("import stored", "source", sum.Source, "rows", sum.Rows, "imported", sum.Imported,
		"duplicates", sum.Duplicates, "duration_ms", sum.Took.Milliseconds())
	writeJSON(w, http.StatusOK, importAnswer{Source: sum.Source, Rows: sum.Rows, Imported: sum.Imported,
		Duplicates: sum.Duplicates, Skipped: sum.Skipped, DurationMS: sum.Took.Milliseconds()})
	return nil
}

// checkedPerExtend is how many rows the check of an upload reads before it
// gives the request importIdle more: a few thousand rows take well under
// a second, and each extension is two system calls.
const checkedPerExtend = 10000

// writeImportStream writes the import stream of the rows read gives: the
// header, a JSON line a row, the end line with the reader's counts.
func writeImportStream(w io.Writer, h importer.Header, read func(emit func(importer.Row) error) (importer.ReadStats, error)) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(h); err != nil {
		return err
	}
	st, err := read(func(row importer.Row) error { return enc.Encode(row) })
	if err != nil {
		return err
	}
	var t importer.Trailer
	t.End.Rows, t.End.Skipped = st.Rows, st.Skipped
	if err := enc.Encode(t); err != nil {
		return err
	}
	return bw.Flush()
}

// uploadName is the name an upload's ?file= gives it, without folders
// (a browser may send C:\fakepath\...), control characters or more than
// 255 bytes; "upload" without one.
func uploadName(file string) string {
	if i := strings.LastIndexAny(file, `/\`); i >= 0 {
		file = file[i+1:]
	}
	file = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return -1
		}
		return r
	}, file)
	for len(file) > 255 {
		_, size := utf8.DecodeLastRuneInString(file)
		file = file[:len(file)-size]
	}
	if strings.TrimSpace(file) == "" || file == "." || file == ".." {
		return "upload"
	}
	return file
}

// tempErr is a failure to keep an upload in the temporary folder: a full
// one is 503 unavailable, as a full disk is for the database (docs/storage.md#disk-full-read-only-database).
func tempErr(err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return &fault.Error{Code: fault.Unavailable, RetryAfter: 5,
			Message: "the server's temporary folder is full: the upload cannot be kept while it is imported"}
	}
	return err
}

// importDeadlines gives an import's request importIdle from now to read
// and answer, and returns what gives it importIdle more.
func importDeadlines(w http.ResponseWriter) func() {
	rc := http.NewResponseController(w)
	extend := func() {
		rc.SetReadDeadline(time.Now().Add(importIdle))
		rc.SetWriteDeadline(time.Now().Add(importIdle))
	}
	extend()
	return extend
}
