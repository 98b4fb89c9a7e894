package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
)

// faultCodes are the statuses an injected failure may answer with, and the
// error code of each: what the service (or, for 502 and 504, a proxy in
// front of it) would answer for real, so an SDK sees the genuine article.
var faultCodes = map[int]string{
	http.StatusTooManyRequests:     fault.RateLimited,
	http.StatusInternalServerError: fault.Internal,
	http.StatusBadGateway:          fault.BadGateway,
	http.StatusServiceUnavailable:  fault.Unavailable,
	http.StatusGatewayTimeout:      fault.GatewayTimeout,
}

// Bounds of an injected fault (docs/testing.md#retry-testing).
const (
	maxFaultCount      = 1000
	maxFaultDelayMS    = 30_000
	maxFaultRetryAfter = 3600
)

// reasonInjected is the decision reason of a request failed by an injected
// fault.
const reasonInjected = "injected_fault"

// plannedFault is one fault set by POST /v1/debug/faults.
type plannedFault struct {
	status     int
	retryAfter int
	delay      time.Duration
	left       int
}

// faultInjector holds the pending injected faults, at most one per site and
// one for any site. Outside dev mode nothing can set one, and the intake
// step costs one atomic load.
type faultInjector struct {
	// active is how many faults are pending: the intake step reads only
	// this while it is 0.
	active atomic.Int32
	mu     sync.Mutex
	bySite map[string]*plannedFault // "" applies to any site
}

// take claims one request's share of the fault that applies to site: the
// site's own before the one for any site.
func (fi *faultInjector) take(site string) (plannedFault, bool) {
	if fi.active.Load() == 0 {
		return plannedFault{}, false
	}
	fi.mu.Lock()
	defer fi.mu.Unlock()
	for _, key := range [2]string{site, ""} {
		f := fi.bySite[key]
		if f == nil {
			continue
		}
		f.left--
		if f.left == 0 {
			delete(fi.bySite, key)
			fi.active.Store(int32(len(fi.bySite)))
		}
		return *f, true
	}
	return plannedFault{}, false
}

// set replaces the fault of site ("" for any site).
func (fi *faultInjector) set(site string, f plannedFault) {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	if fi.bySite == nil {
		fi.bySite = map[string]*plannedFault{}
	}
	fi.bySite[site] = &f
	fi.active.Store(int32(len(fi.bySite)))
}

// clear removes the fault of site, or every fault when all is set.
func (fi *faultInjector) clear(site string, all bool) {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	if all {
		clear(fi.bySite)
	} else {
		delete(fi.bySite, site)
	}
	fi.active.Store(int32(len(fi.bySite)))
}

// pending lists the pending faults, the one for any site first, then by
// site id; only site's own when filter is set.
func (fi *faultInjector) pending(site string, filter bool) faultsAnswer {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	out := faultsAnswer{Faults: []pendingFault{}}
	for key, f := range fi.bySite {
		if filter && key != site {
			continue
		}
		out.Faults = append(out.Faults, pendingFault{SiteID: key, Status: f.status, RetryAfter: f.retryAfter,
			DelayMS: int(f.delay / time.Millisecond), Remaining: f.left})
	}
	slices.SortFunc(out.Faults, func(a, b pendingFault) int { return strings.Compare(a.SiteID, b.SiteID) })
	return out
}

// injectedFault plays the fault set for the credential's site, if any
// (docs/testing.md#retry-testing): it stalls, then fails the request before its
// events are parsed, or lets it go on. Nothing of a failed request is
// stored. It runs once the body is read: only then does net/http notice a
// client that hangs up, which ends a stall early, and the feed's record of
// a failed request then holds what was sent.
func (p *intakePipeline) injectedFault() error {
	f, ok := p.s.faults.take(p.site.ID)
	if !ok {
		return nil
	}
	if f.delay > 0 {
		p.d.injectedDelay = f.delay
		t := time.NewTimer(f.delay)
		select {
		case <-t.C:
		case <-p.r.Context().Done(): // the client gave up: go on as it would have
		}
		t.Stop()
	}
	if f.status == 0 {
		return nil
	}
	p.d.reason = reasonInjected
	return &fault.Error{Code: faultCodes[f.status], RetryAfter: f.retryAfter,
		Message: fmt.Sprintf("injected fault (POST /v1/debug/faults): this request fails with %d and stores nothing", f.status)}
}

