package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tally-analytics/tally/internal/dbtest"
)

// TestReportsFollowOtherInstances: with two instances on one database,
// reports cached on one (merged from partials, a filtered scan, goals
// from goal partials, a funnel, the default funnel from funnel partials)
// answer, the first time they are asked after the other instance stored
// late events of their days, what an instance that never cached them
// does, late events included.
func TestReportsFollowOtherInstances(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	withSites(t, a, "s")
	within(t, "the other instance knows site s", func() bool { _, ok := b.Site("s"); return ok })
	a.hooks.exactVisitorsBelow, b.hooks.exactVisitorsBelow = 0, 0 // from partials even for these few visitors
	ctx := context.Background()
	r := rand.New(rand.NewPCG(5, 6))
	ingestBatches(t, a, randomEvents(r, "a", 800, 60, 12))
	createGoals(t, a, pageGoal("Pricing", "/pricing"), eventGoal("Signup", "signup"), pageGoal("Blog", "/blog/*"))
	from, to := partialsStart, partialsStart.AddDate(0, 0, 12)
	metrics := []string{MetricVisitors, MetricPageviews, MetricEvents}
	stats := func(q StatsQuery) func(db *DB) (string, error) {
		return func(db *DB) (string, error) {
			q.Site, q.From, q.To, q.Zone = "s", from, to, time.UTC
			if q.Goals != nil {
				goals, err := db.Goals(ctx, "s")
				if err != nil {
					return "", err
				}
				q.Goals = siteGoalFilters(goals)
			}
			rows, err := db.Stats(ctx, q)
			slices.SortFunc(rows, func(a, b StatsRow) int { return slices.Compare(a.Dims, b.Dims) })
			return fmt.Sprint(rows), err
		}
	}
	funnel := func(filters []QueryFilter) func(db *DB) (string, error) {
		return func(db *DB) (string, error) {
			goals, err := db.Goals(ctx, "s")
			if err != nil {
				return "", err
			}
			counts, err := db.Funnel(ctx, FunnelQuery{Site: "s", From: from, To: to, Zone: time.UTC, Steps: defaultFunnelSteps(goals), Filters: filters})
			return fmt.Sprint(counts), err
		}
	}
	reads := []struct {
		name string
		read func(db *DB) (string, error)
	}{
		{"by day, from partials", stats(StatsQuery{Metrics: metrics, Dimensions: []string{"time:day"}, TimeUnit: "day"})},
		{"by page, from partials", stats(StatsQuery{Metrics: metrics, Dimensions: []string{"event:page"}})},
		{"filtered scan", stats(StatsQuery{Metrics: metrics, Filters: []QueryFilter{
			{Op: "is", Dim: "visit:country", Values: []string{"DE"}}, {Op: "contains", Dim: "event:page", Values: []string{"blog"}}}})},
		{"goals, from goal partials", stats(StatsQuery{Metrics: metrics, Dimensions: []string{GoalDimension}, Goals: []QueryFilter{}})},
		{"default funnel, from funnel partials", funnel(nil)},
		{"filtered funnel", funnel([]QueryFilter{{Op: "is", Dim: "visit:country", Values: []string{"DE"}}})},
	}
	before := make([]string, len(reads))
	for i, c := range reads {
		first, err := c.read(a)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		waitPartials(t, a)
		hits := cacheHits(a)
		again, err := c.read(a)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if again != first || cacheHits(a) == hits {
			t.Fatalf("%s: got %s (kept %v) again, want %s kept", c.name, again, cacheHits(a) > hits, first)
		}
		before[i] = first
	}

	// Late events of day 5 stored by the other instance: a new visitor
	// from DE who reads the blog, the pricing page and signs up.
	day := partialsStart.AddDate(0, 0, 5).Add(12 * time.Hour)
	u := func(p string) *string { s := "https://shop.test" + p; return &s }
	late := []IngestEvent{
		{ID: "late-1", SiteID: "s", Type: "pageview", AnonID: "late", TS: day, URL: u("/blog/a"), Country: "DE", Raw: []byte(`{}`)},
		{ID: "late-2", SiteID: "s", Type: "pageview", AnonID: "late", TS: day.Add(time.Minute), URL: u("/pricing"), Country: "DE", Raw: []byte(`{}`)},
		{ID: "late-3", SiteID: "s", Type: "signup", AnonID: "late", TS: day.Add(2 * time.Minute), URL: u("/pricing"), Country: "DE", Raw: []byte(`{}`)},
	}
	if _, err := b.Ingest(ctx, late, nil, nil); err != nil {
		t.Fatal(err)
	}
	for i, c := range reads {
		got, err := c.read(a)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want, err := c.read(b) // b never kept an answer or a partial
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got != want || got == before[i] {
			t.Errorf("%s after the other instance's late events: got %s, want %s (before them %s)", c.name, got, want, before[i])
		}
	}
}

