package cli

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/tally-analytics/tally/storage"
)

// sqlCommand is `tally sql [flags] [SQL]`: an operator's SQL on the
// server's database (docs/storage.md#event-bytes), with the service's SQL
// functions, which a sqlite3 shell lacks. SQL comes from the arguments, or
// from standard input when there are none (or one "-").
func sqlCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return runSQL(args, getenv, os.Stdin, stdout, stderr)
}

// sqlConnectTimeout bounds connecting to the database (PostgreSQL over
// the network), which --timeout does not count.
const sqlConnectTimeout = 30 * time.Second

// sqlFormats are the output formats of `tally sql`.
var sqlFormats = map[string]func(w io.Writer) rowWriter{
	"table": func(w io.Writer) rowWriter { return &tableWriter{w: w} },
	"tsv":   func(w io.Writer) rowWriter { return &tsvWriter{w: w} },
	"json":  func(w io.Writer) rowWriter { return &jsonWriter{w: w} },
}

// runSQL is sqlCommand reading SQL from stdin when the arguments hold none.
// Exit 0 when the SQL ran, 1 when it or the database failed (a write while
// the server runs included), 2 for a command line it does not understand.
func runSQL(args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	fs := flag.NewFlagSet("tally sql", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("database-path", env("DATABASE_PATH", "./data/analytics.db"), "the SQLite database [DATABASE_PATH]")
	url := fs.String("database-url", getenv("DATABASE_URL"), "the PostgreSQL database instead (read-only there) [DATABASE_URL]")
	format := fs.String("format", "table", "output: table, tsv (a header line, then tab-separated rows) or json (one object a line)")
	write := fs.Bool("write", false, "allow writes (SQLite, server stopped): one transaction, which drops the kept report partials if it changed rows")
	timeout := fs.Duration("timeout", time.Minute, "cancel the SQL after this long; 0: never")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `usage: tally sql [flags] [SQL]

Runs SQL on the server's database and prints the rows of its last statement;
without SQL in the arguments (or with "-"), reads it from standard input.
Read-only unless --write. On SQLite it has the service's SQL functions, so
SELECT event_raw(raw, id, site_id, type, anon_id, user_id, url, referrer)
FROM events works; on both backends a row holding raw with those columns
(SELECT * FROM events) shows raw as the event's JSON text.`)
		fs.PrintDefaults()
	}
	words, code, ok := parseFlagsAndArgs(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	newWriter, known := sqlFormats[*format]
	if !known {
		fmt.Fprintf(stderr, "tally sql: unknown --format %q: want table, tsv or json\n", *format)
		return 2
	}
	if *write && *url != "" {
		fmt.Fprintln(stderr, "tally sql: --write is for SQLite: on PostgreSQL other instances may be serving the database; use psql, knowing what docs/storage.md#event-bytes says a write risks")
		return 2
	}
	if *timeout < 0 {
		fmt.Fprintln(stderr, "tally sql: --timeout must not be negative")
		return 2
	}
	query := strings.Join(words, " ")
	if len(words) == 0 || query == "-" {
		b, err := io.ReadAll(stdin)
		if err != nil {
			fmt.Fprintln(stderr, "tally sql: read standard input:", err)
			return 1
		}
		query = string(b)
	}
	if strings.TrimSpace(query) == "" {
		fmt.Fprintln(stderr, "tally sql: no SQL: pass it as arguments or on standard input (see 'tally sql -h')")
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// --timeout bounds the SQL; connecting has a bound of its own.
	openCtx, cancelOpen := context.WithTimeout(ctx, sqlConnectTimeout)
	defer cancelOpen()
	db, err := storage.OpenOperatorSQL(openCtx, *path, *url, *write)
	switch {
	case errors.Is(err, os.ErrNotExist):
		fmt.Fprintf(stderr, "tally sql: no database at %s\n", *path)
		return 1
	case errors.Is(err, storage.ErrInUse):
		fmt.Fprintf(stderr, "tally sql: --write: %v\n", err)
		return 1
	case err != nil:
		fmt.Fprintln(stderr, "tally sql:", err)
		return 1
	}
	defer db.Close()
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	out := newWriter(stdout)
	res, err := db.Run(ctx, query, out.row)
	if err == nil {
		err = out.flush()
	}
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			err = fmt.Errorf("cancelled after --timeout %v: %w", *timeout, err)
		}
		fmt.Fprintln(stderr, "tally sql:", err)
		if *write {
			fmt.Fprintln(stderr, "tally sql: nothing was written (the transaction was rolled back)")
		}
		return 1
	}
	if *write {
		fmt.Fprintf(stderr, "tally sql: committed, %d rows changed; %d kept report partials dropped (computed again from the events). "+
			"Rows written here skipped intake: the rollups, sessions, dedup ids and quota kept beside the events were not updated (docs/storage.md#event-bytes)\n",
			res.Changed, res.PartialsDropped)
	}
	return 0
}

