package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// DefaultDebugFeedSize is how many decisions the inspection feed keeps.
const DefaultDebugFeedSize = 10_000

// debugPayloadLimit caps each payload kept in the feed.
const debugPayloadLimit = 16 << 10

// debugFeed keeps the newest decisions in a ring. A nil feed records
// nothing (dev mode off).
type debugFeed struct {
	mu   sync.Mutex
	ring []DebugEvent
	next int // where the next entry goes
	full bool
	seq  int64
	// total and bySite count every decision recorded since the start or
	// the last reset (of its site), beyond what the ring still holds.
	total  debugSummary
	bySite map[string]*debugSummary
	// changed is closed and replaced at every change, waking the reads
	// that wait (debug_wait.go); epoch grows when decisions are removed,
	// so that their counts start over.
	changed  chan struct{}
	epoch    int64
	waiters  int
	stopped  chan struct{}
	stopOnce sync.Once
}

func newDebugFeed(size int) *debugFeed {
	if size <= 0 {
		return nil
	}
	return &debugFeed{ring: make([]DebugEvent, size), bySite: map[string]*debugSummary{},
		changed: make(chan struct{}), stopped: make(chan struct{})}
}

// payloadJSON keeps a payload as JSON when it is, else as a JSON string,
// cut to debugPayloadLimit.
func payloadJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	if len(b) <= debugPayloadLimit && json.Valid(b) {
		return json.RawMessage(b)
	}
	if len(b) > debugPayloadLimit {
		b = b[:debugPayloadLimit]
	}
	s, _ := json.Marshal(string(b))
	return s
}

// record adds a request's decisions.
func (f *debugFeed) record(d *decision, now time.Time) {
	if f == nil {
		return
	}
	base := DebugEvent{Time: storage.FormatTime(now), Endpoint: d.endpoint, SiteID: d.site, Status: d.status,
		InjectedDelayMS: d.injectedDelay.Milliseconds()}
	var entries []DebugEvent
	if d.records == nil {
		e := base
		e.Outcome, e.Reason, e.Details, e.Payload = outcomeRejected, d.reason, d.details, payloadJSON(d.body)
		if d.status == http.StatusAccepted { // nothing to decide (cannot happen: kept for safety)
			e.Outcome = outcomeAccepted
		}
		entries = append(entries, e)
	} else {
		batch := len(d.body) > 0 && strings.HasPrefix(strings.TrimLeft(string(d.body[:min(len(d.body), 64)]), " \t\r\n"), "[")
		for i, r := range d.records {
			e := base
			e.Outcome, e.Reason, e.Details = r.Outcome, r.Reason, r.Details
			e.EventID, e.Type, e.AnonID, e.Enrichment, e.Payload = r.EventID, r.Type, r.AnonID, r.Enrichment, payloadJSON(r.Payload)
			e.Bot = r.Bot
			if e.Outcome == "" { // the request was refused after its events were read
				e.Outcome, e.Reason = outcomeRejected, d.reason
				e.Details = detailsFor(d.details, i, batch)
			}
			entries = append(entries, e)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range entries {
		f.seq++
		e.Seq = f.seq
		f.ring[f.next] = e
		f.next = (f.next + 1) % len(f.ring)
		if f.next == 0 {
			f.full = true
		}
		f.countLocked(&e)
	}
	f.changedLocked()
}

// detailsFor picks the details of element i of a request.
func detailsFor(details []fault.Detail, i int, batch bool) []fault.Detail {
	if !batch {
		return details
	}
	prefix := "/" + strconv.Itoa(i)
	var out []fault.Detail
	for _, d := range details {
		if d.Path == prefix || strings.HasPrefix(d.Path, prefix+"/") {
			out = append(out, d)
		}
	}
	return out
}

// DebugFilter selects decisions; empty fields match everything.
type DebugFilter struct {
	SiteID, Type, Outcome, AnonID string
	// Properties selects the events whose properties have these fields
	// (dots for nested ones) with these values; see matchProperties.
	Properties map[string]string
	Limit      int
}

func (f DebugFilter) match(e *DebugEvent) bool {
	return (f.SiteID == "" || e.SiteID == f.SiteID) && (f.Type == "" || e.Type == f.Type) &&
		(f.Outcome == "" || e.Outcome == f.Outcome) &&
		(f.AnonID == "" || e.AnonID == f.AnonID || (e.Enrichment != nil && e.Enrichment.AnonID == f.AnonID)) &&
		matchProperties(e.Payload, f.Properties)
}

// list returns the matching decisions, newest first.
func (f *debugFeed) list(filter DebugFilter) []DebugEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.next
	if f.full {
		n = len(f.ring)
	}
	out := []DebugEvent{}
	for k := 1; k <= n && (filter.Limit <= 0 || len(out) < filter.Limit); k++ {
		e := &f.ring[(f.next-k+len(f.ring))%len(f.ring)]
		if filter.match(e) {
			out = append(out, *e)
		}
	}
	return out
}

// clear forgets every decision and count.
func (f *debugFeed) clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.ring)
	f.next, f.full = 0, false
	f.total, f.bySite = debugSummary{}, map[string]*debugSummary{}
	f.epoch++
	f.changedLocked()
}

