package storage

import (
	"context"
	"encoding/json"
	"time"

	"github.com/tally-analytics/tally/fault"
)

// A funnel of the query API (docs/query-api.md#goals-and-funnels): its
// body read with the query's range and filter parsers, and each step's
// visitors, conversion rate and drop-off. The walk over each visit's
// events is report_funnel.go's.

// minFunnelSteps is the fewest steps a funnel has: one step is a goal's
// visitors, which the query API gives.
const minFunnelSteps = 2

// FunnelAnswer is a funnel's answer: per step, the visitors who completed
// it after the steps before it within one visit. PurgedRange is the part
// of the range whose raw events retention purged (shown as DateRange is),
// nil when none: those days count no step.
type FunnelAnswer struct {
	Steps       []FunnelStep
	DateRange   []string
	PurgedRange []string
}

// FunnelStep is one step of a FunnelAnswer.
type FunnelStep struct {
	Goal           string
	Visitors       int
	ConversionRate float64 // of the first step's visitors
	Dropoff        int     // the step before's visitors less these
}

// QueryFunnel answers the funnel body raw (steps, date_range, filters)
// asks of site at now.
func (db *DB) QueryFunnel(ctx context.Context, site *Site, raw []byte, now time.Time) (*FunnelAnswer, error) {
	var body map[string]json.RawMessage
	if err := json.Unmarshal(raw, &body); err != nil || body == nil {
		return nil, fault.Errorf(fault.InvalidJSON, "request body must be a JSON object")
	}
	for k := range body {
		if k != "steps" && k != "date_range" && k != "filters" {
			return nil, invalidQuery("unknown field %q: a funnel has steps, date_range and filters", k)
		}
	}
	var names []string
	if json.Unmarshal(body["steps"], &names) != nil || len(names) < minFunnelSteps || len(names) > MaxFunnelSteps {
		return nil, invalidQuery("steps is required: an array of %d to %d goal names", minFunnelSteps, MaxFunnelSteps)
	}
	loc, err := LoadTimeZone(site.TimeZone)
	if err != nil {
		return nil, err
	}
	// The date range and filters as the query API reads them.
	pq := &parsedQuery{site: site, loc: loc}
	if err := pq.parseDateRange(body["date_range"], now); err != nil {
		return nil, err
	}
	if raw, ok := body["filters"]; ok {
		if raw, err = db.resolveSegments(ctx, site.ID, raw); err != nil {
			return nil, err
		}
		if err := pq.parseFilters(raw); err != nil {
			return nil, err
		}
	}
	if pq.allRange {
		if err := db.startAtFirstVisit(ctx, pq); err != nil {
			return nil, err
		}
	}
	goals, err := db.Goals(ctx, site.ID)
	if err != nil {
		return nil, err
	}
	byName := map[string]Goal{}
	for _, g := range goals {
		byName[g.Name] = g
	}
	fq := FunnelQuery{Site: site.ID, From: pq.from, To: pq.to, Zone: loc}
	for _, n := range names {
		g, ok := byName[n]
		if !ok {
			return nil, invalidQuery("steps: the goal %q is not configured for this site (GET /v1/sites/:siteId/goals lists them)", n)
		}
		fq.Steps = append(fq.Steps, g)
	}
	if fq.Filters, err = goalFilters(pq.filters, goals); err != nil {
		return nil, err
	}
	counts, err := db.Funnel(ctx, fq)
	if err != nil {
		return nil, err
	}
	a := &FunnelAnswer{Steps: make([]FunnelStep, len(names)), DateRange: shownRange(pq.from, pq.to, loc)}
	for i, n := range names {
		st := FunnelStep{Goal: n, Visitors: counts[i], ConversionRate: rate(float64(counts[i]), float64(counts[0]))}
		if i > 0 {
			st.Dropoff = counts[i-1] - counts[i]
		}
		a.Steps[i] = st
	}
	if cut, ok := keptFrom(site); ok && pq.from.Before(cut) {
		if cut.After(pq.to) {
			cut = pq.to
		}
		a.PurgedRange = shownRange(pq.from, cut, loc)
	}
	return a, nil
}

// keptFrom is when the site's kept raw events begin
// (docs/storage.md#retention); false while nothing was purged.
func keptFrom(site *Site) (time.Time, bool) {
	if site.PurgedBefore == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.DateOnly, site.PurgedBefore)
	return t, err == nil
}
