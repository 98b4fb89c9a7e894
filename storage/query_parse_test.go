package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tally-analytics/tally/fault"
)

// TestQueryRefusals: DecodeQuery and Query refuse a bad body with the
// fault code and message the query API answers (server's TestQueryErrors
// checks them over HTTP), before reading anything.
func TestQueryRefusals(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "q.db"))
	withSites(t, db, "web")
	site, ok := db.Site("web")
	if !ok {
		t.Fatal("site web not found")
	}
	now := time.Date(2026, 1, 31, 9, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		body, code, message string
	}{
		{`[]`, fault.InvalidJSON, "request body must be a JSON object"},
		{`{"metrics":["visitors"],"date":"2026-01-01"}`, fault.UnsupportedQuery, "date is not supported"},
		{`{"metrics":["visitors"],"x":1}`, fault.InvalidQuery, `unknown field "x"`},
		{`{"date_range":"7d"}`, fault.InvalidQuery, "metrics is required"},
		{`{"metrics":["visitors"]}`, fault.InvalidQuery, "date_range is required"},
		{`{"metrics":["exit_rate"],"date_range":"7d"}`, fault.InvalidQuery, "Metric `exit_rate` requires a `\"visit:exit_page\"` dimension. No other dimensions are allowed."},
		{`{"metrics":["scroll_depth"],"date_range":"7d"}`, fault.InvalidQuery, `the metric "scroll_depth" can only be queried with an event:page filter or dimension`},
		{`{"metrics":["visitors"],"date_range":"5m"}`, fault.InvalidQuery, `unknown date_range "5m"`},
		{`{"metrics":["visitors"],"date_range":"7d","filters":[["has_done",["is","visit:os",["Mac"]]]]}`, fault.InvalidQuery, "has_done tests events only"},
		{`{"metrics":["visitors"],"date_range":["2026-01-02","2026-01-01"]}`, fault.InvalidQuery, "date_range: from (2026-01-02) is after to (2026-01-01)"},
		{`{"metrics":["visitors"],"date_range":"7d","dimensions":["visit:screen"]}`, fault.UnsupportedQuery, `the dimension "visit:screen" is not supported`},
		{`{"metrics":["bounce_rate"],"date_range":"7d","dimensions":["event:name"]}`, fault.UnsupportedQuery, `the session metric "bounce_rate" cannot be queried with the event dimension "event:name"`},
		{`{"metrics":["visitors"],"date_range":"7d","filters":[["is","visit:country",["DEU"]]]}`, fault.InvalidQuery, "visit:country needs to be a valid 2-letter country code"},
		{`{"metrics":["visitors"],"date_range":"7d","filters":[["matches_not","event:page",["/"],{"case_sensitive":false}]]}`, fault.InvalidQuery, "case_sensitive: false applies to is, is_not, contains and contains_not only"},
		{`{"metrics":["conversion_rate"],"date_range":"7d"}`, fault.InvalidQuery, `the metric "conversion_rate" requires an event:goal filter or an event:goal dimension`},
		{`{"metrics":["visitors"],"date_range":"7d","filters":[["is","event:goal",["Nope"]]]}`, fault.InvalidQuery, `the goal "Nope" is not configured for this site`},
		{`{"metrics":["visitors"],"date_range":["2020-01-01","2026-01-01"],"dimensions":["time:hour"]}`, fault.InvalidQuery, "the date_range holds more than 50000 buckets of time:hour"},
	} {
		req, err := DecodeQuery([]byte(c.body))
		if err == nil {
			_, err = db.Query(context.Background(), site, req, now)
		}
		if fault.Code(err) != c.code || err == nil || !strings.Contains(err.Error(), c.message) {
			t.Errorf("%s: got %v (%s), want %s with %q", c.body, err, fault.Code(err), c.code, c.message)
		}
	}
}

// TestQueryEchoesItsDefaults: the answer's query is the query as run,
// Plausible's defaults filled in, its range the site's days shown in its
// time zone.
func TestQueryEchoesItsDefaults(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "q.db"))
	withSites(t, db, "web")
	site, _ := db.Site("web")
	req, err := DecodeQuery([]byte(`{"site_id":"elsewhere","metrics":["visitors","pageviews"],"date_range":"7d","dimensions":["time:day"]}`))
	if err != nil {
		t.Fatal(err)
	}
	a, err := db.Query(context.Background(), site, req, time.Date(2026, 1, 31, 9, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	e := a.Query
	got := fmt.Sprintf("%s %v %v %v %v %d %d %d %d", e.SiteID, e.Metrics, e.DateRange, e.Dimensions, e.OrderBy, len(e.Filters), e.Limit, e.Offset, len(a.Results))
	if want := "web [visitors pageviews] [2026-01-24T00:00:00+00:00 2026-01-30T23:59:59+00:00] [time:day] [[time:day asc] [visitors desc]] 0 10000 0 0"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestDayStart: a day starts at its first instant in the zone, as
// Plausible's does, where a clock change skips or repeats midnight.
func TestDayStart(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		zone string
		y    int
		m    time.Month
		d    int
		want string // UTC
	}{
		{"UTC", 2026, 1, 32, "2026-02-01T00:00:00Z"},
		{"Europe/Berlin", 2026, 3, 29, "2026-03-28T23:00:00Z"},    // the change is at 02:00
		{"America/Santiago", 2022, 9, 11, "2022-09-11T04:00:00Z"}, // no midnight: 01:00 -03
		{"America/Santiago", 2022, 9, 12, "2022-09-12T03:00:00Z"}, // the day after
		{"America/Havana", 2023, 11, 5, "2023-11-05T05:00:00Z"},   // midnight twice: the second
		{"America/Havana", 2023, 11, 4, "2023-11-04T04:00:00Z"},   // the day before
	} {
		loc, err := time.LoadLocation(tt.zone)
		if err != nil {
			t.Fatal(err)
		}
		if got := dayStart(tt.y, tt.m, tt.d, loc).UTC().Format(time.RFC3339); got != tt.want {
			t.Errorf("%s %d-%d-%d: got %s, want %s", tt.zone, tt.y, tt.m, tt.d, got, tt.want)
		}
	}
}
