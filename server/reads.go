package server

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// maxRangeDays caps a read range; longer ranges are 400 invalid_date_range.
const maxRangeDays = 366

// dateRange parses the from and to query parameters: both required,
// YYYY-MM-DD, inclusive UTC days, from not after to, at most maxRangeDays.
func dateRange(r *http.Request) (from, to time.Time, err error) {
	parse := func(name string) (time.Time, error) {
		v := r.URL.Query().Get(name)
		if v == "" {
			return time.Time{}, fault.Errorf(fault.InvalidDateParam, "%s is required, as YYYY-MM-DD", name)
		}
		t, err := time.Parse(time.DateOnly, v)
		if err != nil {
			return time.Time{}, fault.Errorf(fault.InvalidDateParam, "%s must be a date as YYYY-MM-DD, not %q", name, v)
		}
		return t, nil
	}
	if from, err = parse("from"); err != nil {
		return
	}
	if to, err = parse("to"); err != nil {
		return
	}
	if from.After(to) {
		return from, to, fault.Errorf(fault.InvalidDateRange, "from (%s) is after to (%s)", from.Format(time.DateOnly), to.Format(time.DateOnly))
	}
	if days := int(to.Sub(from).Hours()/24) + 1; days > maxRangeDays {
		return from, to, fault.Errorf(fault.InvalidDateRange, "a range may span at most %d days, this one spans %d", maxRangeDays, days)
	}
	return from, to, nil
}

// readSite authenticates a read and parses its range.
func (s *Server) readSite(r *http.Request, ps httprouter.Params) (*storage.Site, time.Time, time.Time, error) {
	_, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeQueryRead)
	if err != nil {
		return nil, time.Time{}, time.Time{}, err
	}
	from, to, err := dateRange(r)
	return site, from, to, err
}

// pageviews answers {count, by_day: [{date, count}]}, zero-filled.
//
// GET /sites/:siteId/pageviews
func (s *Server) pageviews(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	site, from, to, err := s.readSite(r, ps)
	if err != nil {
		return err
	}
	total, days, err := s.db.Pageviews(r.Context(), site.ID, from, to)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, pageviewsBody{ByDay: rowsOf(days, dayCountOf), Count: total})
	return nil
}

// eventCounts answers {by_name: [{name, count}]}, by count descending, then
// name ascending.
//
// GET /sites/:siteId/events
func (s *Server) eventCounts(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	site, from, to, err := s.readSite(r, ps)
	if err != nil {
		return err
	}
	list, err := s.db.EventCounts(r.Context(), site.ID, from, to)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, eventCountsBody{ByName: rowsOf(list, nameCountOf)})
	return nil
}

// sessions answers {count, avg_duration_s, avg_events, bounce_rate} of the
// sessions starting in the range; zeros for none.
//
// GET /sites/:siteId/sessions
func (s *Server) sessions(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	site, from, to, err := s.readSite(r, ps)
	if err != nil {
		return err
	}
	stats, err := s.db.Sessions(r.Context(), site.ID, from, to)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sessionsOf(stats))
	return nil
}

// timeline answers {events, next_before}: the events of every anon id ever
// linked to the user, newest first; limit 1-1000 (default 100), before
// exclusive.
//
// GET /sites/:siteId/users/:userId/timeline
func (s *Server) timeline(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	_, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeQueryRead)
	if err != nil {
		return err
	}
	limit, before, err := pageParams(r, "before")
	if err != nil {
		return err
	}
	events, next, err := s.db.Timeline(r.Context(), site.ID, ps.ByName("userId"), limit, before)
	if err != nil {
		return err
	}
	list := rowsOf(events, timelineEventOf)
	if list == nil {
		list = []timelineEvent{}
	}
	writeJSON(w, http.StatusOK, timelineBody{Events: list, NextBefore: next, PurgedBefore: purgedBefore(site)})
	return nil
}

// breakdown answers {dimension, rows: [{value, count}]}: pageviews in the
// range by url, referrer, country, browser, os or device_type, count
// descending then value ascending; limit 1-1000 (default 100).
//
// GET /v1/sites/:siteId/breakdown
func (s *Server) breakdown(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	site, from, to, err := s.readSite(r, ps)
	if err != nil {
		return err
	}
	dim := r.URL.Query().Get("dimension")
	if !slices.Contains(storage.Dimensions, dim) {
		return fault.Errorf(fault.InvalidDimension, "dimension must be one of %s", strings.Join(storage.Dimensions, ", "))
	}
	limit, err := limitParam(r, 100, 1000)
	if err != nil {
		return err
	}
	rows, err := s.db.Breakdown(r.Context(), site.ID, dim, from, to, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, breakdownBody{Dimension: dim, Rows: rowsOf(rows, breakdownRowOf)})
	return nil
}
