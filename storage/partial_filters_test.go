package storage

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tally-analytics/tally/internal/dbtest"
)

// filterFixture loads the fixed events of the partial filter tests, every
// day closed (partialsNow):
//
//	a  03-02 /blog/a pv, /pricing pv, /pricing signup
//	b  03-02 /blog/b pv; 03-03 /Blog/C pv
//	c  03-03 23:50 /docs pv; 03-04 00:10 /blog/a pv (one visit across midnight)
//	d  03-04 /blog/a pv, /docs pv (erased by the test)
//	e  03-04 ping without url ((not set))
//	f  03-03 /Über pv
func filterFixture(t *testing.T) *DB {
	t.Helper()
	db, _, _ := openPartialsDB(t)
	day := func(d, h, m int) time.Time { return time.Date(2026, 3, d, h, m, 0, 0, time.UTC) }
	var events []IngestEvent
	add := func(anon, typ, page string, ts time.Time) {
		e := IngestEvent{ID: fmt.Sprint("e", len(events)), SiteID: "s", Type: typ, AnonID: anon, TS: ts, Raw: []byte(`{}`), Country: "DE"}
		if page != "" {
			u := "https://shop.test" + page
			e.URL = &u
		}
		events = append(events, e)
	}
	add("a", "pageview", "/blog/a", day(2, 10, 0))
	add("a", "pageview", "/pricing", day(2, 10, 5))
	add("a", "signup", "/pricing", day(2, 10, 6))
	add("b", "pageview", "/blog/b", day(2, 11, 0))
	add("b", "pageview", "/Blog/C", day(3, 9, 0))
	add("c", "pageview", "/docs", day(3, 23, 50))
	add("c", "pageview", "/blog/a", day(4, 0, 10))
	add("d", "pageview", "/blog/a", day(4, 12, 0))
	add("d", "pageview", "/docs", day(4, 12, 1))
	add("e", "ping", "", day(4, 13, 0))
	add("f", "pageview", "/%C3%9Cber", day(3, 8, 0))
	ingestBatches(t, db, events)
	return db
}

// rowsText renders rows sorted as "dims: metrics".
func rowsText(rows []StatsRow) []string {
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, fmt.Sprintf("%s: %v", strings.Join(r.Dims, " "), r.Metrics))
	}
	slices.Sort(out)
	return out
}

func page(op string, values ...string) QueryFilter {
	return QueryFilter{Op: op, Dim: "event:page", Values: values}
}

