package server

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// minFunnelSteps is the fewest steps a funnel has: one step is a goal's
// visitors, which the query API gives.
const minFunnelSteps = 2

// funnel answers a funnel of the site's goals
// (docs/query-api.md#goals-and-funnels): per step, the visitors who completed
// it after the steps before it within one visit.
//
// POST /v1/sites/:siteId/funnel
func (s *Server) funnel(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	_, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeQueryRead)
	if err != nil {
		return err
	}
	raw, err := readBody(w, r, queryBodyLimit)
	if err != nil {
		return err
	}
	var body object
	if err := json.Unmarshal(raw, &body); err != nil || body == nil {
		return fault.Errorf(fault.InvalidJSON, "request body must be a JSON object")
	}
	for k := range body {
		if k != "steps" && k != "date_range" && k != "filters" {
			return invalid("unknown field %q: a funnel has steps, date_range and filters", k)
		}
	}
	var names []string
	if json.Unmarshal(body["steps"], &names) != nil || len(names) < minFunnelSteps || len(names) > storage.MaxFunnelSteps {
		return invalid("steps is required: an array of %d to %d goal names", minFunnelSteps, storage.MaxFunnelSteps)
	}
	loc, err := storage.LoadTimeZone(site.TimeZone)
	if err != nil {
		return err
	}
	// The date range and filters as the query API reads them.
	pq := &parsedQuery{site: site, loc: loc}
	rawRange, ok := body["date_range"]
	if !ok {
		return invalid("date_range is required")
	}
	if err := pq.parseDateRange(rawRange, s.now()); err != nil {
		return err
	}
	if raw, ok := body["filters"]; ok {
		if err := pq.parseFilters(raw); err != nil {
			return err
		}
	}
	if pq.allRange {
		if err := s.startAtFirstVisit(r.Context(), pq); err != nil {
			return err
		}
	}
	goals, err := s.db.Goals(r.Context(), site.ID)
	if err != nil {
		return err
	}
	byName := map[string]storage.Goal{}
	for _, g := range goals {
		byName[g.Name] = g
	}
	fq := storage.FunnelQuery{Site: site.ID, From: pq.from, To: pq.to, Zone: loc}
	for _, n := range names {
		g, ok := byName[n]
		if !ok {
			return invalid("steps: the goal %q is not configured for this site (GET /v1/sites/:siteId/goals lists them)", n)
		}
		fq.Steps = append(fq.Steps, g)
	}
	if fq.Filters, err = goalFilters(pq.filters, goals); err != nil {
		return err
	}
	counts, err := s.db.Funnel(r.Context(), fq)
	if err != nil {
		return err
	}
	show := func(from, to time.Time) []string {
		return []string{from.In(loc).Format(queryTimeLayout), to.Add(-time.Second).In(loc).Format(queryTimeLayout)}
	}
	a := funnelAnswer{Steps: make([]funnelStep, len(names)), DateRange: show(pq.from, pq.to)}
	for i, n := range names {
		st := funnelStep{Goal: n, Visitors: counts[i], ConversionRate: rate(float64(counts[i]), float64(counts[0]))}
		if i > 0 {
			st.Dropoff = counts[i-1] - counts[i]
		}
		a.Steps[i] = st
	}
	if cut, ok := keptFrom(site); ok && pq.from.Before(cut) {
		if cut.After(pq.to) {
			cut = pq.to
		}
		a.PurgedRange = show(pq.from, cut)
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

// keptFrom is when the site's kept raw events begin
// (docs/storage.md#retention); false while nothing was purged.
func keptFrom(site *storage.Site) (time.Time, bool) {
	if site.PurgedBefore == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.DateOnly, site.PurgedBefore)
	return t, err == nil
}
