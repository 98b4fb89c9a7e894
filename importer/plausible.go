package importer

import (
	"archive/zip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tally-analytics/tally/storage"
)

// Plausible's CSV export (docs/import.md): the zip Plausible offers under Site
// settings > Imports & Exports holds one CSV per report, each a per-day rollup.
// The reports and their columns are those of Plausible's own CSV importer,
// which reads the export back (plausible/analytics
// lib/plausible/imported/csv_importer.ex, input_structures and
// parse_filename!), written by the export's queries (lib/plausible/exports.ex,
// export_queries and the export_*_q functions). Files are CSVWithNames: a
// header row naming the columns, then one row per day and value. Columns are
// found by the header's names, so a column a later Plausible version adds
// (scroll depth, time on page) is ignored, and one an earlier version lacked is
// read as absent.

// plausibleReport is one report of the export: its columns and how a row
// of it becomes imported rollup rows.
type plausibleReport struct {
	// required and optional columns besides date
	required, optional []string
	rows               func(r plausibleRow) []storage.ImportedRow
}

// plausibleRow is one parsed CSV row: its day and columns by name.
type plausibleRow struct {
	day  string
	cols map[string]string
	nums map[string]int64
}

// text is a text column, cut at 512 bytes as a visit's values are
// (docs/intake.md#visits), or shown when empty.
func (r plausibleRow) text(col, shown string) string {
	v := strings.TrimSpace(r.cols[col])
	if v == "" {
		return shown
	}
	if len(v) > 512 {
		// Cut on a character's boundary: once the text is valid UTF-8, only
		// the cut's last character can be partial.
		v = strings.ToValidUTF8(v, "\uFFFD")[:512]
		for !utf8.ValidString(v) {
			v = v[:len(v)-1]
		}
	}
	return v
}

// has reports whether the file has column col.
func (r plausibleRow) has(col string) bool {
	_, ok := r.cols[col]
	return ok
}

// code is column col as an ISO code, upper case; (not set) when empty.
func (r plausibleRow) code(col string) string {
	if v := strings.ToUpper(r.text(col, "")); v != "" {
		return v
	}
	return storage.NotSet
}

// visitRow is a row of a report of visits (sessions_v2 in Plausible):
// visits, bounces, duration and pageviews of the visits, as the query
// API's session metrics need them. visitsCol names the visits column
// (entrances and exits in the page reports).
func (r plausibleRow) visitRow(dim, value, visitsCol string) storage.ImportedRow {
	return storage.ImportedRow{Day: r.day, Dim: dim, Value: value, Visitors: r.nums["visitors"],
		Visits: r.nums[visitsCol], Pageviews: r.nums["pageviews"], Events: r.nums["pageviews"],
		Bounces: r.nums["bounces"], Duration: r.nums["visit_duration"]}
}

// visitMetrics are the columns of the reports of visits (export_*_q of
// sessions_v2).
var visitMetrics = []string{"visitors", "visits", "visit_duration", "bounces"}

// Plausible's names that the query API shows differently: its screen
// sizes (Laptop is a desktop's), and the OS and browser names Tally's
// User-Agent parser gives (docs/intake.md#gates-in-order, enrichment).
var (
	plausibleDevices = map[string]string{"Desktop": "desktop", "Laptop": "desktop", "Mobile": "mobile", "Tablet": "tablet"}
	plausibleOSes    = map[string]string{"Mac": "macOS", "GNU/Linux": "Linux"}
	plausibleAgents  = map[string]string{"Microsoft Edge": "Edge"}
)

// mapped is m's name for v, else v itself.
func mapped(m map[string]string, v string) string {
	if n, ok := m[v]; ok {
		return n
	}
	return v
}