// TestPartialFiltersMatchTheScan: a filter that tests only the dimension
// of a partial is answered from the partials (visitors flagged estimated,
// as every partial answer), and gives the scan's answer, hand-checked on
// fixed data, before and after an erasure.
func TestPartialFiltersMatchTheScan(t *testing.T) {
	t.Parallel()
	db := filterFixture(t)
	db.hooks.exactVisitorsBelow = 0 // estimate even these few visitors
	from, to := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 6, 0, 0, 0, 0, time.UTC)
	fold := func(f QueryFilter) QueryFilter { f.Fold = true; return f }
	metrics := []string{MetricVisitors, MetricPageviews, MetricEvents}
	cases := []struct {
		name    string
		filters []QueryFilter
		dims    []string
		metrics []string
		want    []string
		erased  []string // after d's erasure; nil: the same as want
	}{
		{"contains", []QueryFilter{page("contains", "/blog")}, nil, metrics,
			[]string{": [4 4 4]"}, []string{": [3 3 3]"}},
		{"contains by day", []QueryFilter{page("contains", "/blog")}, []string{"time:day"}, metrics,
			[]string{"2026-03-02: [2 2 2]", "2026-03-04: [2 2 2]"}, []string{"2026-03-02: [2 2 2]", "2026-03-04: [1 1 1]"}},
		{"contains by page", []QueryFilter{page("contains", "/blog")}, []string{"event:page"}, metrics,
			[]string{"/blog/a: [3 3 3]", "/blog/b: [1 1 1]"}, []string{"/blog/a: [2 2 2]", "/blog/b: [1 1 1]"}},
		{"contains, case-insensitive", []QueryFilter{fold(page("contains", "/BLOG"))}, []string{"time:day"}, metrics,
			[]string{"2026-03-02: [2 2 2]", "2026-03-03: [1 1 1]", "2026-03-04: [2 2 2]"},
			[]string{"2026-03-02: [2 2 2]", "2026-03-03: [1 1 1]", "2026-03-04: [1 1 1]"}},
		{"matching nothing", []QueryFilter{page("is", "/nothing")}, nil, metrics,
			[]string{": [0 0 0]"}, nil},
		{"matching nothing by page", []QueryFilter{page("is", "/nothing")}, []string{"event:page"}, metrics,
			[]string{}, nil},
		{"no values", []QueryFilter{page("is")}, nil, []string{MetricPageviews}, []string{": [0]"}, nil},
		{"is_not", []QueryFilter{page("is_not", "/blog/a")}, nil, metrics,
			[]string{": [6 6 8]"}, []string{": [5 5 7]"}},
		{"contains_not", []QueryFilter{page("contains_not", "/blog")}, nil, metrics,
			[]string{": [6 5 7]"}, []string{": [5 4 6]"}},
		{"matches", []QueryFilter{page("matches", "^/blog/[ab]$")}, nil, metrics,
			[]string{": [4 4 4]"}, []string{": [3 3 3]"}},
		{"matches_not", []QueryFilter{page("matches_not", "^/(docs|pricing)")}, nil, metrics,
			[]string{": [6 6 7]"}, []string{": [5 5 6]"}},
		{"nested or, and, not", []QueryFilter{{Op: "or", Children: []QueryFilter{
			page("is", "/docs"),
			{Op: "and", Children: []QueryFilter{page("contains", "/blog"), {Op: "not", Children: []QueryFilter{page("is", "/blog/b")}}}},
		}}}, []string{"event:page"}, metrics,
			[]string{"/blog/a: [3 3 3]", "/docs: [2 2 2]"}, []string{"/blog/a: [2 2 2]", "/docs: [1 1 1]"}},
		{"two filters, both hold", []QueryFilter{page("contains", "/blog"), page("is_not", "/blog/b")}, nil, metrics,
			[]string{": [3 3 3]"}, []string{": [2 2 2]"}},
		{"not set", []QueryFilter{page("is", NotSet)}, nil, metrics,
			[]string{": [1 0 1]"}, nil},
		// SQLite's lower() folds ASCII letters only: Ü stays.
		{"case-insensitive, ASCII only", []QueryFilter{fold(page("is", "/ÜBER"))}, nil, metrics,
			[]string{": [1 1 1]"}, nil},
		{"case-insensitive, Ü not folded", []QueryFilter{fold(page("is", "/über"))}, nil, metrics,
			[]string{": [0 0 0]"}, nil},
		{"percentage", []QueryFilter{page("contains", "/blog")}, []string{"event:page"}, []string{MetricVisitors, MetricPercentage},
			[]string{"/blog/a: [3 75]", "/blog/b: [1 25]"}, []string{"/blog/a: [2 66.7]", "/blog/b: [1 33.3]"}},
		{"by name", []QueryFilter{{Op: "is_not", Dim: "event:name", Values: []string{"pageview"}}}, []string{"event:name"}, metrics,
			[]string{"ping: [1 0 1]", "signup: [1 0 1]"}, nil},
	}
	run := func(stage string, erased bool) {
		for _, c := range cases {
			want := c.want
			if erased && c.erased != nil {
				want = c.erased
			}
			q := StatsQuery{Site: "s", From: from, To: to, Zone: time.UTC, TimeUnit: "day", Metrics: c.metrics, Dimensions: c.dims, Filters: c.filters}
			if _, ok := planPartials(&q); !ok {
				t.Fatalf("%s: not answered from partials", c.name)
			}
			for _, scan := range []bool{false, true} {
				q.scan = scan
				rows, estimated, err := db.StatsEstimate(context.Background(), q)
				if err != nil {
					t.Fatalf("%s %s: %v", stage, c.name, err)
				}
				if got := rowsText(rows); !slices.Equal(got, want) {
					t.Errorf("%s %s (scan %v): got %v, want %v", stage, c.name, scan, got, want)
				}
				if fromPartials := !scan && slices.Contains(c.metrics, MetricVisitors); estimated != fromPartials {
					t.Errorf("%s %s (scan %v): got estimated %v, want %v (answered from partials)", stage, c.name, scan, estimated, fromPartials)
				}
			}
		}
	}
	run("fresh", false)
	waitPartials(t, db)
	run("kept", false)
	run("cached", false)

	site, _ := db.Site("s")
	if _, err := db.EraseSubject(context.Background(), Actor{Kind: ActorSystem}, site, Subject{AnonID: "d"}); err != nil {
		t.Fatal(err)
	}
	run("erased", true)
	waitPartials(t, db)
	run("erased, kept", true)
}

