package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tally-analytics/tally/internal/dbtest"
)

// eventReadQueries are event-level reads over [from, to): filters on the
// event, on the visit and both, with and without dimensions and visits.
func eventReadQueries(zone *time.Location, from, to time.Time) []StatsQuery {
	page := QueryFilter{Op: "contains", Dim: "event:page", Values: []string{"blog"}}
	notSignup := QueryFilter{Op: "is_not", Dim: "event:name", Values: []string{"signup"}}
	country := QueryFilter{Op: "is", Dim: "visit:country", Values: []string{"DE", "FR"}}
	source := QueryFilter{Op: "is_not", Dim: "visit:source", Values: []string{DirectNone}}
	either := QueryFilter{Op: "or", Children: []QueryFilter{page, {Op: "is", Dim: "visit:entry_page", Values: []string{"/docs"}}}}
	metrics := []string{MetricVisitors, MetricVisits, MetricPageviews, MetricEvents}
	var out []StatsQuery
	for _, fs := range [][]QueryFilter{nil, {page}, {notSignup}, {country, source, page}, {either}, {{Op: "not", Children: []QueryFilter{country}}, notSignup}} {
		for _, dims := range [][]string{nil, {"event:page"}, {"visit:source"}, {"time:day", "event:name"}, {"time:hour"}} {
			out = append(out, StatsQuery{Site: "s", From: from, To: to, Zone: zone, Metrics: metrics, Dimensions: dims, Filters: fs, scan: true})
		}
		// Session metrics of the visits holding a passing event.
		out = append(out, StatsQuery{Site: "s", From: from, To: to, Zone: zone, Filters: fs, scan: true,
			Metrics: []string{MetricVisitors, MetricPageviews, MetricBounceRate, MetricVisitDuration, MetricViewsPerVisit}})
	}
	return out
}

// compareEventReads checks that every event read through the range's
// visits, in two halves at once and in one query, answers exactly what
// the read of the site's event index does.
func compareEventReads(t *testing.T, db *DB, zone *time.Location, from, to time.Time, stage string, memo scanMemo) {
	t.Helper()
	for _, q := range eventReadQueries(zone, from, to) {
		got, gotV, _ := statsText(t, db, q, true)
		one := q
		one.oneRead = true
		gotOne, gotOneV, _ := statsText(t, db, one, true)
		q.byEvents = true
		want, wantV := memo.scan(t, db, q)
		if !slices.Equal(got, want) || !slices.Equal(gotV, wantV) {
			t.Errorf("%s %s..%s %v %v %v:\ngot  %v %v\nwant %v %v", stage, from, to, q.Metrics, q.Dimensions, q.Filters, got, gotV, want, wantV)
		}
		if !slices.Equal(gotOne, want) || !slices.Equal(gotOneV, wantV) {
			t.Errorf("%s in one read %s..%s %v %v %v:\ngot  %v %v\nwant %v %v", stage, from, to, q.Metrics, q.Dimensions, q.Filters, gotOne, gotOneV, want, wantV)
		}
	}
}