// plausibleReports are the export's reports by name (the file name without
// imported_ and the date suffix).
var plausibleReports = map[string]plausibleReport{
	// export_visitors_q: the whole site per day.
	"visitors": {required: []string{"visitors", "pageviews", "bounces", "visits", "visit_duration"},
		rows: func(r plausibleRow) []storage.ImportedRow {
			return []storage.ImportedRow{r.visitRow("", "", "visits")}
		}},
	// export_sources_q: one row per source, referrer and UTM tags; each
	// becomes a row of every dimension it has, and one row of them all
	// (storage.ImportedSourcesDim) for queries on two of them.
	"sources": {required: append([]string{"source"}, visitMetrics...),
		optional: []string{"referrer", "utm_source", "utm_medium", "utm_campaign", "utm_content", "utm_term", "pageviews"},
		rows: func(r plausibleRow) []storage.ImportedRow {
			source := r.text("source", storage.DirectNone)
			out := []storage.ImportedRow{r.visitRow("visit:source", source, "visits")}
			cols := []string{source}
			for _, c := range []string{"referrer", "utm_source", "utm_medium", "utm_campaign", "utm_content", "utm_term"} {
				cols = append(cols, r.text(c, storage.NotSet))
				if r.has(c) {
					out = append(out, r.visitRow("visit:"+c, r.text(c, storage.NotSet), "visits"))
				}
			}
			return append(out, r.visitRow(storage.ImportedSourcesDim, storage.ImportedSourcesValue(cols), "visits"))
		}},
	// export_pages_q: pageviews per page (of events_v2).
	"pages": {required: []string{"page", "visitors", "pageviews"}, optional: []string{"hostname", "visits"},
		rows: func(r plausibleRow) []storage.ImportedRow {
			return []storage.ImportedRow{{Day: r.day, Dim: "event:page", Value: r.text("page", storage.NotSet),
				Visitors: r.nums["visitors"], Visits: r.nums["visits"], Pageviews: r.nums["pageviews"], Events: r.nums["pageviews"]}}
		}},
	"entry_pages": {required: []string{"entry_page", "visitors", "entrances"}, optional: []string{"visit_duration", "bounces", "pageviews"},
		rows: func(r plausibleRow) []storage.ImportedRow {
			return []storage.ImportedRow{r.visitRow("visit:entry_page", r.text("entry_page", storage.NotSet), "entrances")}
		}},
	"exit_pages": {required: []string{"exit_page", "visitors", "exits"}, optional: []string{"visit_duration", "bounces", "pageviews"},
		rows: func(r plausibleRow) []storage.ImportedRow {
			return []storage.ImportedRow{r.visitRow("visit:exit_page", r.text("exit_page", storage.NotSet), "exits")}
		}},
	// export_custom_events_q: events other than pageviews, by name (the
	// link_url and path of Plausible's own goals are not kept).
	"custom_events": {required: []string{"name", "visitors", "events"}, optional: []string{"link_url", "path"},
		rows: func(r plausibleRow) []storage.ImportedRow {
			return []storage.ImportedRow{{Day: r.day, Dim: "event:name", Value: r.text("name", storage.NotSet),
				Visitors: r.nums["visitors"], Events: r.nums["events"]}}
		}},
	// export_locations_q: by country, region and city; the query API has
	// the country and the region (ISO 3166-2, as the intake keeps it), each
	// a row; the city (a GeoNames id) is not kept.
	"locations": {required: append([]string{"country"}, visitMetrics...), optional: []string{"region", "city", "pageviews"},
		rows: func(r plausibleRow) []storage.ImportedRow {
			out := []storage.ImportedRow{r.visitRow("visit:country", r.code("country"), "visits")}
			if r.has("region") {
				out = append(out, r.visitRow("visit:region", r.code("region"), "visits"))
			}
			return out
		}},
	"devices": {required: append([]string{"device"}, visitMetrics...), optional: []string{"pageviews"},
		rows: func(r plausibleRow) []storage.ImportedRow {
			return []storage.ImportedRow{r.visitRow("visit:device", mapped(plausibleDevices, r.text("device", storage.NotSet)), "visits")}
		}},
	// Browsers and systems by version: the versions of one add up.
	"browsers": {required: append([]string{"browser"}, visitMetrics...), optional: []string{"browser_version", "pageviews"},
		rows: func(r plausibleRow) []storage.ImportedRow {
			return []storage.ImportedRow{r.visitRow("visit:browser", mapped(plausibleAgents, r.text("browser", storage.NotSet)), "visits")}
		}},
	"operating_systems": {required: append([]string{"operating_system"}, visitMetrics...), optional: []string{"operating_system_version", "pageviews"},
		rows: func(r plausibleRow) []storage.ImportedRow {
			return []storage.ImportedRow{r.visitRow("visit:os", mapped(plausibleOSes, r.text("operating_system", storage.NotSet)), "visits")}
		}},
}

