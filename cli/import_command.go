package cli

import (
	"archive/zip"
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/tally-analytics/tally/importer"
	"github.com/tally-analytics/tally/storage"
)

// importSource is one value of `tally import --from`: a source of rows
// (events, read from files or a database and streamed to the service) or
// of rollups (per-day figures).
type importSource struct {
	rows bool
	// rollups writes a source's per-day figures: into the file with the
	// server stopped, or through POST /v1/sites/:siteId/imports/SOURCE of a
	// running one (uploadRollups).
	rollups func(ctx context.Context, db *storage.DB, site string, files []string, progress func(done, total int64)) (int64, error)
}

// importSources are the sources `tally import --from` takes.
var importSources = map[string]importSource{
	"plausible":   {rollups: importer.Plausible},
	"goatcounter": {rows: true},
	"umami":       {rows: true},
	"tally":       {rows: true},
}

// importCommand is `tally import --site SITE --from SOURCE FILE...`
// (docs/import.md). With a server answering at QUERY_ADDR (or --url) the rows
// go to it; with none, the command opens DATABASE_PATH itself, refusing when
// another process has it open, and refusing with DATABASE_URL set. Exit code 0
// done, 1 not done (a bad file, a refusal), 2 bad arguments or no server for
// PostgreSQL.
func importCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	f, code, ok := parseImportFlags(args, getenv, stdout, stderr)
	if !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	base := f.baseURL
	if base == "" {
		base = serverURL(f.queryAddr)
	}
	running := serverAnswers(ctx, base)
	if !running && f.databaseURL != "" {
		// The command writes into a database itself only where it can
		// tell that no server has it open: a SQLite file's lock. Other
		// instances may be serving a PostgreSQL database while this one
		// is stopped (docs/import.md).
		fmt.Fprintf(stderr, "tally import: DATABASE_URL is set and no server answered at %s: on PostgreSQL the command imports only through a running server; start one (or give another instance's query API with --url) and run the import again (nothing was imported)\n", base)
		return 2
	}
	if f.src.rollups != nil {
		if running {
			return uploadRollups(ctx, base, f.token, f.site, f.from, f.files, stdout, stderr)
		}
		return importRollups(ctx, f.src, f.dbPath, f.site, f.files, stdout, stderr)
	}
	return importRows(ctx, f, base, running, stdout, stderr)
}

// importFlags is a `tally import` command line, checked.
type importFlags struct {
	site, from, website                            string
	dbPath, databaseURL, queryAddr, baseURL, token string
	files                                          []string
	src                                            importSource
	dbURL                                          bool // files[0] is an Umami database's URL
}