// TestEventReadsThroughVisitsMatchTheEventScan is the guard of reading a
// range's events through its visits: random intake (visits across
// midnight, events out of order), a visit of three days that started long
// before the range and runs through it, ranges of whole days in UTC and
// New York and of datetimes cutting visits in two, kept visit reaches, and
// a late event that joins a visit ending before the range to one inside
// it: every answer equals the read of the whole event index.
func TestEventReadsThroughVisitsMatchTheEventScan(t *testing.T) {
	dbtest.SkipUnderRace(t, "data-heavy answers compared in one goroutine")
	t.Parallel()
	db, _, _ := openPartialsDB(t)
	r := rand.New(rand.NewPCG(5, 6))
	events := randomEvents(r, "a", 2500, 250, 12)
	url := "https://shop.test/blog/long"
	long := func(id string, ts time.Time) IngestEvent {
		return IngestEvent{ID: id, SiteID: "s", Type: "pageview", AnonID: "long", TS: ts, URL: &url, Country: "DE", Raw: []byte(`{}`)}
	}
	// A visit of three days, an event every 20 minutes, from the 2nd.
	for i := range 3 * 72 {
		events = append(events, long(fmt.Sprint("long-", i), partialsStart.Add(24*time.Hour+time.Duration(i)*20*time.Minute)))
	}
	r.Shuffle(len(events), func(i, j int) { events[i], events[j] = events[j], events[i] })
	ingestBatches(t, db, events)
	newYork, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	day4 := partialsStart.AddDate(0, 0, 3)
	ranges := [][2]time.Time{
		{day4, partialsStart.AddDate(0, 0, 10)},
		{time.Date(2026, 3, 4, 0, 0, 0, 0, newYork), time.Date(2026, 3, 11, 0, 0, 0, 0, newYork)},
		{day4.Add(7*time.Hour + 13*time.Minute), day4.Add(30*time.Hour + 1*time.Second)},
		{partialsStart.Add(-time.Hour), partialsStart.AddDate(0, 0, 2)},
	}
	// The reads through kept visit reaches are compared with the event
	// index's reads of the fresh stage: the data is the same.
	memo := scanMemo{}
	for _, rg := range ranges {
		compareEventReads(t, db, rg[0].Location(), rg[0], rg[1], "fresh", memo)
	}
	waitPartials(t, db)
	if partialRows(t, db, " AND basis = 'reach'") == 0 {
		t.Fatal("got no kept visit reaches, want those of the closed days before the ranges")
	}
	for _, rg := range ranges {
		compareEventReads(t, db, rg[0].Location(), rg[0], rg[1], "kept", memo)
	}
	// A visit that ends 30 minutes before the 4th and one 5 minutes into
	// it; a late event at 23:50 joins them into one that starts on the 3rd.
	bridge := func(id string, ts time.Time) IngestEvent {
		return IngestEvent{ID: id, SiteID: "s", Type: "pageview", AnonID: "bridge", TS: ts, URL: &url, Country: "FR", Raw: []byte(`{}`)}
	}
	ingestBatches(t, db, []IngestEvent{bridge("b1", day4.Add(-50*time.Minute)), bridge("b2", day4.Add(-30*time.Minute)), bridge("b3", day4.Add(5*time.Minute))})
	compareEventReads(t, db, time.UTC, day4, day4.AddDate(0, 0, 2), "two visits", nil)
	waitPartials(t, db)
	ingestBatches(t, db, []IngestEvent{bridge("b4", day4.Add(-10*time.Minute))})
	compareEventReads(t, db, time.UTC, day4, day4.AddDate(0, 0, 2), "joined", nil)
	q := StatsQuery{Site: "s", From: day4, To: day4.AddDate(0, 0, 2), Zone: time.UTC, Metrics: []string{MetricVisits, MetricPageviews},
		Filters: []QueryFilter{{Op: "is", Dim: "visit:country", Values: []string{"FR"}}, {Op: "contains", Dim: "event:page", Values: []string{"/blog/long"}}}}
	rows, err := db.Stats(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(rows); got != "[{[] [1 1]}]" {
		t.Errorf("got %s for the joined visit, want one visit with its one pageview in the range", got)
	}
}

// TestSplitEventReadsShareASmallPool: reports read concurrently on read
// pools of one and two connections all finish, with the answer of the read
// in one query: an event read in two halves takes both connections before
// either read starts, one such read at a time, so none waits for a
// connection held by another that waits for one too (the test would hang).
func TestSplitEventReadsShareASmallPool(t *testing.T) {
	t.Parallel()
	for _, conns := range []int{1, 2} {
		clk := &testClock{t: partialsNow}
		db, err := openTestDB(t, context.Background(), Options{Path: filepath.Join(t.TempDir(), "p.db"), Now: clk.Now, ReadConns: conns})
		if err != nil {
			t.Fatal(err)
		}
		withSites(t, db, "s")
		ingestBatches(t, db, randomEvents(rand.New(rand.NewPCG(7, 8)), "a", 1500, 150, 12))
		q := StatsQuery{Site: "s", From: partialsStart, To: partialsStart.AddDate(0, 0, 12), Zone: time.UTC,
			Metrics: []string{MetricVisitors, MetricVisits, MetricPageviews}, Dimensions: []string{"event:page"}, scan: true,
			Filters: []QueryFilter{{Op: "is_not", Dim: "visit:country", Values: []string{"US"}}, {Op: "contains", Dim: "event:page", Values: []string{"/"}}}}
		one := q
		one.oneRead = true
		rows, err := db.Stats(context.Background(), one)
		if err != nil {
			t.Fatal(err)
		}
		want := rowsText(rows)
		got := make([][]string, 8)
		var wg sync.WaitGroup
		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rows, err := db.Stats(context.Background(), q)
				if err != nil {
					t.Error(err)
				}
				got[i] = rowsText(rows)
			}()
		}
		wg.Wait()
		for i := range got {
			if !slices.Equal(got[i], want) {
				t.Errorf("%d connections, report %d: got %v, want %v", conns, i, got[i], want)
			}
		}
		db.Close()
	}
}
