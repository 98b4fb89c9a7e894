package server

import (
	"context"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tally-analytics/tally/fault"
)

// maxDebugWait caps wait on the debug reads (docs/testing.md#dev-mode), well
// inside the listeners' 60 s write timeout.
const maxDebugWait = 30 * time.Second

// waitParams reads min and wait (400 invalid_wait): wait is a Go duration
// (500ms, 5s) or a number of seconds, at most maxDebugWait; min is 1 to
// most, and 1 when only wait is given. min without wait is refused rather
// than answered at once, which is not what its sender expects.
func waitParams(q url.Values, most int) (n int, wait time.Duration, err error) {
	ws, ms := q.Get("wait"), q.Get("min")
	if ws == "" {
		if ms != "" {
			return 0, 0, fault.Errorf(fault.InvalidWait, "min needs wait: add wait=DURATION (at most %s), e.g. min=%s&wait=5s", maxDebugWait, ms)
		}
		return 0, 0, nil
	}
	if strings.IndexFunc(ws, func(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }) >= 0 {
		wait, err = time.ParseDuration(ws)
	} else {
		var secs float64
		secs, err = strconv.ParseFloat(ws, 64)
		if err == nil && (math.IsNaN(secs) || secs > maxDebugWait.Seconds()) {
			secs = math.Inf(1)
		}
		wait = time.Duration(secs * float64(time.Second))
	}
	if err != nil || wait < 0 || wait > maxDebugWait {
		return 0, 0, fault.Errorf(fault.InvalidWait, "wait must be a duration from 0 to %s, as Go writes it (500ms, 5s) or in seconds (0.5, 5), not %q", maxDebugWait, ws)
	}
	n = 1
	if ms != "" {
		if n, err = strconv.Atoi(ms); err != nil || n < 1 || n > most {
			return 0, 0, fault.Errorf(fault.InvalidWait, "min must be an integer from 1 to %d, not %q", most, ms)
		}
	}
	return n, wait, nil
}

// await holds the caller until done reports true, wait passes, ctx ends
// or the server shuts down. done runs with f.mu held, at once and after
// every change of the feed (a record, a reset, an erasure), never by
// polling.
func (f *debugFeed) await(ctx context.Context, wait time.Duration, done func() bool) {
	if wait <= 0 {
		return
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waiters++
	defer func() { f.waiters-- }()
	for !done() {
		changed := f.changed
		f.mu.Unlock()
		ended := false
		select {
		case <-changed:
		case <-ctx.Done():
			ended = true
		case <-timer.C:
			ended = true
		case <-f.stopped:
			ended = true
		}
		f.mu.Lock()
		if ended {
			return
		}
	}
}

// changedLocked wakes the waiters; f.mu is held.
func (f *debugFeed) changedLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// stop ends every wait at once, now and later: a shutting-down server
// does not hold its waiting clients for up to maxDebugWait.
func (f *debugFeed) stop() {
	if f != nil {
		f.stopOnce.Do(func() { close(f.stopped) })
	}
}

// matchCounter counts the feed's decisions that match a filter as they
// arrive: each wake looks only at the decisions recorded since the last,
// and starts over after a reset or an erasure removed some.
type matchCounter struct {
	filter DebugFilter
	epoch  int64
	last   int64 // the newest seq counted
	n      int
}

// count returns how many decisions match; f.mu is held.
func (c *matchCounter) count(f *debugFeed) int {
	if c.epoch != f.epoch {
		c.epoch, c.last, c.n = f.epoch, 0, 0
	}
	size := f.next
	if f.full {
		size = len(f.ring)
	}
	for k := 1; k <= size; k++ {
		e := &f.ring[(f.next-k+len(f.ring))%len(f.ring)]
		if e.Seq <= c.last {
			break
		}
		if c.filter.match(e) {
			c.n++
		}
	}
	c.last = f.seq
	return c.n
}

// waiting is how many debug reads are waiting for decisions; tests wait
// for a request to be waiting before they send what it waits for.
func (f *debugFeed) waiting() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waiters
}
