package server

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
)

// add counts one decision.
func (c *debugSummary) add(e *DebugEvent) {
	c.Total++
	switch e.Outcome {
	case outcomeAccepted:
		c.Accepted++
	case outcomeDuplicate:
		c.Duplicates++
	case outcomeQuarantined:
		c.Quarantined++
	case outcomeDropped:
		c.Dropped++
	case outcomeRejected:
		c.Rejected++
	}
}

// sub takes o's counts away.
func (c *debugSummary) sub(o debugSummary) {
	c.Total -= o.Total
	c.Accepted -= o.Accepted
	c.Duplicates -= o.Duplicates
	c.Quarantined -= o.Quarantined
	c.Dropped -= o.Dropped
	c.Rejected -= o.Rejected
}

// countLocked adds a recorded decision to the totals and to its site's;
// f.mu is held. The counts are kept apart from the ring, so the summary is
// not bounded by the feed's size.
func (f *debugFeed) countLocked(e *DebugEvent) {
	f.total.add(e)
	if e.SiteID == "" { // refused before its site was known: in the total only
		return
	}
	c := f.bySite[e.SiteID]
	if c == nil {
		c = &debugSummary{}
		f.bySite[e.SiteID] = c
	}
	c.add(e)
}

// summaryLocked is the counts of site, or of every decision when site is
// ""; f.mu is held.
func (f *debugFeed) summaryLocked(site string) debugSummary {
	if site == "" {
		return f.total
	}
	if c := f.bySite[site]; c != nil {
		return *c
	}
	return debugSummary{}
}

// summary answers the decisions counted by outcome since the start or the
// last reset, of every site or of site_id; with wait (and min, default 1)
// it answers once min decisions are counted, or when wait ends. Dev mode
// only, no credential (docs/testing.md#dev-mode).
//
// GET /v1/debug/summary
func (s *Server) summary(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if err := refuseForeignHost(r, s.cfg.DebugAnyHost); err != nil {
		return err
	}
	q := r.URL.Query()
	for name := range q {
		if name != "site_id" && name != "min" && name != "wait" {
			return fault.Errorf(fault.InvalidFilter, "unknown parameter %q: the summary takes site_id, min and wait", name)
		}
	}
	n, wait, err := waitParams(q, maxSummaryMin)
	if err != nil {
		return err
	}
	site := q.Get("site_id")
	f := s.feed
	f.await(r.Context(), wait, func() bool { return f.summaryLocked(site).Total >= int64(n) })
	f.mu.Lock()
	answer := f.summaryLocked(site)
	f.mu.Unlock()
	writeJSON(w, http.StatusOK, answer)
	return nil
}

// maxSummaryMin bounds min on the summary, which counts beyond the feed.
const maxSummaryMin = 1 << 30
