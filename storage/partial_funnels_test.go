package storage

import (
	"context"
	"maps"
	"math/rand/v2"
	"testing"
	"time"
)

// funnelMatcherFor is the matcher Funnel builds for steps: the narrow
// read unless wide.
func funnelMatcherFor(t *testing.T, db *DB, steps []Goal, wide bool) *funnelMatcher {
	t.Helper()
	m, err := newFunnelMatcher(steps)
	if err != nil {
		t.Fatal(err)
	}
	sq := &StatsQuery{Site: "s", wideEvents: wide || m.props}
	db.usePages(sq)
	m.paths = sq.pages
	return m
}

// defaultFunnel is site s's default funnel over [from, to).
func defaultFunnel(t *testing.T, db *DB, from, to time.Time) FunnelQuery {
	t.Helper()
	goals, err := db.Goals(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	return FunnelQuery{Site: "s", From: from, To: to, Zone: time.UTC, Steps: defaultFunnelSteps(goals)}
}

// compareFunnelPartials checks that q read from funnel partials gives
// every visitor the furthest step the read of every visit does (narrow
// and wide).
func compareFunnelPartials(t *testing.T, db *DB, q FunnelQuery, stage string) {
	t.Helper()
	ctx := context.Background()
	lo, err := db.visitLookback(ctx, q.Site, q.From)
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := db.funnelFromPartials(ctx, &q, funnelMatcherFor(t, db, q.Steps, false), lo)
	if err != nil || !ok {
		t.Fatalf("%s: got from partials %v, %v; want them", stage, ok, err)
	}
	for _, wide := range []bool{false, true} {
		want, err := db.funnelBests(ctx, &q, funnelMatcherFor(t, db, q.Steps, wide), lo, "")
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s (read wide %v): got %d visitors' steps %v, want %d: %v", stage, wide, len(got), funnelCountsOf(got, len(q.Steps)), len(want), funnelCountsOf(want, len(q.Steps)))
		}
	}
}

func funnelCountsOf(best map[string]int, n int) []int {
	counts := make([]int, n)
	for _, s := range best {
		for i := range s {
			counts[i]++
		}
	}
	return counts
}

// TestFunnelPartialsMatchTheRead: the default funnel over closed days read
// from funnel partials (with visits across midnight, before the range's
// start and past its end) gives each visitor the furthest step the read
// of every visit does; kept partials are read without a read of their
// days; a late event, an erasure and a retention purge drop their days'
// partials; a created goal deletes them and makes a new default funnel.
func TestFunnelPartialsMatchTheRead(t *testing.T) {
	t.Parallel()
	db, _, _ := openPartialsDB(t)
	r := rand.New(rand.NewPCG(11, 12))
	ingestBatches(t, db, randomEvents(r, "a", 4000, 300, 12))
	createGoals(t, db, pageGoal("Blog", "/blog/*"), pageGoal("Docs", "/docs"), pageGoal("Pricing", "/pricing"), eventGoal("Signup", "signup"))
	// Days 2 to 10 of the 12: visits run in from day 1 and out into day 11.
	from, to := partialsStart.AddDate(0, 0, 1), partialsStart.AddDate(0, 0, 10)
	q := defaultFunnel(t, db, from, to)
	compareFunnelPartials(t, db, q, "first")
	waitPartials(t, db)
	if n := partialRows(t, db, ` AND basis = 'funnel'`); n != 9 {
		t.Fatalf("got %d kept funnel partials, want 9 (one a day)", n)
	}
	computed := db.partialDaysComputed()
	compareFunnelPartials(t, db, q, "kept")
	if n := db.partialDaysComputed() - computed; n != 0 {
		t.Errorf("got %d funnel day partials computed with every one kept, want 0", n)
	}
	if counts, err := db.Funnel(context.Background(), q); err != nil || counts[0] == 0 {
		t.Errorf("got %v, %v from Funnel, want visitors at the first step", counts, err)
	}

	ingestBatches(t, db, randomEvents(r, "late", 500, 300, 12))
	compareFunnelPartials(t, db, q, "late")
	waitPartials(t, db)

	site, _ := db.Site("s")
	for _, anon := range []string{"v3", "v4", "v5"} {
		if _, err := db.EraseSubject(context.Background(), Actor{Kind: ActorSystem}, site, Subject{AnonID: anon}); err != nil {
			t.Fatal(err)
		}
	}
	compareFunnelPartials(t, db, q, "erased")
	waitPartials(t, db)

	createGoals(t, db, pageGoal("Any", "/**"))
	if n := partialRows(t, db, ` AND basis = 'funnel'`); n != 0 {
		t.Errorf("got %d funnel partials kept after a goal was created, want 0", n)
	}
	q = defaultFunnel(t, db, from, to)
	compareFunnelPartials(t, db, q, "new goal set")
	waitPartials(t, db)

	// Keep 15 days: the cut is 2026-03-06 with the clock at the 20th.
	if _, err := db.Purge(context.Background(), 15); err != nil {
		t.Fatal(err)
	}
	cut := time.Date(2026, 3, 6, 0, 0, 0, 0, time.UTC)
	if n := partialRows(t, db, ` AND basis = 'funnel' AND day_start < ?`, cut.UnixMilli()); n != 0 {
		t.Errorf("got %d kept funnel partials of purged days, want 0", n)
	}
	compareFunnelPartials(t, db, q, "purged")
}

// TestFunnelPartialsOnlyForTheDefaultFunnel: another funnel (other steps,
// a filter, a range with a day not closed) is read as before, and keeps
// no partial.
func TestFunnelPartialsOnlyForTheDefaultFunnel(t *testing.T) {
	t.Parallel()
	db, clk, _ := openPartialsDB(t)
	ingestBatches(t, db, randomEvents(rand.New(rand.NewPCG(13, 14)), "a", 1000, 100, 12))
	createGoals(t, db, pageGoal("Blog", "/blog/*"), pageGoal("Docs", "/docs"), eventGoal("Signup", "signup"))
	from, to := partialsStart, partialsStart.AddDate(0, 0, 12)
	def := defaultFunnel(t, db, from, to)
	reversed := def
	reversed.Steps = []Goal{def.Steps[2], def.Steps[1], def.Steps[0]}
	filtered := def
	filtered.Filters = []QueryFilter{{Op: "is", Dim: "visit:country", Values: []string{"DE"}}}
	open := def
	open.To = startOfDay(clk.Now(), time.UTC).AddDate(0, 0, 1)
	for name, q := range map[string]FunnelQuery{"other steps": reversed, "filtered": filtered, "open day": open} {
		lo, _ := db.visitLookback(context.Background(), "s", q.From)
		if _, ok, err := db.funnelFromPartials(context.Background(), &q, funnelMatcherFor(t, db, q.Steps, false), lo); ok || err != nil {
			t.Errorf("%s: got from partials %v (%v), want the read", name, ok, err)
		}
		if _, err := db.Funnel(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	waitPartials(t, db)
	if n := partialRows(t, db, ` AND basis = 'funnel'`); n != 0 {
		t.Errorf("got %d funnel partials kept, want 0", n)
	}
	// A day's funnel partial is kept up to maxFunnelPartialBytes.
	for _, c := range []struct {
		size int
		want bool
	}{{maxFunnelPartialBytes, true}, {maxFunnelPartialBytes + 1, false}} {
		if got := keepPartial(funnelSetDim(def.Steps), make([]byte, c.size)); got != c.want {
			t.Errorf("a funnel partial of %d bytes: got kept %v, want %v", c.size, got, c.want)
		}
	}
}
