package storage

import (
	"container/list"
	"context"
	"fmt"
	"sync"
)

// The report cache (docs/query-api.md#how-reports-stay-fast) keeps the
// answers the day partials gave for ranges of closed days only, merged:
// a warm 30-day report by event:page otherwise decodes and merges 30 days
// × hundreds of pages of sketches at every request. An answer is used only
// while no partial of its UTC dates has changed since the reads it came
// from began (partialGens.daysGen, moved by every writer that drops a
// partial), and the cache holds at most reportCacheBytes, the least
// recently used answers leaving first.

// reportCacheBytes bounds the cache's estimate of what its answers hold.
const reportCacheBytes = 32 << 20

// reportCache is a bounded, least-recently-used map of merged answers.
type reportCache struct {
	mu    sync.Mutex
	m     map[string]*list.Element
	lru   list.List // of *cachedReport, most recent first
	bytes int
	// hits counts the answers served from the cache (tests).
	hits int
}

// cachedReport is one basis's merged answer (basisAnswer) for key, and the
// change count of its days when its reads began.
type cachedReport struct {
	key    string
	gen    uint64
	answer *basisAnswer
	// scan is a filtered report's answer read from the tables instead
	// (report_scan_cache.go), when answer is nil.
	scan *scanAnswer
	// funnel is a funnel's counts per step (report_funnel_cache.go), when answer
	// and scan are nil.
	funnel []int
	bytes  int
}

// reportKey names a merged answer of basis over days for site, laid out as
// lay: everything the answer depends on but the partials' contents.
func reportKey(site, zone string, lay partialLayout, basis string, days []localDay) string {
	lay.goals = nil // named by lay.dim
	return fmt.Sprintf("%s\x00%s\x00%+v\x00%s\x00%d\x00%d", site, zone, lay, basis, days[0].start.UnixMilli(), days[len(days)-1].end.UnixMilli())
}

// get returns key's answer if it was computed at change count gen.
func (c *reportCache) get(key string, gen uint64) (*cachedReport, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok {
		return nil, false
	}
	r := e.Value.(*cachedReport)
	if r.gen != gen {
		c.remove(e)
		return nil, false
	}
	c.lru.MoveToFront(e)
	c.hits++
	return r, true
}

// put keeps an answer, evicting the least recently used ones over the
// bound; one larger than the bound is not kept.
func (c *reportCache) put(r *cachedReport) {
	r.bytes = len(r.key) + 64 + 8*len(r.funnel)
	keys := r.scan.keys()
	if r.answer != nil {
		keys = r.answer.keys
	}
	for _, k := range keys {
		r.bytes += len(k) + 16 + 40 // the key, its string header, its group
	}
	if r.bytes > reportCacheBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*list.Element{}
	}
	if e, ok := c.m[r.key]; ok {
		c.remove(e)
	}
	c.m[r.key] = c.lru.PushFront(r)
	c.bytes += r.bytes
	for c.bytes > reportCacheBytes {
		c.remove(c.lru.Back())
	}
}

func (c *reportCache) remove(e *list.Element) {
	r := c.lru.Remove(e).(*cachedReport)
	delete(c.m, r.key)
	c.bytes -= r.bytes
}

// size is how many answers the cache holds and its estimate of their bytes.
func (c *reportCache) size() (entries, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m), c.bytes
}

// ForgetPartials makes site's next reports read their day partials again
// instead of the report cache's merged answers; with rows, it also deletes
// the kept partials, so that they are computed again (a cold start: the
// benchmarks measure both with it).
func (db *DB) ForgetPartials(ctx context.Context, site string, rows bool) error {
	return db.writer.do(ctx, func(tx *writeTx) error {
		if rows {
			if _, err := tx.Exec(`DELETE FROM day_partials WHERE site_id = ?`, site); err != nil {
				return err
			}
			tx.MarkWritten()
			tx.partialsChanged(site)
			return nil
		}
		// Only this instance's report cache is emptied: the kept partials
		// are still true, so no change is counted where other instances
		// would see it (on PostgreSQL that would make every kept partial
		// of the site be computed again).
		if g := tx.gens; g != nil {
			g.bump(site, "")
			tx.OnCommit(func() { g.bump(site, "") })
		}
		return nil
	})
}