// parseFault reads the body of POST /v1/debug/faults: its site and the
// fault, or 400 invalid_fault naming every field that is wrong.
func (s *Server) parseFault(body object) (string, plannedFault, error) {
	var problems []fault.Detail
	bad := func(field, format string, args ...any) {
		path := "/" + field
		if field == "" {
			path = "" // the whole body
		}
		problems = append(problems, fault.Detail{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	ints := map[string]*int{}
	f := plannedFault{left: 1}
	var status, delayMS, retryAfter, count int
	for key, raw := range body {
		switch key {
		case "status":
			ints[key] = &status
		case "delay_ms":
			ints[key] = &delayMS
		case "retry_after":
			ints[key] = &retryAfter
		case "count":
			ints[key] = &count
		case "site_id":
		default:
			bad(key, "unknown field; a fault takes status, retry_after, delay_ms, count and site_id")
			continue
		}
		if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			delete(ints, key) // null is absent, as in events
			continue
		}
		if dst := ints[key]; dst != nil && json.Unmarshal(raw, dst) != nil {
			bad(key, "must be an integer")
			delete(ints, key)
		}
	}
	if ints["status"] != nil {
		if _, ok := faultCodes[status]; !ok {
			bad("status", "must be 429, 500, 502, 503 or 504")
		}
		f.status = status
		if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
			f.retryAfter = 1
		}
	}
	if ints["delay_ms"] != nil {
		if delayMS < 0 || delayMS > maxFaultDelayMS {
			bad("delay_ms", "must be from 0 to %d", maxFaultDelayMS)
		}
		f.delay = time.Duration(delayMS) * time.Millisecond
	}
	if ints["retry_after"] != nil {
		switch {
		case ints["status"] == nil:
			bad("retry_after", "needs a status: a stall alone answers as usual")
		case retryAfter < 0 || retryAfter > maxFaultRetryAfter:
			bad("retry_after", "must be from 0 (no Retry-After header) to %d seconds", maxFaultRetryAfter)
		}
		f.retryAfter = retryAfter
	}
	if ints["count"] != nil {
		if count < 1 || count > maxFaultCount {
			bad("count", "must be from 1 to %d", maxFaultCount)
		}
		f.left = count
	}
	if f.status == 0 && f.delay == 0 && len(problems) == 0 {
		bad("", "set status, delay_ms or both")
	}
	var site string
	if raw, ok := body["site_id"]; ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		if json.Unmarshal(raw, &site) != nil || site == "" {
			bad("site_id", "must be a site id")
		} else if _, ok := s.db.Site(site); !ok {
			bad("site_id", "no site has this id")
		}
	}
	if len(problems) > 0 {
		slices.SortFunc(problems, func(a, b fault.Detail) int { return strings.Compare(a.Path, b.Path) })
		return "", f, fault.WithDetails(fault.InvalidFault, "the fault cannot be injected", problems)
	}
	return site, f, nil
}

// setFault makes the next count intake requests (of site_id, if given)
// fail with status or stall for delay_ms, replacing the fault pending for
// that site, and answers every pending fault. Dev mode only; guarded as
// the reset is.
//
// POST /v1/debug/faults
func (s *Server) setFault(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if err := refuseForeignHost(r, s.cfg.DebugAnyHost); err != nil {
		return err
	}
	if err := refuseCrossSite(r); err != nil {
		return err
	}
	body, err := decodeObject(w, r, adminBodyLimit)
	if err != nil {
		return err
	}
	site, f, err := s.parseFault(body)
	if err != nil {
		return err
	}
	s.faults.set(site, f)
	writeJSON(w, http.StatusOK, s.faults.pending("", false))
	return nil
}

// listFaults answers the pending faults, those of site_id only if given.
//
// GET /v1/debug/faults
func (s *Server) listFaults(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if err := refuseForeignHost(r, s.cfg.DebugAnyHost); err != nil {
		return err
	}
	site, filter := faultSiteParam(r)
	writeJSON(w, http.StatusOK, s.faults.pending(site, filter))
	return nil
}

// clearFaults removes the pending faults, only site_id's if given, and
// answers those left.
//
// DELETE /v1/debug/faults
func (s *Server) clearFaults(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if err := refuseForeignHost(r, s.cfg.DebugAnyHost); err != nil {
		return err
	}
	if err := refuseCrossOrigin(r); err != nil {
		return err
	}
	site, filter := faultSiteParam(r)
	s.faults.clear(site, !filter)
	writeJSON(w, http.StatusOK, s.faults.pending("", false))
	return nil
}

// faultSiteParam reads the site_id query parameter and whether it was
// given.
func faultSiteParam(r *http.Request) (string, bool) {
	q := r.URL.Query()
	return q.Get("site_id"), q.Has("site_id")
}
