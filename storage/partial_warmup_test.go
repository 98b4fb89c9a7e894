package storage

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestWarmupLeavesOnlyKeptPartialsToRead: after one round of the warm-up,
// the reports it warms over the last 30 days compute no partial, are
// answered from the report cache the first time they are asked, and answer
// what the scan does.
func TestWarmupLeavesOnlyKeptPartialsToRead(t *testing.T) {
	t.Parallel()
	db, _, _ := openPartialsDB(t)
	db.hooks.exactVisitorsBelow = 0
	ingestBatches(t, db, randomEvents(rand.New(rand.NewPCG(7, 8)), "a", 3000, 300, 19))
	if err := db.warmSite(context.Background(), "s", time.UTC, partialsNow); err != nil {
		t.Fatal(err)
	}
	waitPartials(t, db)
	today := startOfDay(partialsNow, time.UTC)
	from, to := today.AddDate(0, 0, -30), today
	computed := db.partialDaysComputed()
	hits := db.reports.hitCount()
	var asked, bases int
	for _, q := range []StatsQuery{
		{Metrics: []string{MetricVisitors, MetricVisits, MetricBounceRate, MetricVisitDuration}, Dimensions: []string{"time:day"}},
		{Metrics: []string{MetricVisitors, MetricVisits, MetricPageviews, MetricBounceRate}, Dimensions: []string{"time:day"}},
		{Metrics: []string{MetricVisitors, MetricVisits, MetricBounceRate}, Dimensions: []string{"visit:source"}},
		{Metrics: []string{MetricVisitors, MetricVisits}, Dimensions: []string{"visit:entry_page"}},
		{Metrics: []string{MetricVisitors, MetricVisits, MetricBounceRate}, Dimensions: []string{"visit:exit_page"}},
		{Metrics: []string{MetricVisitors, MetricVisits, MetricPageviews}, Dimensions: []string{"visit:country"}},
		{Metrics: []string{MetricVisitors, MetricPageviews}, Dimensions: []string{"event:page"}},
	} {
		q.Site, q.From, q.To, q.Zone = "s", from, to, time.UTC
		plan, _ := planPartials(&q)
		for _, need := range []bool{plan.events, plan.visits} {
			if need {
				bases++
			}
		}
		got, _, estimated := statsText(t, db, q, false)
		want, _, _ := statsText(t, db, q, true)
		if !estimated || !slices.Equal(got, want) {
			t.Errorf("%v by %v: got %v (from partials %v), want %v", q.Metrics, q.Dimensions, got, estimated, want)
		}
		asked++
	}
	if n := db.partialDaysComputed() - computed; n != 0 || asked == 0 {
		t.Errorf("got %d day partials computed by the reports after the warm-up, want 0", n)
	}
	// The first asking of each is answered from the warmed report cache
	// (the scan beside it does not use it).
	if n := db.reports.hitCount() - hits; n != bases {
		t.Errorf("got %d merged answers from the report cache, want %d (each report's bases)", n, bases)
	}
}