// plausibleName is a file name of the export: imported_ (optional), the
// report, the export's first and last day (optional), .csv
// (csv_importer.ex, parse_filename!).
var plausibleName = regexp.MustCompile(`^(?:imported_)?([a-z_]+?)(?:_\d{8}_\d{8})?\.csv$`)

// plausibleFile is one CSV of the export: where it is and how big.
type plausibleFile struct {
	name   string // as errors name it: the path, or zip:entry
	report string
	size   int64
	open   func() (io.ReadCloser, error)
}

// Plausible imports Plausible's CSV export of one site into site's
// imported rollups: files are the export's zip, or its CSVs. Progress, when
// not nil, is told the bytes of CSV read so far and in all. It returns the
// CSV rows imported. Rows of days from the day of the site's first own
// visit on are left out, as Plausible leaves out what its own data covers
// (lib/plausible/imported.ex, clamp_dates). A bad file is an error naming
// it and its line, and nothing of the import is kept; importing the same
// days again replaces them.
func Plausible(ctx context.Context, db *storage.DB, site string, files []string, progress func(done, total int64)) (int64, error) {
	s, ok := db.Site(site)
	if !ok {
		return 0, fmt.Errorf("site %q not found", site)
	}
	list, closeAll, err := plausibleFiles(files)
	defer closeAll()
	if err != nil {
		return 0, err
	}
	// The day of the site's first own visit, in its time zone.
	cut := ""
	if first, ok, err := db.FirstVisit(ctx, site); err != nil {
		return 0, err
	} else if ok {
		loc, err := storage.LoadTimeZone(s.TimeZone)
		if err != nil {
			return 0, err
		}
		cut = first.In(loc).Format(time.DateOnly)
	}
	// A zip states each entry's size, and archive/zip refuses an entry
	// that inflates past it: a bomb is refused here, before anything is
	// written. The budget reads the files within it anyway (a CSV file
	// may grow while it is read).
	b := newBudget(maxPlausibleBytes)
	var total int64
	names := make([]string, 0, len(list))
	for _, f := range list {
		if total += f.size; total > b.max {
			return 0, badExport("%s", b.tooMuch("the export's CSV files"))
		}
		names = append(names, filepath.Base(f.name))
	}
	im, err := db.BeginImport(ctx, site, "plausible", names)
	if err != nil {
		return 0, err
	}
	p := &plausibleRun{im: im, cut: cut, total: total, progress: progress, budget: b}
	for _, f := range list {
		if err := p.file(ctx, f); err != nil {
			return 0, errors.Join(err, im.Abandon(context.WithoutCancel(ctx)))
		}
	}
	if err := p.flush(ctx); err != nil {
		return 0, errors.Join(err, im.Abandon(context.WithoutCancel(ctx)))
	}
	meta := map[string]any{"skipped_rows": p.skipped}
	if cut != "" {
		meta["native_from"] = cut
	}
	if err := im.Finish(ctx, p.rows, meta); err != nil {
		return 0, errors.Join(err, im.Abandon(context.WithoutCancel(ctx)))
	}
	if progress != nil {
		progress(total, total)
	}
	return p.rows, nil
}