// TestPartialFiltersFallBack: what the partials cannot answer under a
// filter is the scan's, exactly: filters on two dimensions, on another
// dimension than the query's, visits and session metrics under an event
// filter (a visit with two passing pages counts once), hours.
func TestPartialFiltersFallBack(t *testing.T) {
	t.Parallel()
	db := filterFixture(t)
	db.hooks.exactVisitorsBelow = 0
	from, to := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 6, 0, 0, 0, 0, time.UTC)
	country := QueryFilter{Op: "is", Dim: "visit:country", Values: []string{"DE"}}
	cases := []struct {
		name    string
		filters []QueryFilter
		dims    []string
		metrics []string
		want    []string
	}{
		{"mixed filter", []QueryFilter{country, page("contains", "/blog")}, nil, []string{MetricVisitors, MetricPageviews},
			[]string{": [4 4]"}},
		{"mixed inside or", []QueryFilter{{Op: "or", Children: []QueryFilter{country, page("is", "/docs")}}}, nil, []string{MetricVisitors, MetricPageviews},
			[]string{": [6 9]"}},
		{"another dimension", []QueryFilter{page("contains", "/blog")}, []string{"visit:source"}, []string{MetricVisitors, MetricPageviews},
			[]string{"Direct / None: [4 4]"}},
		// c's visit holds /docs and /blog/a: one visit, not one per page.
		{"visits under an event filter", []QueryFilter{page("is", "/docs", "/blog/a")}, nil, []string{MetricVisitors, MetricVisits, MetricPageviews},
			[]string{": [3 3 5]"}},
		{"bounce rate under an event filter", []QueryFilter{page("is", "/blog/b")}, nil, []string{MetricVisitors, MetricBounceRate},
			[]string{": [1 100]"}},
		{"hours", []QueryFilter{page("is", "/pricing")}, []string{"time:hour"}, []string{MetricVisitors, MetricEvents},
			[]string{"2026-03-02 10:00:00: [1 2]"}},
	}
	for _, c := range cases {
		q := StatsQuery{Site: "s", From: from, To: to, Zone: time.UTC, TimeUnit: "day", Metrics: c.metrics, Dimensions: c.dims, Filters: c.filters}
		if _, ok := planPartials(&q); ok {
			t.Errorf("%s: answered from partials, want the scan", c.name)
		}
		rows, estimated, err := db.StatsEstimate(context.Background(), q)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := rowsText(rows); !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
		if estimated {
			t.Errorf("%s: got an estimate, want the scan's exact answer", c.name)
		}
	}
}

// TestPartialFiltersExactBelowTenThousand: a filtered report of fewer
// visitors than ExactVisitorsBelow is the scan's, exact, as an unfiltered
// one.
func TestPartialFiltersExactBelowTenThousand(t *testing.T) {
	t.Parallel()
	db := filterFixture(t)
	q := StatsQuery{Site: "s", From: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 3, 6, 0, 0, 0, 0, time.UTC),
		Zone: time.UTC, Metrics: []string{MetricVisitors, MetricPageviews}, Filters: []QueryFilter{page("contains", "/blog")}}
	rows, estimated, err := db.StatsEstimate(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if got := rowsText(rows); estimated || !slices.Equal(got, []string{": [4 4]"}) {
		t.Errorf("got %v, estimated %v; want [: [4 4]], exact", got, estimated)
	}
}