// parseImportFlags reads the flags (their defaults from getenv) and the
// files, and refuses a command line that cannot import (exit 2).
func parseImportFlags(args []string, getenv func(string) string, stdout, stderr io.Writer) (f importFlags, code int, ok bool) {
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	names := make([]string, 0, len(importSources))
	for n := range importSources {
		names = append(names, n)
	}
	sort.Strings(names)
	fs := flag.NewFlagSet("tally import", flag.ContinueOnError)
	fs.StringVar(&f.site, "site", "", "the site to import into (its id)")
	fs.StringVar(&f.from, "from", "", "the product the files come from: "+strings.Join(names, ", "))
	fs.StringVar(&f.website, "website", "", "with an Umami database URL: the Umami website id to read")
	fs.StringVar(&f.dbPath, "database-path", env("DATABASE_PATH", "./data/analytics.db"), "the database, when no server runs [DATABASE_PATH]")
	fs.StringVar(&f.databaseURL, "database-url", env("DATABASE_URL", ""), "the servers' PostgreSQL: the command then imports only through a running server [DATABASE_URL]")
	fs.StringVar(&f.queryAddr, "query-addr", env("QUERY_ADDR", ":8081"), "where the running server's query API listens [QUERY_ADDR]")
	fs.StringVar(&f.baseURL, "url", "", "the running server's query API base URL, instead of --query-addr (say https://stats.example.com)")
	fs.StringVar(&f.token, "admin-token", env("ADMIN_TOKEN", ""), "the running server's operator token or an admin key; prefer the environment variable [ADMIN_TOKEN]")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: tally import --site SITE --from "+strings.Join(names, "|")+" FILE...\n"+
			"       tally import --site SITE --from umami --website ID postgres://...|mysql://...\n\n"+
			"Imports another product's history (or a Tally export) into a site, through the running server or,\nwith none running, into the database file. Running it again imports nothing twice.")
		fs.PrintDefaults()
	}
	if f.files, code, ok = parseFlagsAndArgs(fs, args, stdout, stderr); !ok {
		return f, code, false
	}
	f.src, ok = importSources[f.from]
	f.dbURL = f.from == "umami" && len(f.files) > 0 && importer.IsDatabaseURL(f.files[0])
	switch {
	case f.site == "":
		fmt.Fprintln(stderr, "tally import: --site is required (the id of the site to import into)")
	case !ok:
		fmt.Fprintf(stderr, "tally import: --from %q: want one of %s\n", f.from, strings.Join(names, ", "))
	case len(f.files) == 0:
		fmt.Fprintln(stderr, "tally import: want at least one FILE to import")
	case f.dbURL && (len(f.files) != 1 || f.website == ""):
		fmt.Fprintln(stderr, "tally import: an Umami database takes one URL and --website (the Umami website id)")
	case !f.dbURL && f.website != "":
		fmt.Fprintln(stderr, "tally import: --website goes with an Umami database URL only")
	default:
		return f, 0, true
	}
	return f, 2, false
}

// rowReader reads a rows source once, calling emit for each row and
// onBytes (when not nil) as the files are read.
type rowReader func(emit func(importer.Row) error, onBytes func(int64)) (importer.ReadStats, error)

// importRows imports a source of rows: everything read once first, so
// that a bad file is refused before anything is stored and the totals
// are known for progress, then streamed to the server or into the file.
func importRows(ctx context.Context, f importFlags, base string, running bool, stdout, stderr io.Writer) int {
	read, auditNames, totalBytes := f.rowReader(ctx)
	var totalRows int64
	if !f.dbURL {
		st, err := read(func(importer.Row) error { return nil }, nil)
		if err != nil {
			fmt.Fprintln(stderr, "tally import:", err, "(nothing was imported)")
			return 1
		}
		totalRows = st.Rows
	}
	progress := importer.NewProgress(stdout, totalRows, totalBytes)
	stream := rowStream(importer.Header{Source: f.from, Files: auditNames}, read, progress)
	var ans importAnswer
	var err error
	how := ""
	if running {
		how = "through the server at " + base
		ans, err = importThroughServer(ctx, base, f.token, f.site, "/imports", "application/x-ndjson", stream)
	} else {
		how = "into " + f.dbPath + " (no server answered at " + base + ")"
		ans, err = importIntoFile(ctx, f.dbPath, f.site, stream)
	}
	progress.Done()
	if err != nil {
		fmt.Fprintln(stderr, "tally import:", err)
		return 1
	}
	fmt.Fprintf(stdout, "tally import: %d rows from %s: %d imported, %d already there, %d skipped (bots), in %.1f s, %s\n",
		ans.Rows, f.from, ans.Imported, ans.Duplicates, ans.Skipped, float64(ans.DurationMS)/1000, how)
	return 0
}

// rowReader is the reader of the command's rows: the Umami database, or
// the files (with their total size, for progress); auditNames are what
// the import's audit entry names.
func (f importFlags) rowReader(ctx context.Context) (read rowReader, auditNames []string, totalBytes int64) {
	if f.dbURL {
		conn := f.files[0]
		return func(emit func(importer.Row) error, _ func(int64)) (importer.ReadStats, error) {
			return importer.ReadUmamiDatabase(ctx, conn, f.website, emit)
		}, []string{importer.DatabaseName(conn)}, 0
	}
	return func(emit func(importer.Row) error, onBytes func(int64)) (importer.ReadStats, error) {
		return importer.ReadFiles(ctx, f.from, f.files, emit, onBytes)
	}, importer.BaseNames(f.files), importer.FileSizes(f.files)
}