// TestKeptPartialOfADayAnotherInstanceChanged: a day partial kept by one
// instance is not read once another instance counted a change of its day
// (as a write that committed after the partial's reads began would), but
// computed again; a change of another day leaves it read.
func TestKeptPartialOfADayAnotherInstanceChanged(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	withSites(t, a, "s")
	within(t, "the other instance knows site s", func() bool { _, ok := b.Site("s"); return ok })
	ctx := context.Background()
	ingestBatches(t, a, randomEvents(rand.New(rand.NewPCG(7, 8)), "a", 300, 30, 4))
	q := StatsQuery{Site: "s", From: partialsStart, To: partialsStart.AddDate(0, 0, 4), Zone: time.UTC, TimeUnit: "day",
		Metrics: []string{MetricPageviews, MetricEvents}, Dimensions: []string{"time:day"}}
	read := func() int64 {
		t.Helper()
		a.reports = reportCache{} // the partials, not a merged answer
		n := a.hooks.partialScans.Load()
		if _, err := a.Stats(ctx, q); err != nil {
			t.Fatal(err)
		}
		waitPartials(t, a)
		return a.hooks.partialScans.Load() - n
	}
	if n := read(); n != 4 {
		t.Fatalf("got %d days computed at first, want 4", n)
	}
	if n := read(); n != 0 {
		t.Fatalf("got %d days computed with all kept, want 0", n)
	}
	// b counts a change of day 2's noon and of a day after the range,
	// without deleting any row (as if its write raced a's store).
	err := b.writer.do(ctx, func(tx *writeTx) error {
		tx.partialDaysChanged("s", partialsStart.AddDate(0, 0, 2).Add(12*time.Hour).Format(hourKeyLayout))
		tx.partialDaysChanged("s", partialsStart.AddDate(0, 0, 9).Format(time.DateOnly))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := read(); n != 1 {
		t.Errorf("got %d days computed after another instance changed day 2, want 1", n)
	}
	if n := read(); n != 0 {
		t.Errorf("got %d days computed once day 2 was kept again, want 0", n)
	}

	// In Kolkata (UTC+5:30) a local day starts at 18:30 UTC: a change of
	// the hour from 18:00 UTC is in two local days.
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	q.Zone = kolkata
	q.From = time.Date(2026, 3, 1, 0, 0, 0, 0, kolkata)
	q.To = q.From.AddDate(0, 0, 4)
	read()
	if n := read(); n != 0 {
		t.Fatalf("got %d Kolkata days computed with all kept, want 0", n)
	}
	err = b.writer.do(ctx, func(tx *writeTx) error {
		tx.partialDaysChanged("s", time.Date(2026, 3, 2, 18, 0, 0, 0, time.UTC).Format(hourKeyLayout))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := read(); n != 2 {
		t.Errorf("got %d Kolkata days computed after a change of an hour across their midnight, want 2", n)
	}
}

// TestTodaysIntakeCountsNoChange: where several instances write, intake
// of an hour that started less than partialMargin (less changeSkew) ago
// writes no partial_changes row, as no kept partial or cached report can
// cover it yet; a late event of an older hour writes one.
func TestTodaysIntakeCountsNoChange(t *testing.T) {
	t.Parallel()
	dbtest.OnlyPostgres(t, "partial_changes is where several instances write")
	db, clk, _ := openPartialsDB(t)
	clk.Set(partialsNow.Add(20 * time.Minute))
	rows := func() int {
		t.Helper()
		var n int
		if err := db.read.QueryRow(`SELECT COUNT(*) FROM partial_changes`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	url := "https://shop.test/"
	ev := func(id string, ts time.Time) []IngestEvent {
		return []IngestEvent{{ID: id, SiteID: "s", Type: "pageview", AnonID: id, TS: ts, URL: &url, Raw: []byte(`{}`)}}
	}
	ingestBatches(t, db, ev("now", partialsNow.Add(19*time.Minute)))
	if n := rows(); n != 0 {
		t.Errorf("got %d partial_changes rows after intake of the current hour, want 0", n)
	}
	ingestBatches(t, db, ev("late", partialsNow.Add(-3*time.Hour)))
	if n := rows(); n != 1 {
		t.Errorf("got %d partial_changes rows after a late event, want 1", n)
	}
}