// clearSite forgets site's decisions and counts; the other sites' stay.
func (f *debugFeed) clearSite(site string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgetLocked(func(e *DebugEvent) bool { return e.SiteID == site })
	if c := f.bySite[site]; c != nil {
		f.total.sub(*c)
		delete(f.bySite, site)
	}
}

// forget removes the decisions match selects, keeping the others in their
// order, and returns how many went.
func (f *debugFeed) forget(match func(*DebugEvent) bool) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.forgetLocked(match)
}

func (f *debugFeed) forgetLocked(match func(*DebugEvent) bool) int {
	n := f.next
	if f.full {
		n = len(f.ring)
	}
	kept := make([]DebugEvent, 0, n)
	for k := n; k >= 1; k-- { // oldest first
		e := &f.ring[(f.next-k+len(f.ring))%len(f.ring)]
		if !match(e) {
			kept = append(kept, *e)
		}
	}
	clear(f.ring)
	copy(f.ring, kept)
	f.next, f.full = len(kept)%len(f.ring), len(kept) == len(f.ring)
	f.epoch++
	f.changedLocked()
	return n - len(kept)
}

// anonIDs returns the anon ids (sent and stored) of site's decisions.
func (f *debugFeed) anonIDs(site string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	for i := range f.ring {
		if e := &f.ring[i]; e.SiteID == site {
			add(e.AnonID)
			if e.Enrichment != nil {
				add(e.Enrichment.AnonID)
			}
		}
	}
	return out
}

// subjectMatch selects the decisions of a GDPR subject on site: those of
// its anon ids (sent or stored), and those whose payload (an event or a
// batch of them) names its user id or anon id. Decisions of requests
// refused before their site was known have no site and are checked by
// payload only.
func subjectMatch(site string, subj storage.Subject, anons map[string]bool) func(*DebugEvent) bool {
	return func(e *DebugEvent) bool {
		if e.SiteID != site && e.SiteID != "" {
			return false
		}
		if e.SiteID == site && (anons[e.AnonID] || (e.Enrichment != nil && anons[e.Enrichment.AnonID])) {
			return true
		}
		type ids struct {
			AnonID any `json:"anon_id"`
			UserID any `json:"user_id"`
		}
		names := func(x ids) bool {
			return (subj.UserID != "" && x.UserID == subj.UserID) || (subj.AnonID != "" && x.AnonID == subj.AnonID)
		}
		var one ids
		if json.Unmarshal(e.Payload, &one) == nil {
			return names(one)
		}
		var batch []ids
		if json.Unmarshal(e.Payload, &batch) == nil {
			for _, x := range batch {
				if names(x) {
					return true
				}
			}
		}
		return false
	}
}

// Decisions returns the inspection feed's matching decisions, newest first
// (nil when the feed is off).
func (s *Server) Decisions(filter DebugFilter) []DebugEvent {
	if s.feed == nil {
		return nil
	}
	return s.feed.list(filter)
}