// plausibleFiles lists the CSVs of files (zips opened), each report once.
func plausibleFiles(files []string) ([]plausibleFile, func(), error) {
	var closers []io.Closer
	closeAll := func() {
		for _, c := range closers {
			_ = c.Close()
		}
	}
	if len(files) == 0 {
		return nil, closeAll, badExport("plausible: no files given: name the export's zip, or its CSV files")
	}
	var list []plausibleFile
	seen := map[string]string{}
	add := func(f plausibleFile, base string) error {
		m := plausibleName.FindStringSubmatch(base)
		if m == nil {
			return badExport("%s: not a file of Plausible's CSV export (imported_visitors_20240101_20241231.csv, sources_....csv, ...)", f.name)
		}
		if _, ok := plausibleReports[m[1]]; !ok {
			return badExport("%s: %s is not a report of Plausible's CSV export", f.name, quote(m[1]))
		}
		if other, dup := seen[m[1]]; dup {
			return badExport("%s: the report %s is also in %s: give each report once", f.name, m[1], other)
		}
		seen[m[1]] = f.name
		f.report = m[1]
		list = append(list, f)
		return nil
	}
	for _, name := range files {
		if strings.EqualFold(filepath.Ext(name), ".zip") {
			z, c, err := openZip(name)
			if err != nil {
				return nil, closeAll, err
			}
			closers = append(closers, c)
			for _, e := range z.File {
				base := path.Base(e.Name)
				if e.FileInfo().IsDir() || strings.HasPrefix(e.Name, "__MACOSX/") || strings.HasPrefix(base, ".") {
					continue
				}
				if err := add(plausibleFile{name: name + ":" + clip(e.Name), size: int64(min(e.UncompressedSize64, 1<<62)), open: e.Open}, base); err != nil {
					return nil, closeAll, err
				}
			}
			continue
		}
		st, err := os.Stat(name)
		if err != nil {
			return nil, closeAll, err
		}
		if st.IsDir() {
			return nil, closeAll, badExport("%s: a directory: name the export's zip or its CSV files", name)
		}
		if err := add(plausibleFile{name: name, size: st.Size(), open: func() (io.ReadCloser, error) { return os.Open(name) }}, filepath.Base(name)); err != nil {
			return nil, closeAll, err
		}
	}
	return list, closeAll, nil
}

// zipDirectoryMax bounds what opening a zip reads (its directory, and
// the search for it at the end), so the entries it lists in memory: a
// Plausible export holds 10 files, and a directory of 1 MiB some 10,000
// entries, where a 256 MiB upload of empty entries would list millions.
const zipDirectoryMax = 1 << 20

// openZip opens the zip at name, refusing one whose directory is over
// zipDirectoryMax.
func openZip(name string) (*zip.Reader, io.Closer, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, badExport("%s: %w", name, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, badExport("%s: %w", name, err)
	}
	at := &directoryReader{r: f, left: zipDirectoryMax}
	z, err := zip.NewReader(at, st.Size())
	switch {
	case errors.Is(err, errTooMuch):
		f.Close()
		return nil, nil, badExport("%s: a zip whose list of files is over %d MiB: not a Plausible export", name, zipDirectoryMax>>20)
	case err != nil:
		f.Close()
		return nil, nil, badExport("%s: not a readable zip: %w", name, err)
	}
	at.opened = true
	return z, f, nil
}

// directoryReader reads a zip file for archive/zip, failing with
// errTooMuch once left bytes have been read, until it is opened.
type directoryReader struct {
	r      io.ReaderAt
	left   int64
	opened bool
}

func (d *directoryReader) ReadAt(p []byte, off int64) (int, error) {
	if !d.opened {
		if d.left -= int64(len(p)); d.left < 0 {
			return 0, errTooMuch
		}
	}
	return d.r.ReadAt(p, off)
}

// plausibleRun is one import's state: rows waiting for a writer job, and
// counts.
type plausibleRun struct {
	im       *storage.Import
	budget   *budget
	cut      string
	pending  []storage.ImportedRow
	rows     int64
	skipped  int64
	done     int64
	total    int64
	progress func(done, total int64)
}

