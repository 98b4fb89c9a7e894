package importer

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// What one import may read (docs/import.md#switching-from-plausible--umami--goatcounter,
// Bounds). A deflated file inflates up to about 1000 times
// (issue 29: a 611 KB zip held one 600 MB CSV field), so every reader is
// bounded by what it has read after decompression, never by the file's
// size: a line or record at most maxLine or maxRecord bytes, an import at
// most a total, and a value quoted in a message at most clipBytes.

// maxLine bounds one line of NDJSON (a stream's, a Tally export's): a row
// with its properties.
const maxLine = 1 << 20

// maxRecord bounds one CSV record, its line ends and quotes included: a
// row of Tally's CSV export, whose quotes CSV doubles, of an event of
// intake's 1 MB.
const maxRecord = 2 << 20

// Totals, after decompression: the files of one import from files (the
// rows' sources, read by `tally import`), and one Plausible export (its
// rollup rows are written by the server for a site's admin, so its disk
// is at stake). Variables for the tests.
var (
	maxFileBytes      int64 = 4 << 30
	maxPlausibleBytes int64 = 1 << 30
)

// clipBytes bounds a value quoted in a message; clipMessage the whole
// message, for errors of other packages (JSON's) that quote input.
const (
	clipBytes   = 64
	clipMessage = 1024
)

var (
	errLineTooLong = errors.New("line too long")
	errTooMuch     = errors.New("too much data")
)

// quote is v quoted for a message, cut at clipBytes with its full length
// said: "9999…" (268435456 bytes).
func quote(v string) string {
	if len(v) <= clipBytes {
		return strconv.Quote(v)
	}
	return fmt.Sprintf("%s (%d bytes)", strconv.Quote(cut(v, clipBytes)+"…"), len(v))
}

// clip is a message cut at clipMessage bytes.
func clip(msg string) string {
	if len(msg) <= clipMessage {
		return msg
	}
	return cut(msg, clipMessage) + "…"
}

// cut is s's first n bytes or fewer, ending on a character's boundary.
func cut(s string, n int) string {
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s[max(0, len(s)-utf8.UTFMax):]) {
		s = s[:len(s)-1]
	}
	return s
}

// budget is the bytes an import may still read after decompression.
type budget struct{ left, max int64 }

func newBudget(n int64) *budget { return &budget{left: n, max: n} }

// reader reads r, failing with errTooMuch once the budget is spent.
func (b *budget) reader(r io.Reader) io.Reader { return &spending{r: r, b: b} }

// tooMuch is the message of errTooMuch: what of holds is more than the
// budget.
func (b *budget) tooMuch(of string) string {
	return fmt.Sprintf("%s hold more than %s once decompressed, the most one import reads: import the files in parts", of, size(b.max))
}

// size is n bytes in MiB when it is whole MiB.
func size(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

type spending struct {
	r io.Reader
	b *budget
}

func (s *spending) Read(p []byte) (int, error) {
	if s.b.left <= 0 {
		// One byte more tells input of exactly the budget from more.
		var one [1]byte
		n, err := s.r.Read(one[:])
		if n > 0 {
			return 0, errTooMuch
		}
		return 0, err
	}
	if int64(len(p)) > s.b.left {
		p = p[:s.b.left]
	}
	n, err := s.r.Read(p)
	s.b.left -= int64(n)
	return n, err
}

// csvReader is a csv.Reader whose records are at most maxRecord bytes:
// the window under it hands the CSV reader no more than maxRecord bytes
// past the end of the record it read last (and the CSV reader's buffer),
// so a longer record fails with errLineTooLong, having held no more than
// that in memory.
type csvReader struct {
	*csv.Reader
	in *window
	// next is the line the next record starts on.
	next int
}

// csvBuffer is what the CSV reader reads ahead (bufio's default size).
const csvBuffer = 4096

func newCSVReader(r io.Reader) *csvReader {
	in := &window{r: r}
	c := &csvReader{Reader: csv.NewReader(in), in: in, next: 1}
	c.ReuseRecord = true
	return c
}

// Read reads the next record.
func (c *csvReader) Read() ([]string, error) {
	c.in.limit = c.InputOffset() + maxRecord + csvBuffer
	rec, err := c.Reader.Read()
	if err == nil && len(rec) > 0 {
		line, _ := c.FieldPos(len(rec) - 1)
		c.next = line + strings.Count(rec[len(rec)-1], "\n") + 1
	}
	return rec, err
}

// tooLong is the message of errLineTooLong for a record.
var tooLong = fmt.Sprintf("a record longer than %d MiB, the most a row can be", maxRecord>>20)

// window hands on at most limit bytes of r in all.
type window struct {
	r           io.Reader
	read, limit int64
}

func (w *window) Read(p []byte) (int, error) {
	if w.read >= w.limit {
		return 0, errLineTooLong
	}
	if int64(len(p)) > w.limit-w.read {
		p = p[:w.limit-w.read]
	}
	n, err := w.r.Read(p)
	w.read += int64(n)
	return n, err
}
