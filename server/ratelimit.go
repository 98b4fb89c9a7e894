package server

import (
	"math"
	"sync"
	"time"
)

// rateLimiter is a token bucket per site: rate tokens per second, holding
// at most burst (for events, two seconds' worth:
// docs/intake.md#gates-in-order).
type rateLimiter struct {
	rate    float64
	burst   float64
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// newRateLimiter returns a limiter of perSecond events per site, or nil
// (no limit) when perSecond is 0.
func newRateLimiter(perSecond int) *rateLimiter {
	if perSecond <= 0 {
		return nil
	}
	return &rateLimiter{rate: float64(perSecond), burst: 2 * float64(perSecond), buckets: map[string]*bucket{}}
}

// newUploadLimiter returns a limiter of perMinute uploads per site, a whole
// minute's worth at once (a release's maps go up together), or nil (no
// limit) when perMinute is 0.
func newUploadLimiter(perMinute int) *rateLimiter {
	if perMinute <= 0 {
		return nil
	}
	return &rateLimiter{rate: float64(perMinute) / 60, burst: float64(perMinute), buckets: map[string]*bucket{}}
}

// take removes n tokens from site's bucket. When there are too few it takes
// nothing and returns the whole seconds to wait. A batch larger than the
// bucket costs the full bucket, so it can still pass when the bucket is full.
func (l *rateLimiter) take(site string, n int, now time.Time) (ok bool, retryAfter int) {
	if l == nil {
		return true, 0
	}
	cost := math.Min(float64(n), l.burst)
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[site]
	if b == nil {
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[site] = b
	}
	if elapsed := now.Sub(b.last).Seconds(); elapsed > 0 {
		b.tokens = math.Min(l.burst, b.tokens+elapsed*l.rate)
		b.last = now
	}
	if b.tokens < cost {
		return false, max(1, int(math.Ceil((cost-b.tokens)/l.rate)))
	}
	b.tokens -= cost
	return true, 0
}

// reset forgets every bucket.
func (l *rateLimiter) reset() {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.buckets = map[string]*bucket{}
	l.mu.Unlock()
}

// forget drops site's bucket, which starts full again.
func (l *rateLimiter) forget(site string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	delete(l.buckets, site)
	l.mu.Unlock()
}