// plausibleBytes counts the bytes of an export's CSV read through it, for progress.
type plausibleBytes struct {
	r io.Reader
	n *int64
}

func (c plausibleBytes) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	*c.n += int64(n)
	return n, err
}

// file reads one CSV of the export into rollup rows.
func (p *plausibleRun) file(ctx context.Context, f plausibleFile) error {
	rc, err := f.open()
	if err != nil {
		return badExport("%s: %w", f.name, err)
	}
	defer rc.Close()
	var read int64
	base := p.done
	cr := newCSVReader(p.budget.reader(plausibleBytes{r: rc, n: &read}))
	fail := func(err error) error {
		switch {
		case errors.Is(err, errLineTooLong):
			return badExport("%s: line %d: %s", f.name, cr.next, tooLong)
		case errors.Is(err, errTooMuch):
			return badExport("%s: %s", f.name, p.budget.tooMuch("the export's CSV files"))
		}
		return badExport("%s: %w", f.name, err)
	}
	report := plausibleReports[f.report]
	header, err := cr.Read()
	if err == io.EOF {
		return badExport("%s: empty: the file has no header row", f.name)
	}
	if err != nil {
		return fail(err)
	}
	at := map[string]int{}
	for i, h := range header {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		if _, dup := at[h]; !dup {
			at[h] = i
		}
	}
	for _, c := range append([]string{"date"}, report.required...) {
		if _, ok := at[c]; !ok {
			return badExport("%s: line 1: the header has no column %q (a %s report has %s)", f.name, c, f.report,
				strings.Join(append([]string{"date"}, report.required...), ", "))
		}
	}
	numeric := map[string]bool{}
	for _, c := range []string{"visitors", "visits", "pageviews", "events", "bounces", "visit_duration", "entrances", "exits"} {
		numeric[c] = true
	}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(err)
		}
		line, _ := cr.FieldPos(0)
		r := plausibleRow{cols: map[string]string{}, nums: map[string]int64{}}
		for _, c := range append(report.required, report.optional...) {
			i, ok := at[c]
			if !ok {
				continue
			}
			if i >= len(rec) {
				return badExport("%s: line %d: no value for column %q", f.name, line, c)
			}
			r.cols[c] = rec[i]
			if numeric[c] {
				v := strings.TrimSpace(rec[i])
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n < 0 {
					return badExport("%s: line %d: column %q: %s is not a whole number of 0 or more", f.name, line, c, quote(v))
				}
				r.nums[c] = n
			}
		}
		d := strings.TrimSpace(rec[at["date"]])
		if _, err := time.Parse(time.DateOnly, d); err != nil {
			return badExport("%s: line %d: column \"date\": %s is not a date (YYYY-MM-DD)", f.name, line, quote(d))
		}
		r.day = d
		if p.cut != "" && d >= p.cut {
			p.skipped++
			continue
		}
		p.rows++
		p.pending = append(p.pending, report.rows(r)...)
		if len(p.pending) >= storage.ImportRowsChunk-8 {
			p.done = base + read
			if err := p.flush(ctx); err != nil {
				return err
			}
		}
	}
	p.done = base + read
	return nil
}

// flush writes the pending rows in one writer job and reports progress.
func (p *plausibleRun) flush(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := p.im.Add(ctx, p.pending); err != nil {
		return err
	}
	p.pending = p.pending[:0]
	if p.progress != nil {
		p.progress(p.done, p.total)
	}
	return nil
}

// BadExportError is a file that is not a readable part of Plausible's CSV
// export, named with its line where it has one: the caller's input, not a
// failure of the service (the import endpoint answers it 400).
type BadExportError struct{ msg string }

func (e *BadExportError) Error() string { return e.msg }

// badExport is a BadExportError, its message clipped: the values it
// quotes should be quote()d already.
func badExport(format string, args ...any) error {
	return &BadExportError{msg: clip(fmt.Errorf(format, args...).Error())}
}