// rowWriter prints the rows of a result: row for each, flush at the end.
type rowWriter interface {
	row(columns []string, values []any) error
	flush() error
}

// cell is a value as text: NULL, numbers, text as is, a blob as x'hex',
// a time in RFC 3339.
func cell(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case string:
		return v
	case []byte:
		return "x'" + hex.EncodeToString(v) + "'"
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case time.Time:
		return v.Format(time.RFC3339Nano)
	}
	return fmt.Sprint(v)
}

// escaped is s on one line: backslash, tab, line feed and carriage return
// written as \\, \t, \n and \r.
func escaped(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\t", `\t`, "\n", `\n`, "\r", `\r`).Replace(s)
}

// tableWriter prints aligned columns under a header; it keeps the rows
// until flush, to know each column's width.
type tableWriter struct {
	w       io.Writer
	columns []string
	rows    [][]string
}

func (t *tableWriter) row(columns []string, values []any) error {
	t.columns = columns
	r := make([]string, len(values))
	for i, v := range values {
		r[i] = escaped(cell(v))
	}
	t.rows = append(t.rows, r)
	return nil
}

func (t *tableWriter) flush() error {
	if t.columns == nil {
		_, err := fmt.Fprintln(t.w, "(no rows)")
		return err
	}
	widths := make([]int, len(t.columns))
	for i, c := range t.columns {
		widths[i] = utf8.RuneCountInString(c)
	}
	for _, r := range t.rows {
		for i, v := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(v))
		}
	}
	line := func(vals []string) error {
		var b strings.Builder
		for i, v := range vals {
			if i > 0 {
				b.WriteString("  ")
			}
			b.WriteString(v)
			if i < len(vals)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(v)))
			}
		}
		_, err := fmt.Fprintln(t.w, b.String())
		return err
	}
	rule := make([]string, len(widths))
	for i, n := range widths {
		rule[i] = strings.Repeat("-", n)
	}
	if err := line(t.columns); err != nil {
		return err
	}
	if err := line(rule); err != nil {
		return err
	}
	for _, r := range t.rows {
		if err := line(r); err != nil {
			return err
		}
	}
	rows := "rows"
	if len(t.rows) == 1 {
		rows = "row"
	}
	_, err := fmt.Fprintf(t.w, "(%d %s)\n", len(t.rows), rows)
	return err
}

// tsvWriter prints a header line, then one line a row, tab-separated.
type tsvWriter struct {
	w      io.Writer
	header bool
}

func (t *tsvWriter) row(columns []string, values []any) error {
	if !t.header {
		t.header = true
		if err := t.line(columns); err != nil {
			return err
		}
	}
	r := make([]string, len(values))
	for i, v := range values {
		r[i] = cell(v)
	}
	return t.line(r)
}

func (t *tsvWriter) line(vals []string) error {
	for i, v := range vals {
		vals[i] = escaped(v)
	}
	_, err := fmt.Fprintln(t.w, strings.Join(vals, "\t"))
	return err
}

func (t *tsvWriter) flush() error { return nil }

// jsonWriter prints one JSON object a row, keys in the columns' order:
// NULL as null, numbers and booleans as such, everything else as cell's
// text.
type jsonWriter struct{ w io.Writer }

func (j *jsonWriter) row(columns []string, values []any) error {
	var b strings.Builder
	b.WriteByte('{')
	for i, c := range columns {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(jsonString(c))
		b.WriteByte(':')
		switch x := values[i].(type) {
		case nil, int64, bool:
			enc, _ := json.Marshal(x)
			b.Write(enc)
		case float64:
			enc, err := json.Marshal(x)
			if err != nil { // NaN or an infinity
				enc = jsonString(cell(x))
			}
			b.Write(enc)
		default:
			b.Write(jsonString(cell(x)))
		}
	}
	b.WriteString("}\n")
	_, err := io.WriteString(j.w, b.String())
	return err
}

func (j *jsonWriter) flush() error { return nil }

// jsonString is s as a JSON string, with <, > and & as they are (an event's
// URL reads as sent).
func jsonString(s string) []byte {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return []byte(strings.TrimSuffix(b.String(), "\n"))
}
