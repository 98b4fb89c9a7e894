package importer

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Progress prints how far an import got: rows and bytes read of the
// totals, and the rate. On a terminal it rewrites one line a few times a
// second; otherwise (a log, a pipe) it prints a plain line every
// plainEvery, and the last one at the end.
type Progress struct {
	w          io.Writer
	terminal   bool
	totalRows  int64
	totalBytes int64
	start      time.Time
	now        func() time.Time

	mu          sync.Mutex
	rows, bytes int64
	last        time.Time
}

const (
	terminalEvery = 250 * time.Millisecond
	plainEvery    = 5 * time.Second
)

// NewProgress prints to w, rewriting a line when w is a terminal.
func NewProgress(w io.Writer, totalRows, totalBytes int64) *Progress {
	return &Progress{w: w, terminal: IsTerminal(w), totalRows: totalRows, totalBytes: totalBytes,
		start: time.Now(), now: time.Now}
}

// IsTerminal reports whether w is a character device (a terminal).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Rows records that n rows have been sent.
func (p *Progress) Rows(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rows = n
	p.maybePrint()
}

// Bytes records that n bytes of the files have been read.
func (p *Progress) Bytes(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bytes = n
}

func (p *Progress) maybePrint() {
	now := p.now()
	every := plainEvery
	if p.terminal {
		every = terminalEvery
	}
	if now.Sub(p.last) < every {
		return
	}
	p.last = now
	p.print(now, false)
}

// Done prints the final line.
func (p *Progress) Done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.print(p.now(), true)
}

func (p *Progress) print(now time.Time, final bool) {
	secs := now.Sub(p.start).Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(p.rows) / secs
	}
	line := fmt.Sprintf("%d", p.rows)
	if p.totalRows > 0 {
		line += fmt.Sprintf("/%d", p.totalRows)
	}
	line += " rows"
	if p.totalBytes > 0 {
		line += fmt.Sprintf(", %.1f/%.1f MiB", float64(p.bytes)/(1<<20), float64(p.totalBytes)/(1<<20))
	}
	line += fmt.Sprintf(", %.0f rows/s", rate)
	switch {
	case p.terminal && final:
		fmt.Fprintf(p.w, "\r\x1b[K%s\n", line)
	case p.terminal:
		fmt.Fprintf(p.w, "\r\x1b[K%s", line)
	default:
		fmt.Fprintln(p.w, line)
	}
}