// Reset deletes every event, session, DLQ row, identity link, profile,
// dedup id and rollup, forgets rate-limit and quota state and the pending
// injected faults, and clears the inspection feed. Workspaces, sites, keys
// and the audit log stay.
func (s *Server) Reset(r *http.Request) (map[string]int64, error) {
	deleted, err := s.db.ResetData(r.Context())
	if err != nil {
		return nil, err
	}
	s.limiter.reset()
	s.faults.clear("", true)
	if s.feed != nil {
		s.feed.clear()
	}
	return deleted, nil
}

// listDecisions answers {decisions: [...]}, newest first, filtered by
// site_id, type, outcome, anon_id and property.NAME; limit 1-10000
// (default 100); with wait (and min, default 1) it answers once min
// decisions match, or when wait ends. Dev mode only; no credential, as dev
// mode is local.
//
// GET /v1/debug/decisions
func (s *Server) listDecisions(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if err := refuseForeignHost(r, s.cfg.DebugAnyHost); err != nil {
		return err
	}
	q := r.URL.Query()
	filter, err := decisionFilter(q)
	if err != nil {
		return err
	}
	if filter.Limit, err = limitParam(r, 100, max(len(s.feed.ring), 1)); err != nil {
		return err
	}
	n, wait, err := waitParams(q, len(s.feed.ring))
	if err != nil {
		return err
	}
	c := &matchCounter{filter: filter}
	s.feed.await(r.Context(), wait, func() bool { return c.count(s.feed) >= n })
	writeJSON(w, http.StatusOK, decisionsAnswer{Decisions: s.feed.list(filter)})
	return nil
}

// reset clears events, sessions, the DLQ and the feed in one call, of
// every site or of the one site_id names (in the body or the query). It
// takes no credential (dev mode is local) but refuses cross-site requests;
// the body is empty or a JSON object.
//
// POST /v1/debug/reset
func (s *Server) reset(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if err := refuseForeignHost(r, s.cfg.DebugAnyHost); err != nil {
		return err
	}
	if err := refuseCrossSite(r); err != nil {
		return err
	}
	body, err := readBody(w, r, adminBodyLimit)
	if err != nil {
		return err
	}
	site, err := resetSite(r, body)
	if err != nil {
		return err
	}
	var deleted map[string]int64
	if site == "" {
		deleted, err = s.Reset(r)
	} else {
		deleted, err = s.ResetSite(r.Context(), site)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, resetAnswer{OK: true, Deleted: deleted})
	return nil
}

// resetSite reads the site a reset names, "" for all: site_id in the JSON
// object body or in the query, the same if in both.
func resetSite(r *http.Request, body []byte) (string, error) {
	var obj struct {
		SiteID *string `json:"site_id"`
	}
	if len(bytes.TrimSpace(body)) > 0 {
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) != nil || m == nil {
			return "", fault.Errorf(fault.InvalidJSON, "the body must be empty or a JSON object")
		}
		if json.Unmarshal(body, &obj) != nil || (obj.SiteID != nil && *obj.SiteID == "") {
			return "", fault.Errorf(fault.InvalidSiteID, "site_id must be a non-empty string: the site whose data to delete")
		}
	}
	q := r.URL.Query().Get("site_id")
	switch {
	case obj.SiteID == nil:
		return q, nil
	case q != "" && q != *obj.SiteID:
		return "", fault.Errorf(fault.InvalidSiteID, "site_id is %q in the query and %q in the body: name one site", q, *obj.SiteID)
	}
	return *obj.SiteID, nil
}

// ResetSite deletes site's events, sessions, DLQ rows, identity links,
// profiles, dedup ids, rollups and quota count, forgets its rate-limit
// bucket, and removes its decisions and counts from the inspection feed.
// The site, its keys and the other sites' data stay. An unknown site is
// 404.
func (s *Server) ResetSite(ctx context.Context, site string) (map[string]int64, error) {
	if _, ok := s.db.Site(site); !ok {
		return nil, fault.Errorf(fault.NotFound, "site not found")
	}
	deleted, err := s.db.ResetSiteData(ctx, site)
	if err != nil {
		return nil, err
	}
	s.limiter.forget(site)
	s.faults.clear(site, false)
	if s.feed != nil {
		s.feed.clearSite(site)
	}
	return deleted, nil
}