// TestPartialFiltersRandom compares filtered reports on one dimension,
// read from partials, with the scan over random intake in two zones:
// event filters on event dimensions, visit filters with visit and event
// metrics, equal figures and visitors within three standard errors.
func TestPartialFiltersRandom(t *testing.T) {
	dbtest.SkipUnderRace(t, "data-heavy answers compared in one goroutine")
	t.Parallel()
	db, _, _ := openPartialsDB(t)
	db.hooks.exactVisitorsBelow = 0
	r := rand.New(rand.NewPCG(3, 4))
	ingestBatches(t, db, randomEvents(r, "a", 3000, 300, 12))
	newYork, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	src := func(op string, v ...string) QueryFilter { return QueryFilter{Op: op, Dim: "visit:source", Values: v} }
	type fq struct {
		filters []QueryFilter
		dims    []string
		metrics []string
	}
	eventMetrics := []string{MetricVisitors, MetricPageviews, MetricEvents}
	visitMetrics := []string{MetricVisitors, MetricVisits, MetricBounceRate, MetricVisitDuration, MetricViewsPerVisit}
	queries := []fq{
		{[]QueryFilter{page("contains", "/blog")}, nil, eventMetrics},
		{[]QueryFilter{page("is_not", "/")}, []string{"time:day"}, eventMetrics},
		{[]QueryFilter{page("matches", "^/(docs|pricing)$")}, []string{"event:page", "time:week"}, []string{MetricVisitors, MetricPercentage}},
		{[]QueryFilter{{Op: "is", Dim: "event:name", Values: []string{"signup"}}}, []string{"time:day"}, eventMetrics},
		{[]QueryFilter{{Op: "is_not", Dim: "event:props:plan", Values: []string{"p1"}}}, []string{"event:props:plan"}, eventMetrics},
		// Events without the property fail these (propMustExist).
		{[]QueryFilter{{Op: "contains_not", Dim: "event:props:plan", Values: []string{"1"}}}, []string{"event:props:plan"}, eventMetrics},
		{[]QueryFilter{{Op: "matches_not", Dim: "event:props:plan", Values: []string{"2$"}}}, []string{"time:day"}, eventMetrics},
		{[]QueryFilter{src("is_not", DirectNone)}, nil, visitMetrics},
		{[]QueryFilter{src("contains", "google")}, []string{"time:day", "visit:source"}, append(slices.Clone(visitMetrics), MetricPageviews)},
		{[]QueryFilter{{Op: "is", Dim: "visit:country", Values: []string{"DE", "FR"}}}, []string{"time:day"}, []string{MetricVisitors, MetricVisits, MetricPageviews}},
	}
	for _, zone := range []*time.Location{time.UTC, newYork} {
		from := time.Date(2026, 3, 1, 0, 0, 0, 0, zone)
		to := time.Date(2026, 3, 14, 0, 0, 0, 0, zone)
		for _, stage := range []string{"fresh", "kept"} {
			for _, f := range queries {
				q := StatsQuery{Site: "s", From: from, To: to, Zone: zone, Metrics: f.metrics, Dimensions: f.dims, Filters: f.filters}
				if _, ok := planPartials(&q); !ok {
					t.Fatalf("%v: not answered from partials", f.filters)
				}
				got, gotV, estimated := statsText(t, db, q, false)
				want, wantV, _ := statsText(t, db, q, true)
				if !estimated {
					t.Errorf("%s %s %v: got the scan, want partials", stage, zone, f.filters)
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s %s %v %v:\ngot  %v\nwant %v", stage, zone, f.filters, f.dims, got, want)
					continue
				}
				for i := range gotV {
					if math.Abs(gotV[i]-wantV[i]) > 3*0.0081*wantV[i]+1 {
						t.Errorf("%s %v row %d: got %v visitors, want %v (within 3 SE)", stage, f.filters, i, gotV[i], wantV[i])
					}
				}
			}
			waitPartials(t, db)
		}
	}
}