// rowStream writes the import stream: the header, one JSON line a row
// (counted into progress), the trailer with the reader's totals.
func rowStream(h importer.Header, read rowReader, progress *importer.Progress) func(io.Writer) error {
	return func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 64<<10)
		enc := json.NewEncoder(bw)
		if err := enc.Encode(h); err != nil {
			return err
		}
		var n int64
		st, err := read(func(r importer.Row) error {
			n++
			progress.Rows(n)
			return enc.Encode(r)
		}, progress.Bytes)
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
}

// importAnswer is the server's answer to an import, and the command's
// own outcome with the server stopped.
type importAnswer struct {
	Source     string `json:"source"`
	Rows       int64  `json:"rows"`
	Imported   int64  `json:"imported"`
	Duplicates int64  `json:"duplicates"`
	Skipped    int64  `json:"skipped"`
	DurationMS int64  `json:"duration_ms"`
}

// serverAnswers reports whether a Tally query API answers /healthz at base.
func serverAnswers(ctx context.Context, base string) bool {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/healthz", nil)
	if err != nil {
		return false
	}
	client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext}}
	res, err := client.Do(req)
	if err != nil {
		return false
	}
	res.Body.Close()
	return true
}

// importThroughServer streams the import to the server's imports
// endpoint and returns its answer.
func importThroughServer(ctx context.Context, base, token, site, endpoint, contentType string, stream func(io.Writer) error) (importAnswer, error) {
	var ans importAnswer
	pr, pw := io.Pipe()
	streamErr := make(chan error, 1)
	go func() {
		err := stream(pw)
		pw.CloseWithError(err)
		streamErr <- err
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/sites/"+site+endpoint, pr)
	if err != nil {
		pr.Close()
		return ans, err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	pr.CloseWithError(errors.New("the server stopped reading"))
	serr := <-streamErr
	var le *importer.LineError
	if errors.As(serr, &le) {
		return ans, fmt.Errorf("%v (the rows before it are stored; fix the file and run the import again)", serr)
	}
	if err != nil {
		return ans, fmt.Errorf("the server at %s: %w", base, err)
	}
	defer res.Body.Close()
	var answer struct {
		importAnswer
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&answer); err != nil {
		return ans, fmt.Errorf("the server at %s answered %s, not an import's outcome", base, res.Status)
	}
	if res.StatusCode != http.StatusOK {
		return ans, fmt.Errorf("the server at %s refused: %s (%s)", base, answer.Error.Message, answer.Error.Code)
	}
	if serr != nil {
		return ans, serr
	}
	return answer.importAnswer, nil
}

// importIntoFile stores the import in the database file at path, which no
// other process may have open.
func importIntoFile(ctx context.Context, path, siteID string, stream func(io.Writer) error) (importAnswer, error) {
	var ans importAnswer
	if path == ":memory:" {
		return ans, errors.New("DATABASE_PATH is :memory:, which no other process can reach; start the server and import through it")
	}
	if err := storage.CheckUnused(ctx, path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return ans, fmt.Errorf("no database at %s and no server answering: start the server, or pass --database-path", path)
		}
		return ans, fmt.Errorf("%s: %w; or pass --url or --query-addr where it listens", path, err)
	}
	db, err := storage.Open(ctx, storage.Options{Path: path})
	if err != nil {
		return ans, fmt.Errorf("%s: %w", path, err)
	}
	defer db.Close()
	site, ok := db.Site(siteID)
	if !ok {
		return ans, fmt.Errorf("no site %q in %s", siteID, path)
	}
	pr, pw := io.Pipe()
	streamErr := make(chan error, 1)
	go func() {
		err := stream(pw)
		pw.CloseWithError(err)
		streamErr <- err
	}()
	sum, err := importer.Apply(ctx, db, site, storage.Actor{Kind: storage.ActorAdmin}, pr, nil)
	pr.CloseWithError(errors.New("the import stopped"))
	serr := <-streamErr
	var le *importer.LineError
	if errors.As(serr, &le) || (serr != nil && err == nil) {
		return ans, fmt.Errorf("%v (the rows before it are stored; run the import again to complete it)", serr)
	}
	if err != nil {
		return ans, err
	}
	if err := db.Close(); err != nil {
		return ans, err
	}
	return importAnswer{Source: sum.Source, Rows: sum.Rows, Imported: sum.Imported, Duplicates: sum.Duplicates,
		Skipped: sum.Skipped, DurationMS: sum.Took.Milliseconds()}, nil
}

// uploadRollups sends a rollups source's export to the running server at
// base (POST /v1/sites/:siteId/imports/SOURCE), which imports it as
// importRollups would: one zip, as given, or the CSV files given zipped by
// their base names.
func uploadRollups(ctx context.Context, base, token, site, from string, files []string, stdout, stderr io.Writer) int {
	for _, f := range files {
		if st, err := os.Stat(f); err != nil || !st.Mode().IsRegular() {
			fmt.Fprintf(stderr, "tally import: %s: not a file (nothing was imported)\n", f)
			return 1
		}
	}
	progress := importer.NewProgress(stdout, 0, importer.FileSizes(files))
	var sent int64
	count := func(w io.Writer) io.Writer {
		return writerFunc(func(p []byte) (int, error) {
			n, err := w.Write(p)
			sent += int64(n)
			progress.Bytes(sent)
			return n, err
		})
	}
	stream := func(w io.Writer) error {
		if len(files) == 1 && strings.EqualFold(filepath.Ext(files[0]), ".zip") {
			f, err := os.Open(files[0])
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(count(w), f)
			return err
		}
		zw := zip.NewWriter(w)
		for _, name := range files {
			f, err := os.Open(name)
			if err != nil {
				return err
			}
			e, err := zw.Create(filepath.Base(name))
			if err == nil {
				_, err = io.Copy(count(e), f)
			}
			f.Close()
			if err != nil {
				return err
			}
		}
		return zw.Close()
	}
	// The server keeps the upload under the zip's name, which the
	// import's audit entry gives (CSV files zipped on the way: export.zip).
	endpoint := "/imports/" + from
	if len(files) == 1 && strings.EqualFold(filepath.Ext(files[0]), ".zip") {
		endpoint += "?file=" + url.QueryEscape(filepath.Base(files[0]))
	}
	ans, err := importThroughServer(ctx, base, token, site, endpoint, "application/zip", stream)
	progress.Done()
	if err != nil {
		fmt.Fprintln(stderr, "tally import:", err)
		return 1
	}
	fmt.Fprintf(stdout, "tally import: %d rows from %s in %.1f s, through the server at %s\n", ans.Rows, from, float64(ans.DurationMS)/1000, base)
	return 0
}

// writerFunc is a function as an io.Writer.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// importRollups runs a rollups source with the server stopped.
func importRollups(ctx context.Context, src importSource, path, siteID string, files []string, stdout, stderr io.Writer) int {
	if err := storage.CheckUnused(ctx, path); err != nil {
		fmt.Fprintf(stderr, "tally import: %s: %v\n", path, err)
		return 1
	}
	db, err := storage.Open(ctx, storage.Options{Path: path})
	if err != nil {
		fmt.Fprintf(stderr, "tally import: %s: %v\n", path, err)
		return 1
	}
	defer db.Close()
	progress := importer.NewProgress(stdout, 0, importer.FileSizes(files))
	n, err := src.rollups(ctx, db, siteID, files, func(done, _ int64) { progress.Bytes(done); progress.Rows(0) })
	progress.Done()
	if err != nil {
		fmt.Fprintln(stderr, "tally import:", err)
		return 1
	}
	if err := db.Close(); err != nil {
		fmt.Fprintln(stderr, "tally import:", err)
		return 1
	}
	fmt.Fprintf(stdout, "tally import: %d rows into %s\n", n, path)
	return 0
}
