package storage

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tally-analytics/tally/internal/dbtest"
)

// createGoals creates goals on site s, failing the test on an error.
func createGoals(t *testing.T, db *DB, goals ...NewGoal) {
	t.Helper()
	site, _ := db.Site("s")
	for _, g := range goals {
		if _, err := db.CreateGoal(context.Background(), Actor{Kind: ActorSystem}, site, g); err != nil {
			t.Fatal(err)
		}
	}
}

func eventGoal(name, event string) NewGoal { return NewGoal{Name: name, EventName: &event} }
func pageGoal(name, path string) NewGoal   { return NewGoal{Name: name, PagePath: &path} }

// siteGoalQuery is the breakdown by goal of site s's whole goal set over
// [from, to), as the server asks it (docs/query-api.md#goals-and-funnels).
func siteGoalQuery(t *testing.T, db *DB, from, to time.Time, dims []string, metrics ...string) StatsQuery {
	t.Helper()
	goals, err := db.Goals(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	return StatsQuery{Site: "s", From: from, To: to, Zone: time.UTC, Metrics: metrics, Dimensions: dims, Goals: siteGoalFilters(goals)}
}

// goalPartialRows counts site s's kept goal partials.
func goalPartialRows(t *testing.T, db *DB) int {
	t.Helper()
	return partialRows(t, db, ` AND dim LIKE 'event:goal:%'`)
}

// compareGoalPartials checks that the breakdowns by goal of site s's
// goals, by goal alone and by day or week too, answer from goal partials
// what the scan (narrow and wide) does: equal events and pageviews,
// visitors within three standard errors of the sketch (plus one).
func compareGoalPartials(t *testing.T, db *DB, from, to time.Time, stage string, memo scanMemo) {
	t.Helper()
	for _, dims := range [][]string{{GoalDimension}, {"time:day", GoalDimension}, {GoalDimension, "time:week"}} {
		for _, metrics := range [][]string{{MetricVisitors, MetricEvents}, {MetricVisitors, MetricPageviews, MetricEvents}, {MetricEvents}} {
			q := siteGoalQuery(t, db, from, to, dims, metrics...)
			if _, ok := planPartials(&q); !ok {
				t.Fatalf("%s by %v: not answered from partials", stage, dims)
			}
			got, gotV, estimated := statsText(t, db, q, false)
			if slices.Contains(metrics, MetricVisitors) && !estimated {
				t.Errorf("%s %v by %v: got the scan, want goal partials", stage, metrics, dims)
			}
			for _, wide := range []bool{false, true} {
				q.wideEvents = wide
				want, wantV := memo.scan(t, db, q)
				if !slices.Equal(got, want) {
					t.Errorf("%s %v by %v (scan wide %v):\ngot  %v\nwant %v", stage, metrics, dims, wide, got, want)
					continue
				}
				for i := range gotV {
					if math.Abs(gotV[i]-wantV[i]) > 3*0.0081*wantV[i]+1 {
						t.Errorf("%s %v by %v row %d: got %v visitors, want %v (within 3 SE)", stage, metrics, dims, i, gotV[i], wantV[i])
					}
				}
			}
		}
	}
}

// TestGoalPartialsMatchTheScan: a breakdown of the site's goals (an event
// name, one with a property, page paths exact and with * and **) read from
// goal partials answers what the scan does, kept partials are then read
// without a scan, and late events, an erasure and a retention purge drop
// the goal partials of their days so that the next answers are the scan's
// again.
func TestGoalPartialsMatchTheScan(t *testing.T) {
	dbtest.SkipUnderRace(t, "data-heavy answers compared in one goroutine")
	t.Parallel()
	db, _, ws := openPartialsDB(t)
	db.hooks.exactVisitorsBelow = 0 // estimate even these few visitors
	r := rand.New(rand.NewPCG(3, 4))
	ingestBatches(t, db, randomEvents(r, "a", 3000, 300, 12))
	createGoals(t, db, eventGoal("Signup", "signup"), pageGoal("Blog", "/blog/*"), pageGoal("Pricing", "/pricing"),
		pageGoal("Any", "/**"), pageGoal("Nothing", "/none"),
		NewGoal{Name: "Signup p1", EventName: ptr("signup"), Property: &GoalProperty{Name: "plan", Value: "p1"}})
	from, to := partialsStart, partialsStart.AddDate(0, 0, 12)
	memo := scanMemo{} // the goals and data of "first" and "kept" are the same
	compareGoalPartials(t, db, from, to, "first", memo)
	waitPartials(t, db)
	if n := goalPartialRows(t, db); n != 12 {
		t.Fatalf("got %d kept goal partials, want 12 (one a day)", n)
	}
	computed := db.partialDaysComputed()
	compareGoalPartials(t, db, from, to, "kept", memo)
	if n := db.partialDaysComputed() - computed; n != 0 {
		t.Errorf("got %d day partials computed with every goal partial kept, want 0", n)
	}

	ingestBatches(t, db, randomEvents(r, "late", 400, 300, 12))
	compareGoalPartials(t, db, from, to, "late", nil)
	waitPartials(t, db)

	site, _ := db.Site("s")
	if _, err := db.EraseSubject(context.Background(), Actor{Kind: ActorSystem}, site, Subject{AnonID: "v3"}); err != nil {
		t.Fatal(err)
	}
	compareGoalPartials(t, db, from, to, "erased", nil)
	waitPartials(t, db)

	// Keep 15 days: the cut is 2026-03-06 with the clock at the 20th.
	if _, err := db.Purge(context.Background(), 15); err != nil {
		t.Fatal(err)
	}
	cut := time.Date(2026, 3, 6, 0, 0, 0, 0, time.UTC)
	if n := partialRows(t, db, ` AND dim LIKE 'event:goal:%' AND day_start < ?`, cut.UnixMilli()); n != 0 {
		t.Errorf("got %d kept goal partials of purged days, want 0", n)
	}
	compareGoalPartials(t, db, from, to, "purged", nil)
	_ = ws
}

// goalRowsText renders a breakdown by goal of site s's goals as "name
// visitors events" by goal name, and whether it was read from partials.
func goalRowsText(t *testing.T, db *DB, from, to time.Time) (string, bool) {
	t.Helper()
	goals, err := db.Goals(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	q := siteGoalQuery(t, db, from, to, []string{GoalDimension}, MetricVisitors, MetricEvents)
	rows, estimated, err := db.StatsEstimate(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		var i int
		fmt.Sscan(r.Dims[0], &i)
		out = append(out, fmt.Sprintf("%s %v %v", goals[i].Name, r.Metrics[0], r.Metrics[1]))
	}
	slices.Sort(out)
	return fmt.Sprint(out), estimated
}

// TestGoalPartialsFollowTheGoalSet: a goal created or deleted deletes the
// site's goal partials and the next breakdown is of the new set, read from
// its own partials; a breakdown of another set than the site's (the old
// one, or some goals) is the scan's, and a partial computed for a set that
// changed before it was stored is not stored.
func TestGoalPartialsFollowTheGoalSet(t *testing.T) {
	t.Parallel()
	db, _, _ := openPartialsDB(t)
	db.hooks.exactVisitorsBelow = 0
	url := func(p string) *string { u := "https://shop.test" + p; return &u }
	ev := func(id, anon, typ, path string, ts time.Time) IngestEvent {
		return IngestEvent{ID: id, SiteID: "s", Type: typ, AnonID: anon, TS: ts, URL: url(path), Raw: []byte(`{}`)}
	}
	day2 := partialsStart.AddDate(0, 0, 1)
	ingestBatches(t, db, []IngestEvent{
		ev("1", "a", "pageview", "/pricing", partialsStart.Add(9*time.Hour)),
		ev("2", "b", "signup", "/signup", partialsStart.Add(10*time.Hour)),
		ev("3", "c", "pageview", "/docs", partialsStart.Add(11*time.Hour)),
		ev("4", "a", "signup", "/signup", day2.Add(9*time.Hour)),
	})
	from, to := partialsStart, partialsStart.AddDate(0, 0, 2)
	createGoals(t, db, eventGoal("Signup", "signup"), pageGoal("Pricing", "/pricing"))
	oldSet := siteGoalQuery(t, db, from, to, []string{GoalDimension}, MetricVisitors, MetricEvents)

	steps := []struct {
		change func()
		want   string
	}{
		{func() {}, "[Pricing 1 1 Signup 2 2]"},
		{func() { createGoals(t, db, pageGoal("Docs", "/docs")) }, "[Docs 1 1 Pricing 1 1 Signup 2 2]"},
		{func() {
			goals, _ := db.Goals(context.Background(), "s")
			site, _ := db.Site("s")
			if err := db.DeleteGoal(context.Background(), Actor{Kind: ActorSystem}, site, goals[1].ID); err != nil { // Pricing
				t.Fatal(err)
			}
		}, "[Docs 1 1 Signup 2 2]"},
	}
	for i, s := range steps {
		s.change()
		if n := goalPartialRows(t, db); n != 0 {
			t.Errorf("step %d: got %d goal partials kept after the goal set changed, want 0", i, n)
		}
		got, fromPartials := goalRowsText(t, db, from, to)
		if got != s.want || !fromPartials {
			t.Errorf("step %d: got %s (from partials %v), want %s from partials", i, got, fromPartials, s.want)
		}
		waitPartials(t, db)
		if n := goalPartialRows(t, db); n != 2 {
			t.Errorf("step %d: got %d goal partials kept, want 2 (one a day)", i, n)
		}
		if got2, _ := goalRowsText(t, db, from, to); got2 != got {
			t.Errorf("step %d: got %s read again, want %s", i, got2, got)
		}
	}

	// The first set (Pricing, Signup) is no longer the site's: scanned.
	rows, estimated, err := db.StatsEstimate(context.Background(), oldSet)
	if err != nil {
		t.Fatal(err)
	}
	if estimated || fmt.Sprint(rows) != "[{[0] [1 1]} {[1] [2 2]}]" {
		t.Errorf("got %v (from partials %v) for the old goal set, want [{[0] [1 1]} {[1] [2 2]}] scanned", rows, estimated)
	}
	// Its partials, computed now, are not stored.
	days, _ := localDays(from, to, time.UTC)
	dim := goalSetDim(oldSet.Goals)
	if _, err := db.dayPartials(context.Background(), "s", time.UTC, days, dim, oldSet.Goals, basisEvents, false, partialsNow); err != nil {
		t.Fatal(err)
	}
	waitPartials(t, db)
	if n := partialRows(t, db, ` AND dim = ?`, dim); n != 0 {
		t.Errorf("got %d kept partials of a goal set that is not the site's, want 0", n)
	}
}

// TestGoalPartialsKeptOnlyWhenSmall: a day's goal partial over
// maxGoalPartialBytes (17 goals each completed by 7,000 visitors: dense
// sketches) answers as the scan and is not stored; 15 such goals are.
func TestGoalPartialsKeptOnlyWhenSmall(t *testing.T) {
	dbtest.SkipUnderRace(t, "data-heavy answers compared in one goroutine")
	t.Parallel()
	db, _, _ := openPartialsDB(t)
	db.hooks.exactVisitorsBelow = 0
	u := "https://shop.test/pricing"
	events := make([]IngestEvent, 7000)
	for i := range events {
		events[i] = IngestEvent{ID: fmt.Sprint(i), SiteID: "s", Type: "pageview", AnonID: fmt.Sprintf("v%d", i),
			TS: partialsStart.Add(time.Duration(i) * time.Second), URL: &u, Raw: []byte(`{}`)}
	}
	ingestBatches(t, db, events)
	// Each matches /pricing.
	paths := []string{"/**", "/*", "/p*", "/pr*", "/pri*", "/pric*", "/prici*", "/pricin*", "/pricing",
		"/*g", "/p**", "/pr**", "/pri**", "/pric**", "/prici**", "/pricin**", "/*ing"}
	from, to := partialsStart, partialsStart.AddDate(0, 0, 1)
	for _, c := range []struct {
		goals int
		kept  int
	}{{15, 1}, {17, 0}} {
		for i := goalCount(t, db); i < c.goals; i++ {
			createGoals(t, db, pageGoal(fmt.Sprintf("g%02d", i), paths[i]))
		}
		got, _ := goalRowsText(t, db, from, to)
		q := siteGoalQuery(t, db, from, to, []string{GoalDimension}, MetricEvents)
		want, _, _ := statsText(t, db, q, true)
		if gotE, _, _ := statsText(t, db, q, false); !slices.Equal(gotE, want) {
			t.Errorf("%d goals: got %v, want %v", c.goals, gotE, want)
		}
		waitPartials(t, db)
		if n := goalPartialRows(t, db); n != c.kept {
			t.Errorf("%d goals: got %d kept goal partials, want %d (%s)", c.goals, n, c.kept, got)
		}
	}
}

func goalCount(t *testing.T, db *DB) int {
	t.Helper()
	goals, err := db.Goals(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	return len(goals)
}