// TestWarmupCoversTheDashboard: after one round of the warm-up, the
// dashboard's other panels over the last 30 days (campaigns, devices,
// browsers, operating systems, the default custom property, the goals and
// the default funnel) and its headline's previous period (the 30 days
// before them) compute no partial (docs/dashboard.md).
func TestWarmupCoversTheDashboard(t *testing.T) {
	t.Parallel()
	db, _, _ := openPartialsDB(t)
	db.hooks.exactVisitorsBelow = 0
	ingestBatches(t, db, randomEvents(rand.New(rand.NewPCG(7, 9)), "a", 3000, 300, 19))
	createGoals(t, db, eventGoal("Signup", "signup"), pageGoal("Blog", "/blog/*"), pageGoal("Pricing", "/pricing"))
	if err := db.warmSite(context.Background(), "s", time.UTC, partialsNow); err != nil {
		t.Fatal(err)
	}
	waitPartials(t, db)
	today := startOfDay(partialsNow, time.UTC)
	computed := db.partialDaysComputed()
	headline := []string{MetricVisitors, MetricVisits, MetricPageviews, MetricViewsPerVisit, MetricBounceRate, MetricVisitDuration}
	for _, q := range []StatsQuery{
		{Metrics: []string{MetricVisitors, MetricVisits}, Dimensions: []string{"visit:utm_source"}},
		{Metrics: []string{MetricVisitors, MetricPercentage}, Dimensions: []string{"visit:device"}},
		{Metrics: []string{MetricVisitors, MetricPercentage}, Dimensions: []string{"visit:browser"}},
		{Metrics: []string{MetricVisitors, MetricPercentage}, Dimensions: []string{"visit:os"}},
		{Metrics: headline, From: today.AddDate(0, 0, -60), To: today.AddDate(0, 0, -30)},
		// The default property (the first name: the events carry only
		// plan), as the property panel asks it: the events that carry it.
		{Metrics: []string{MetricVisitors, MetricEvents}, Dimensions: []string{"event:props:plan"},
			Filters: []QueryFilter{{Op: "is_not", Dim: "event:props:plan", Values: []string{NoneProp}}}},
		// The goal panel: every goal of the site, in one breakdown.
		siteGoalQuery(t, db, time.Time{}, time.Time{}, []string{GoalDimension}, MetricVisitors, MetricEvents),
	} {
		q.Site, q.Zone = "s", time.UTC
		if q.From.IsZero() {
			q.From, q.To = today.AddDate(0, 0, -30), today
		}
		got, _, estimated := statsText(t, db, q, false)
		want, _, _ := statsText(t, db, q, true)
		if !estimated || !slices.Equal(got, want) {
			t.Errorf("%v by %v: got %v (from partials %v), want %v", q.Metrics, q.Dimensions, got, estimated, want)
		}
	}
	// The funnel panel: the default funnel of the goals.
	if _, err := db.Funnel(context.Background(), defaultFunnel(t, db, today.AddDate(0, 0, -30), today)); err != nil {
		t.Fatal(err)
	}
	if n := db.partialDaysComputed() - computed; n != 0 {
		t.Errorf("got %d day partials computed by the reports after the warm-up, want 0", n)
	}
}

// TestWarmupStopsWithTheService: the loop warms at start and returns once
// its context ends.
func TestWarmupStopsWithTheService(t *testing.T) {
	t.Parallel()
	db, _, _ := openPartialsDB(t)
	ingestBatches(t, db, randomEvents(rand.New(rand.NewPCG(9, 10)), "a", 500, 50, 12))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		db.WarmPartials(ctx, nil)
	}()
	// Waits for the first round's stores (the loop then sleeps until the
	// next midnight).
	for partialRows(t, db, " AND basis = 'visits' AND dim = 'visit:country'") < 12 {
		select {
		case <-done:
			t.Fatal("got the warm-up ended before its context, want it running")
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("got the warm-up still running 30 s after its context ended, want it stopped")
	}
}

// TestNextWarm: the warm-up runs half an hour after each local midnight.
func TestNextWarm(t *testing.T) {
	t.Parallel()
	zone := func(name string) *time.Location {
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		return loc
	}
	utc := func(s string) time.Time {
		x, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	for _, tt := range []struct {
		now  string
		loc  *time.Location
		want string
	}{
		{"2026-03-20T12:00:00Z", time.UTC, "2026-03-21T00:30:00Z"},
		{"2026-03-20T00:10:00Z", time.UTC, "2026-03-20T00:30:00Z"},
		{"2026-03-20T00:30:00Z", time.UTC, "2026-03-21T00:30:00Z"},
		{"2026-03-20T12:00:00Z", zone("Europe/Berlin"), "2026-03-20T23:30:00Z"},
		{"2026-03-29T12:00:00Z", zone("Europe/Berlin"), "2026-03-29T22:30:00Z"}, // the day of the change to summer time
		{"2026-03-20T12:00:00Z", zone("America/New_York"), "2026-03-21T04:30:00Z"},
		{"2026-03-20T12:00:00Z", zone("Asia/Kathmandu"), "2026-03-20T18:45:00Z"},
	} {
		if got := nextWarm(utc(tt.now), tt.loc); !got.Equal(utc(tt.want)) {
			t.Errorf("%s in %s: got %s, want %s", tt.now, tt.loc, got.UTC().Format(time.RFC3339), tt.want)
		}
	}
}
