package storage

import (
	"context"
	"database/sql"
	"strings"
	"time"
)

// A report that reads events reads them through the visits of its range
// (visitsEventRead) in two parts at once, the visits starting in the first
// half of the range and those starting in the second, each on its own read
// connection (docs/query-api.md#how-reports-stay-fast): the reads are
// CPU-bound in SQLite, the machine has two cores, and readers never hold
// up the writer in WAL mode. Each visit is in one part, so visits, events
// and pageviews add; a visitor can be in both, so each part hands its rows
// per group and visitor, sorted, and the two sorted streams are merged as
// they come, in constant memory, counting each group's visitor once.
//
// The merge needs both halves' first rows, so both connections are taken
// before either read starts, by one split read at a time (splitReads): two
// of them each holding one connection and waiting for a second would wait
// forever on a full pool. A read that finds another split read running,
// or a pool of one connection, reads in one query instead.

// eventRow is one row of a part: a group's dimension values, one of its
// visitors, and that visitor's visits, pageviews and events in the group.
type eventRow struct {
	dims                     []string
	anon                     string
	visits, pageviews, count float64
}

// compareRows orders rows as the parts' ORDER BY does: by each dimension,
// then the visitor, bytewise (SQLite's BINARY collation).
func compareRows(a, b *eventRow) int {
	for i := range a.dims {
		if c := strings.Compare(a.dims[i], b.dims[i]); c != 0 {
			return c
		}
	}
	return strings.Compare(a.anon, b.anon)
}

// readEvents adds q's event figures (visitors of the events, visits when
// eventLevel, pageviews, events) to the groups get hands out.
func (db *DB) readEvents(ctx context.Context, q *StatsQuery, eventLevel bool, get func(string) *aggregate) error {
	add := func(key string, v []float64) {
		a := get(key)
		a.visitors, a.pageviews, a.events = v[0], v[2], v[3]
		if eventLevel {
			a.visits = v[1]
		}
	}
	if q.byEvents {
		query, args, err := q.eventIndexRead(eventLevel)
		if err != nil {
			return err
		}
		return db.scanGroups(ctx, query, args, len(q.Dimensions), 4, add)
	}
	lo, err := db.visitLookback(ctx, q.Site, q.From)
	if err != nil {
		return err
	}
	db.usePages(q)
	// Split at the middle of the range: the visits starting before it
	// (those of the lookback too, which are few) and after.
	mid := time.UnixMilli(q.From.UnixMilli() + (q.To.UnixMilli()-q.From.UnixMilli())/2)
	if !mid.After(lo) || !q.To.After(mid) {
		mid = q.To
	}
	if mid.Equal(q.To) || db.readConns < 2 || q.oneRead || !db.splitReads.TryLock() {
		query, args, err := q.visitsEventRead(lo, q.To, false)
		if err != nil {
			return err
		}
		return db.scanGroups(ctx, query, args, len(q.Dimensions), 4, add)
	}
	defer db.splitReads.Unlock()
	ca, err := db.read.Conn(ctx)
	if err != nil {
		return err
	}
	defer ca.Close()
	cb, err := db.read.Conn(ctx)
	if err != nil {
		return err
	}
	defer cb.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a := streamPart(ctx, ca, q, lo, mid)
	b := streamPart(ctx, cb, q, mid, q.To)
	ra, okA := a.next()
	rb, okB := b.next()
	for okA || okB {
		var r eventRow
		c := 0
		switch {
		case !okB:
			c = -1
		case !okA:
			c = 1
		default:
			c = compareRows(&ra, &rb)
		}
		switch {
		case c < 0:
			r = ra
			ra, okA = a.next()
		case c > 0:
			r = rb
			rb, okB = b.next()
		default: // one visitor of one group in both parts: counted once
			r = ra
			r.visits += rb.visits
			r.pageviews += rb.pageviews
			r.count += rb.count
			ra, okA = a.next()
			rb, okB = b.next()
		}
		g := get(strings.Join(r.dims, keySep))
		g.visitors++
		g.pageviews += r.pageviews
		g.events += r.count
		if eventLevel {
			g.visits += r.visits
		}
	}
	cancel()
	errA, errB := a.wait(), b.wait()
	if errA != nil {
		return errA
	}
	return errB
}

// partStream is one part's rows, in order, as its read produces them.
type partStream struct {
	rows  chan []eventRow
	batch []eventRow
	done  chan struct{}
	err   error // set before done closes
}

// next is the part's next row, or false at its end (or on an error, which
// wait returns).
func (s *partStream) next() (eventRow, bool) {
	for len(s.batch) == 0 {
		b, ok := <-s.rows
		if !ok {
			return eventRow{}, false
		}
		s.batch = b
	}
	r := s.batch[0]
	s.batch = s.batch[1:]
	return r, true
}

// wait waits until the part's read has ended and returns its error.
func (s *partStream) wait() error {
	<-s.done
	return s.err
}

// streamPart starts reading q's events of the visits starting in [lo,
// hi), per group and visitor, in order; an empty part when hi is not after
// lo. The read stops when ctx ends.
func streamPart(ctx context.Context, conn *sql.Conn, q *StatsQuery, lo, hi time.Time) *partStream {
	s := &partStream{rows: make(chan []eventRow, 4), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer close(s.rows)
		if hi.After(lo) {
			s.err = readPart(ctx, conn, q, lo, hi, s.rows)
		}
	}()
	return s
}

// partBatch is how many rows a part hands over at once.
const partBatch = 256

func readPart(ctx context.Context, conn *sql.Conn, q *StatsQuery, lo, hi time.Time, out chan<- []eventRow) error {
	query, args, err := q.visitsEventRead(lo, hi, true)
	if err != nil {
		return err
	}
	rows, err := conn.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	n := len(q.Dimensions)
	texts := make([]string, n)
	var r eventRow
	dest := make([]any, 0, n+4)
	for i := range texts {
		dest = append(dest, &texts[i])
	}
	dest = append(dest, &r.anon, &r.visits, &r.pageviews, &r.count)
	batch := make([]eventRow, 0, partBatch)
	send := func() error {
		select {
		case out <- batch:
			batch = make([]eventRow, 0, partBatch)
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		r.dims = append([]string(nil), texts...)
		batch = append(batch, r)
		if len(batch) == partBatch {
			if err := send(); err != nil {
				return err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(batch) > 0 {
		return send()
	}
	return nil
}
