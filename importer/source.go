package importer

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// fileReader reads the rows of one source file: it calls emit for each
// row, skip for each row the source marks as not to count, and returns a
// *LineError for a row it cannot read.
type fileReader func(r io.Reader, ids *ContentIDs, emit func(Row) error, skip func()) error

// fileReaders are the sources read from files, by name (--from).
var fileReaders = map[string]fileReader{
	"goatcounter": readGoatCounter,
	"umami":       readUmamiCSV,
	"tally":       readTally,
}

// LineError is a file that cannot be imported, and where.
type LineError struct {
	File string
	Line int
	Msg  string
}

func (e *LineError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// lineErr is a LineError whose file the caller fills in, its message
// clipped: the values it quotes should be quote()d already.
func lineErr(line int, format string, args ...any) error {
	return &LineError{Line: line, Msg: clip(fmt.Sprintf(format, args...))}
}

// ReadStats is what reading files came to.
type ReadStats struct {
	Rows, Skipped, Bytes int64
}

// ReadFiles reads the files of source in order (each plain or gzip, told
// by its first bytes), calling emit for every row and onBytes with the
// bytes of the files read so far. A file that cannot be read is a
// *LineError naming it (and the line, where there is one).
func ReadFiles(ctx context.Context, source string, files []string, emit func(Row) error, onBytes func(int64)) (ReadStats, error) {
	var st ReadStats
	read, ok := fileReaders[source]
	if !ok {
		return st, fmt.Errorf("no file reader for %q", source)
	}
	ids := &ContentIDs{}
	b := newBudget(maxFileBytes)
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return st, &LineError{File: name, Msg: err.Error()}
		}
		cr := &countingReader{r: f, base: st.Bytes, on: onBytes}
		in, err := maybeGzip(cr)
		if err != nil {
			f.Close()
			return st, &LineError{File: name, Msg: err.Error()}
		}
		err = read(b.reader(in), ids, func(r Row) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			st.Rows++
			return emit(r)
		}, func() { st.Skipped++ })
		st.Bytes = cr.base + cr.n
		f.Close()
		if errors.Is(err, errTooMuch) {
			return st, &LineError{File: name, Msg: b.tooMuch("the files")}
		}
		var le *LineError
		if errors.As(err, &le) {
			le.File = name
			return st, le
		}
		if err != nil {
			return st, err
		}
	}
	return st, nil
}

// FileSizes is the bytes of files together, for progress.
func FileSizes(files []string) int64 {
	var n int64
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// BaseNames are the files' names without their folders, as the audit
// entry records them.
func BaseNames(files []string) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = filepath.Base(f)
	}
	return out
}

// maybeGzip returns r decompressed when it starts with gzip's magic bytes.
func maybeGzip(r io.Reader) (io.Reader, error) {
	br := bufio.NewReader(r)
	magic, _ := br.Peek(2)
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("not a gzip file: %v", err)
		}
		return zr, nil
	}
	return br, nil
}

// countingReader counts the bytes read of a file, after base bytes of the
// files before it.
type countingReader struct {
	r       io.Reader
	base, n int64
	on      func(int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.on != nil && n > 0 {
		c.on(c.base + c.n)
	}
	return n, err
}

// csvTable reads a CSV file with a header, giving each record's fields by
// column name.
type csvTable struct {
	r    *csvReader
	cols map[string]int
	rec  []string
}

func newCSVTable(r io.Reader) (*csvTable, []string, error) {
	t := &csvTable{r: newCSVReader(r), cols: map[string]int{}}
	t.r.FieldsPerRecord = -1
	head, err := t.r.Read()
	if errors.Is(err, io.EOF) {
		return nil, nil, lineErr(1, "the file is empty: want a CSV header")
	}
	if err != nil {
		return nil, nil, t.err(err)
	}
	head = append([]string(nil), head...)
	for i, h := range head {
		t.cols[strings.TrimPrefix(strings.TrimSpace(h), "\ufeff")] = i
	}
	return t, head, nil
}

// next reads a record; it returns io.EOF at the end.
func (t *csvTable) next() error {
	rec, err := t.r.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return err
		}
		return t.err(err)
	}
	t.rec = rec
	return nil
}

// line is the current record's line.
func (t *csvTable) line() int {
	l, _ := t.r.FieldPos(0)
	return l
}

// get is the current record's field of column name, "" when absent.
func (t *csvTable) get(name string) string {
	i, ok := t.cols[name]
	if !ok || i >= len(t.rec) {
		return ""
	}
	return t.rec[i]
}

func (t *csvTable) has(name string) bool {
	_, ok := t.cols[name]
	return ok
}

// err is a record that cannot be read as a *LineError, else err itself.
func (t *csvTable) err(err error) error {
	var pe *csv.ParseError
	switch {
	case errors.Is(err, errLineTooLong):
		return lineErr(t.r.next, "%s", tooLong)
	case errors.As(err, &pe):
		return lineErr(pe.Line, "not CSV: %v", pe.Err)
	}
	return err
}

func ptr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
