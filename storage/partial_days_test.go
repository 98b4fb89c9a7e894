package storage

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tally-analytics/tally/internal/dbtest"
)

// partialsStart is the first day the day partial tests load; their clock
// stands at partialsNow, so every loaded day is closed.
var (
	partialsStart = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	partialsNow   = time.Date(2026, 3, 20, 12, 0, 0, 0, time.UTC)
)

func openPartialsDB(t *testing.T) (*DB, *testClock, *Workspace) {
	t.Helper()
	clk := &testClock{t: partialsNow}
	db, err := openTestDB(t, context.Background(), Options{Path: filepath.Join(t.TempDir(), "p.db"), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, clk, withSites(t, db, "s")
}

// randomEvents are n events of visitors v0..v(visitors-1) on site s over
// days days from partialsStart, in random order: pages, referrers,
// countries and types drawn at random, some visits across midnight.
func randomEvents(r *rand.Rand, prefix string, n, visitors, days int) []IngestEvent {
	pages := []string{"/", "/pricing", "/docs", "/blog/a", "/blog/b?utm_source=news&utm_campaign=spring"}
	refs := []string{"", "", "https://www.google.com/", "https://news.ycombinator.com/x"}
	countries := []string{"DE", "FR", "US", ""}
	types := []string{"pageview", "pageview", "pageview", "signup"}
	out := make([]IngestEvent, n)
	for i := range out {
		v := r.IntN(visitors)
		// Near midnight a third of the time, so visits cross it.
		ts := partialsStart.Add(time.Duration(r.IntN(days*24*3600*1000)) * time.Millisecond)
		if r.IntN(3) == 0 {
			ts = partialsStart.AddDate(0, 0, r.IntN(days)).Add(time.Duration(r.IntN(7200*1000)-3600*1000) * time.Millisecond)
		}
		url := "https://shop.test" + pages[r.IntN(len(pages))]
		e := IngestEvent{ID: fmt.Sprintf("%s-%d", prefix, i), SiteID: "s", Type: types[r.IntN(len(types))],
			AnonID: fmt.Sprintf("v%d", v), TS: ts, URL: &url, Country: countries[v%len(countries)],
			Raw: []byte(fmt.Sprintf(`{"properties":{"plan":"p%d"}}`, r.IntN(3)))}
		if ref := refs[r.IntN(len(refs))]; ref != "" {
			e.Referrer = &ref
		}
		if v%7 == 0 {
			u := fmt.Sprintf("user-%d", v)
			e.UserID = &u
		}
		out[i] = e
	}
	return out
}

func ingestBatches(t *testing.T, db *DB, events []IngestEvent) {
	t.Helper()
	for len(events) > 0 {
		n := min(len(events), 2000)
		if _, err := db.Ingest(context.Background(), events[:n], nil, nil); err != nil {
			t.Fatal(err)
		}
		events = events[n:]
	}
}

// partialRows counts site s's kept partials.
func partialRows(t *testing.T, db *DB, where string, args ...any) int {
	t.Helper()
	var n int
	if err := db.read.QueryRow(`SELECT COUNT(*) FROM day_partials WHERE site_id = 's'`+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitPartials waits until the writer has stored the partials of the
// queries run so far: a job queued after them has committed.
func waitPartials(t *testing.T, db *DB) {
	t.Helper()
	if err := db.writer.do(context.Background(), func(*writeTx) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// statsText runs q (scan: reading the tables) and renders its rows sorted,
// with visitors apart when visitorsApart, as "dims: metrics".
func statsText(t *testing.T, db *DB, q StatsQuery, scan bool) ([]string, []float64, bool) {
	t.Helper()
	q.scan = scan
	rows, estimated, err := db.StatsEstimate(context.Background(), q)
	if err != nil {
		t.Fatalf("%v %v: %v", q.Metrics, q.Dimensions, err)
	}
	slices.SortFunc(rows, func(a, b StatsRow) int { return strings.Compare(strings.Join(a.Dims, "|"), strings.Join(b.Dims, "|")) })
	var lines []string
	var visitors []float64
	at := slices.Index(q.Metrics, MetricVisitors)
	for _, r := range rows {
		m := slices.Clone(r.Metrics)
		if at >= 0 {
			visitors = append(visitors, m[at])
			m[at] = -1
		}
		if i := slices.Index(q.Metrics, MetricPercentage); i >= 0 {
			m[i] = -1 // follows visitors
		}
		lines = append(lines, fmt.Sprintf("%s: %v", strings.Join(r.Dims, " "), m))
	}
	return lines, visitors, estimated
}

// scanMemo keeps the scan's answers from one stage of a comparison to the
// next while the data has not changed (a stage that only kept the
// partials of the one before): the scan is the reference, the same for
// the same data, and the costly half of each comparison. A test takes a
// new one after each write.
type scanMemo map[string]memoAnswer

type memoAnswer struct {
	lines    []string
	visitors []float64
}

// memoKey holds every field of a query that the tests set: filters and
// goals are values (no pointers), so equal keys are equal queries.
func memoKey(q StatsQuery) string {
	return fmt.Sprintf("%s|%v|%d|%d|%v|%v|%s|%+v|%+v|%v|%v|%v|%v", q.Site, q.Zone, q.From.UnixMilli(), q.To.UnixMilli(), q.Metrics, q.Dimensions,
		q.TimeUnit, q.Filters, q.Goals, q.Imports, q.wideEvents, q.byEvents, q.oneRead)
}

// scan is statsText of the scan, from the memo when it has q's answer
// (a nil memo keeps nothing).
func (m scanMemo) scan(t *testing.T, db *DB, q StatsQuery) ([]string, []float64) {
	t.Helper()
	key := memoKey(q)
	if a, ok := m[key]; ok {
		return a.lines, a.visitors
	}
	lines, visitors, _ := statsText(t, db, q, true)
	if m != nil {
		m[key] = memoAnswer{lines, visitors}
	}
	return lines, visitors
}

// partialQueries are the unfiltered reports day partials answer.
func partialQueries(zone *time.Location, from, to time.Time) []StatsQuery {
	var out []StatsQuery
	metricSets := [][]string{
		{MetricVisitors, MetricVisits, MetricPageviews, MetricEvents, MetricViewsPerVisit, MetricBounceRate, MetricVisitDuration},
		{MetricVisitors, MetricVisits, MetricBounceRate, MetricVisitDuration, MetricPercentage},
		{MetricVisitors, MetricPageviews, MetricPercentage},
	}
	eventSets := [][]string{{MetricVisitors, MetricPageviews, MetricEvents}, {MetricVisitors, MetricPercentage}}
	for _, dims := range [][]string{nil, {"time:day"}, {"time:week"}, {"time:month"}, {"visit:source"}, {"visit:entry_page"},
		{"visit:exit_page"}, {"visit:country"}, {"time:day", "visit:source"}, {"visit:utm_campaign", "time:week"}} {
		for _, m := range metricSets {
			if dims == nil && slices.Contains(m, MetricPercentage) {
				continue
			}
			out = append(out, StatsQuery{Site: "s", From: from, To: to, Zone: zone, Metrics: m, Dimensions: dims})
		}
	}
	for _, dims := range [][]string{{"event:page"}, {"event:name"}, {"event:props:plan"}, {"time:day", "event:page"}} {
		for _, m := range eventSets {
			out = append(out, StatsQuery{Site: "s", From: from, To: to, Zone: zone, Metrics: m, Dimensions: dims})
		}
	}
	return out
}

// comparePartials checks that every partial query answers what the scan
// does (memo: the scans of the stage before when the data is the same):
// equal figures, visitors within three standard errors of the sketch
// (plus one, for tiny groups), and that the partials answered.
func comparePartials(t *testing.T, db *DB, zone *time.Location, from, to time.Time, stage string, memo scanMemo) {
	t.Helper()
	for _, q := range partialQueries(zone, from, to) {
		if _, ok := planPartials(&q); !ok {
			t.Fatalf("%s %v %v: not answered from partials", stage, q.Metrics, q.Dimensions)
		}
		got, gotV, _ := statsText(t, db, q, false)
		want, wantV := memo.scan(t, db, q)
		if !slices.Equal(got, want) {
			t.Errorf("%s %s %v %v:\ngot  %v\nwant %v", stage, zone, q.Metrics, q.Dimensions, got, want)
			continue
		}
		for i := range gotV {
			if math.Abs(gotV[i]-wantV[i]) > 3*0.0081*wantV[i]+1 {
				t.Errorf("%s %v %v row %d: got %v visitors, want %v (within 3 SE)", stage, q.Metrics, q.Dimensions, i, gotV[i], wantV[i])
			}
		}
	}
}

// TestPartialsMatchTheScan is the guard of the day partials: after random
// intake, after late events into days whose partials are kept, and after
// an erasure, every unfiltered report read from partials equals the scan
// of the tables, in UTC and in a zone with a DST change in the range.
func TestPartialsMatchTheScan(t *testing.T) {
	dbtest.SkipUnderRace(t, "data-heavy answers compared in one goroutine")
	t.Parallel()
	db, _, ws := openPartialsDB(t)
	db.hooks.exactVisitorsBelow = 0 // estimate even these few visitors
	r := rand.New(rand.NewPCG(1, 2))
	ingestBatches(t, db, randomEvents(r, "a", 3000, 300, 12))
	newYork, err := time.LoadLocation("America/New_York") // DST starts 2026-03-08
	if err != nil {
		t.Fatal(err)
	}
	for _, zone := range []*time.Location{time.UTC, newYork} {
		from := time.Date(2026, 3, 1, 0, 0, 0, 0, zone)
		to := time.Date(2026, 3, 14, 0, 0, 0, 0, zone)
		// The kept partials are compared with the scans of the fresh ones:
		// the data is the same.
		memo := scanMemo{}
		comparePartials(t, db, zone, from, to, "fresh", memo)
		waitPartials(t, db)
		if partialRows(t, db, "") == 0 {
			t.Fatal("got no kept partials, want those of the closed days")
		}
		comparePartials(t, db, zone, from, to, "kept", memo)

		ingestBatches(t, db, randomEvents(r, "late-"+zone.String(), 300, 400, 12))
		comparePartials(t, db, zone, from, to, "late events", nil)
		waitPartials(t, db)

		site, _ := db.Site("s")
		if _, err := db.EraseSubject(context.Background(), Actor{Kind: ActorSystem}, site, Subject{AnonID: "v3"}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.EraseSubject(context.Background(), Actor{Kind: ActorSystem}, site, Subject{UserID: "user-14"}); err != nil {
			t.Fatal(err)
		}
		comparePartials(t, db, zone, from, to, "erased", nil)
	}
	_ = ws
}

// TestPartialsExactBelowTenThousand: a range of fewer than 10,000 visitors
// is answered exactly (by the scan), not estimated.
func TestPartialsExactBelowTenThousand(t *testing.T) {
	t.Parallel()
	db, _, _ := openPartialsDB(t)
	var events []IngestEvent
	for v := range 9990 {
		url := "https://shop.test/p" + fmt.Sprint(v%30)
		events = append(events, IngestEvent{ID: fmt.Sprint("e", v), SiteID: "s", Type: "pageview", AnonID: fmt.Sprint("v", v),
			TS: partialsStart.Add(time.Duration(v) * 97 * time.Second), URL: &url, Raw: []byte(`{}`)})
	}
	ingestBatches(t, db, events)
	for _, dims := range [][]string{nil, {"time:day"}, {"event:page"}, {"visit:entry_page"}} {
		q := StatsQuery{Site: "s", From: partialsStart, To: partialsStart.AddDate(0, 0, 14), Zone: time.UTC,
			Metrics: []string{MetricVisitors}, Dimensions: dims}
		got, gotV, estimated := statsText(t, db, q, false)
		want, wantV, _ := statsText(t, db, q, true)
		if estimated || !slices.Equal(got, want) || !slices.Equal(gotV, wantV) {
			t.Errorf("%v: got %v %v (estimated %v), want %v %v exactly", dims, got, gotV, estimated, want, wantV)
		}
		if dims == nil && gotV[0] != 9990 {
			t.Errorf("got %v visitors, want 9990", gotV[0])
		}
	}
}

// TestPartialsEstimateAboveTenThousand: 20,000 visitors over ten days,
// each on two of them, are estimated from the days' sketches within 3%,
// and the answer says it is an estimate.
func TestPartialsEstimateAboveTenThousand(t *testing.T) {
	dbtest.SkipUnderRace(t, "data-heavy answers compared in one goroutine")
	t.Parallel()
	db, _, _ := openPartialsDB(t)
	r := rand.New(rand.NewPCG(3, 4))
	var events []IngestEvent
	for v := range 20000 {
		for k := range 2 {
			url := "https://shop.test/p" + fmt.Sprint(v%2)
			ts := partialsStart.AddDate(0, 0, r.IntN(10)).Add(time.Duration(r.IntN(86400)) * time.Second)
			events = append(events, IngestEvent{ID: fmt.Sprint("e", v, "-", k), SiteID: "s", Type: "pageview",
				AnonID: fmt.Sprint("visitor-", v), TS: ts, URL: &url, Raw: []byte(`{}`)})
		}
	}
	ingestBatches(t, db, events)
	memo := scanMemo{} // the rounds read the same data
	for _, dims := range [][]string{nil, {"event:page"}, {"visit:entry_page"}} {
		q := StatsQuery{Site: "s", From: partialsStart, To: partialsStart.AddDate(0, 0, 10), Zone: time.UTC,
			Metrics: []string{MetricVisitors, MetricPageviews}, Dimensions: dims}
		for round := range 2 { // computed, then kept
			_, gotV, estimated := statsText(t, db, q, false)
			_, wantV := memo.scan(t, db, q)
			if !estimated {
				t.Errorf("%v round %d: got an exact answer, want an estimate", dims, round)
			}
			for i := range wantV {
				if math.Abs(gotV[i]-wantV[i]) > 0.03*wantV[i] {
					t.Errorf("%v round %d row %d: got %v visitors, want %v within 3%%", dims, round, i, gotV[i], wantV[i])
				}
			}
			if dims == nil && wantV[0] != 20000 {
				t.Errorf("got %v exact visitors, want 20000", wantV[0])
			}
			waitPartials(t, db)
		}
	}
}

// dayPageviews is site s's pageviews of each UTC day, from partials.
func dayPageviews(t *testing.T, db *DB, zone *time.Location, from time.Time, days int) []string {
	t.Helper()
	q := StatsQuery{Site: "s", From: from, To: from.AddDate(0, 0, days), Zone: zone,
		Metrics: []string{MetricPageviews, MetricVisits}, Dimensions: []string{"time:day"}}
	got, _, _ := statsText(t, db, q, false)
	return got
}

// TestPartialsLateEventInvalidates: an event arriving late for a day whose
// partials are kept, and one that moves the start of a visit across
// midnight, are in the next answer.
func TestPartialsLateEventInvalidates(t *testing.T) {
	t.Parallel()
	db, _, _ := openPartialsDB(t)
	url := "https://shop.test/"
	at := func(id, anon string, ts time.Time) IngestEvent {
		return IngestEvent{ID: id, SiteID: "s", Type: "pageview", AnonID: anon, TS: ts, URL: &url, Raw: []byte(`{}`)}
	}
	ingestBatches(t, db, []IngestEvent{at("1", "a", partialsStart.Add(10*time.Hour)), at("2", "b", partialsStart.Add(24*time.Hour+5*time.Minute))})
	before := dayPageviews(t, db, time.UTC, partialsStart, 2)
	waitPartials(t, db)
	if n := partialRows(t, db, ""); n != 4 {
		t.Fatalf("got %d kept partials, want 4 (two days, two bases)", n)
	}
	if want := []string{"2026-03-01: [1 1]", "2026-03-02: [1 1]"}; !slices.Equal(before, want) {
		t.Fatalf("got %v, want %v", before, want)
	}
	// Late: a second pageview on the 1st, and b's visit now starts on
	// the 1st at 23:55 (the 2nd loses the visit it had).
	ingestBatches(t, db, []IngestEvent{at("3", "c", partialsStart.Add(11*time.Hour)), at("4", "b", partialsStart.Add(23*time.Hour+55*time.Minute))})
	got := dayPageviews(t, db, time.UTC, partialsStart, 2)
	if want := []string{"2026-03-01: [3 3]", "2026-03-02: [1 0]"}; !slices.Equal(got, want) {
		t.Errorf("got %v after late events, want %v", got, want)
	}
}

// TestPartialsErasureLeavesNoTrace: erasing a subject deletes the kept
// partials of its days, so the sketches are rebuilt from the remaining
// events and the subject is in no figure.
func TestPartialsErasureLeavesNoTrace(t *testing.T) {
	t.Parallel()
	db, _, _ := openPartialsDB(t)
	db.hooks.exactVisitorsBelow = 0
	url := "https://shop.test/"
	var events []IngestEvent
	for i, anon := range []string{"a", "b", "gone", "gone"} {
		events = append(events, IngestEvent{ID: fmt.Sprint(i), SiteID: "s", Type: "pageview", AnonID: anon,
			TS: partialsStart.Add(time.Duration(10+i) * time.Hour), URL: &url, Raw: []byte(`{}`)})
	}
	// Another day, untouched by the erasure.
	events = append(events, IngestEvent{ID: "x", SiteID: "s", Type: "pageview", AnonID: "a",
		TS: partialsStart.Add(50 * time.Hour), URL: &url, Raw: []byte(`{}`)})
	ingestBatches(t, db, events)
	q := StatsQuery{Site: "s", From: partialsStart, To: partialsStart.AddDate(0, 0, 3), Zone: time.UTC,
		Metrics: []string{MetricVisitors, MetricPageviews}, Dimensions: []string{"time:day"}}
	rows, _ := db.Stats(context.Background(), q)
	if got := fmt.Sprint(rows); got != "[{[2026-03-01] [3 4]} {[2026-03-03] [1 1]}]" {
		t.Fatalf("got %s before the erasure", got)
	}
	waitPartials(t, db)
	dayOne := ` AND day_start = ?`
	if n := partialRows(t, db, dayOne, partialsStart.UnixMilli()); n == 0 {
		t.Fatal("got no kept partial of the subject's day")
	}
	kept := partialRows(t, db, ` AND day_start <> ?`, partialsStart.UnixMilli())
	site, _ := db.Site("s")
	if _, err := db.EraseSubject(context.Background(), Actor{Kind: ActorSystem}, site, Subject{AnonID: "gone"}); err != nil {
		t.Fatal(err)
	}
	if n := partialRows(t, db, dayOne, partialsStart.UnixMilli()); n != 0 {
		t.Errorf("got %d kept partials of the subject's day after the erasure, want 0", n)
	}
	if n := partialRows(t, db, ` AND day_start <> ?`, partialsStart.UnixMilli()); n != kept {
		t.Errorf("got %d kept partials of other days, want %d (untouched)", n, kept)
	}
	rows, _ = db.Stats(context.Background(), q)
	if got := fmt.Sprint(rows); got != "[{[2026-03-01] [2 2]} {[2026-03-03] [1 1]}]" {
		t.Errorf("got %s after the erasure, want the subject in no figure", got)
	}
	// The rebuilt sketch is the one of a day that never held the subject.
	waitPartials(t, db)
	var blob []byte
	if err := db.read.QueryRow(`SELECT data FROM day_partials WHERE site_id = 's' AND day_start = ? AND dim = '' AND basis = 'events'`,
		partialsStart.UnixMilli()).Scan(&blob); err != nil {
		t.Fatal(err)
	}
	clean := newVisitorSketch()
	clean.Add("a")
	clean.Add("b")
	want, _ := clean.MarshalBinary()
	decodePartial(blob, func(_ string, _ [4]float64, sk []byte) {
		if string(sk) != string(want) {
			t.Errorf("got sketch %x, want %x (of a and b alone)", sk, want)
		}
	})
}

// TestPartialsRetention: a purge deletes the kept partials of the purged
// days.
func TestPartialsRetention(t *testing.T) {
	t.Parallel()
	db, clk, _ := openPartialsDB(t)
	r := rand.New(rand.NewPCG(5, 6))
	ingestBatches(t, db, randomEvents(r, "a", 500, 50, 10))
	from := partialsStart
	comparePartials(t, db, time.UTC, from, from.AddDate(0, 0, 10), "before", nil)
	waitPartials(t, db)
	// Keep 15 days: the cut is 2026-03-06 with the clock at the 20th.
	if _, err := db.Purge(context.Background(), 15); err != nil {
		t.Fatal(err)
	}
	cut := time.Date(2026, 3, 6, 0, 0, 0, 0, time.UTC)
	if n := partialRows(t, db, ` AND day_start < ?`, cut.UnixMilli()); n != 0 {
		t.Errorf("got %d kept partials of purged days, want 0", n)
	}
	comparePartials(t, db, time.UTC, from, from.AddDate(0, 0, 10), "after", nil)
	_ = clk
}

// TestPartialsTimeZone: partials are per zone; changing the site's zone
// drops the old zone's, and answers in the new zone match the scan.
func TestPartialsTimeZone(t *testing.T) {
	t.Parallel()
	db, _, _ := openPartialsDB(t)
	r := rand.New(rand.NewPCG(7, 8))
	ingestBatches(t, db, randomEvents(r, "a", 500, 50, 10))
	comparePartials(t, db, time.UTC, partialsStart, partialsStart.AddDate(0, 0, 10), "utc", nil)
	waitPartials(t, db)
	if n := partialRows(t, db, ` AND zone = 'UTC'`); n == 0 {
		t.Fatal("got no kept partials in UTC")
	}
	site, _ := db.Site("s")
	zone := "Asia/Kolkata"
	if _, err := db.UpdateSite(context.Background(), Actor{Kind: ActorSystem}, site, SiteChange{TimeZone: &zone}); err != nil {
		t.Fatal(err)
	}
	if n := partialRows(t, db, ` AND zone = 'UTC'`); n != 0 {
		t.Errorf("got %d kept partials of the old zone, want 0", n)
	}
	kolkata, _ := time.LoadLocation(zone)
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, kolkata)
	memo := scanMemo{}
	comparePartials(t, db, kolkata, from, from.AddDate(0, 0, 10), "kolkata", memo)
	waitPartials(t, db)
	comparePartials(t, db, kolkata, from, from.AddDate(0, 0, 10), "kolkata kept", memo)
}

// TestPartialStoreRefusedAfterAChange: a partial whose reads began before
// a write to its day committed is not kept: it lacks the write, whose
// deletion of the day's partials came before the partial was stored.
func TestPartialStoreRefusedAfterAChange(t *testing.T) {
	t.Parallel()
	db, _, _ := openPartialsDB(t)
	url := "https://shop.test/"
	at := func(id string, ts time.Time) IngestEvent {
		return IngestEvent{ID: id, SiteID: "s", Type: "pageview", AnonID: id, TS: ts, URL: &url, Raw: []byte(`{}`)}
	}
	ingestBatches(t, db, []IngestEvent{at("1", partialsStart.Add(time.Hour))})
	// The writer is held; an intake of day one waits in its queue.
	release, running := make(chan struct{}), make(chan struct{})
	blocker := db.writer.newJob(1, func(*writeTx) error { close(running); <-release; return nil })
	if err := db.writer.Enqueue(context.Background(), blocker, false); err != nil {
		t.Fatal(err)
	}
	<-running
	intake := make(chan error, 1)
	go func() {
		_, err := db.Ingest(context.Background(), []IngestEvent{at("2", partialsStart.Add(2*time.Hour))}, nil, nil)
		intake <- err
	}()
	for db.writer.Queued() == 0 {
		time.Sleep(time.Millisecond) // waits for the intake to be queued
	}
	// Day one is read now, without the intake, and its store is queued
	// after it.
	days, _ := localDays(partialsStart, partialsStart.AddDate(0, 0, 1), time.UTC)
	if _, err := db.dayPartials(context.Background(), "s", time.UTC, days, "", nil, basisEvents, false, partialsNow); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-intake; err != nil {
		t.Fatal(err)
	}
	waitPartials(t, db)
	if n := partialRows(t, db, ""); n != 0 {
		t.Errorf("got %d kept partials read before a change, want 0", n)
	}
	// Read again, after the change: kept.
	if _, err := db.dayPartials(context.Background(), "s", time.UTC, days, "", nil, basisEvents, false, partialsNow); err != nil {
		t.Fatal(err)
	}
	waitPartials(t, db)
	if n := partialRows(t, db, ""); n != 1 {
		t.Errorf("got %d kept partials read after the change, want 1", n)
	}
}

// TestPartialsGoWithTheSiteData: a dev reset of the site and a site
// deletion leave none of its kept partials.
func TestPartialsGoWithTheSiteData(t *testing.T) {
	t.Parallel()
	db, _, ws := openPartialsDB(t)
	warm := func() {
		t.Helper()
		ingestBatches(t, db, randomEvents(rand.New(rand.NewPCG(9, 9)), "a", 200, 20, 5))
		q := StatsQuery{Site: "s", From: partialsStart, To: partialsStart.AddDate(0, 0, 5), Zone: time.UTC,
			Metrics: []string{MetricPageviews}, Dimensions: []string{"time:day"}}
		if _, err := db.Stats(context.Background(), q); err != nil {
			t.Fatal(err)
		}
		waitPartials(t, db)
		if partialRows(t, db, "") == 0 {
			t.Fatal("got no kept partials, want some")
		}
	}
	warm()
	if _, err := db.ResetSiteData(context.Background(), "s"); err != nil {
		t.Fatal(err)
	}
	if n := partialRows(t, db, ""); n != 0 {
		t.Errorf("got %d kept partials after a reset of the site, want 0", n)
	}
	warm()
	if _, err := db.ResetData(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := partialRows(t, db, ""); n != 0 {
		t.Errorf("got %d kept partials after a reset, want 0", n)
	}
	warm()
	if err := db.DeleteSite(context.Background(), Actor{Kind: ActorSystem}, ws, "s"); err != nil {
		t.Fatal(err)
	}
	if n := partialRows(t, db, ""); n != 0 {
		t.Errorf("got %d kept partials after the site's deletion, want 0", n)
	}
}

// A stored partial that does not decode (a damaged file) is answered by
// the scan, not with an error.
func TestDamagedPartialFallsBackToTheScan(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	url := "https://shop.test/"
	var evs []IngestEvent
	for i := range 3 {
		evs = append(evs, IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), SiteID: "s", Type: "pageview",
			AnonID: fmt.Sprint("v", i), TS: day.Add(time.Duration(i) * time.Hour), URL: &url, Raw: []byte(`{}`)})
	}
	if _, err := db.Ingest(context.Background(), evs, nil, nil); err != nil {
		t.Fatal(err)
	}
	q := StatsQuery{Site: "s", From: day, To: day.AddDate(0, 0, 2), Zone: time.UTC, Metrics: []string{MetricPageviews}}
	if _, err := db.Stats(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	// The query stores its partials in a job it does not wait for.
	for n := 0; n == 0; {
		if err := db.read.QueryRow(`SELECT COUNT(*) FROM day_partials WHERE site_id = 's'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		runtime.Gosched()
	}
	err := db.writer.do(context.Background(), func(tx *writeTx) error {
		_, err := tx.Exec(`UPDATE day_partials SET data = ? WHERE site_id = 's'`, []byte{0xff})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := db.Stats(context.Background(), q)
	if err != nil {
		t.Fatalf("got %v, want the scan's answer", err)
	}
	if len(rows) != 1 || rows[0].Metrics[0] != 3 {
		t.Errorf("got %+v, want 3 pageviews", rows)
	}
}

// TestPartialsBehindUTCKeepTheDayBefore: in a zone behind UTC a local day
// shares its last UTC date with the next local day; an event of the next
// day leaves the day's kept partials be (writers name UTC hours, not
// dates), and an event in the day's last hours still drops them.
func TestPartialsBehindUTCKeepTheDayBefore(t *testing.T) {
	t.Parallel()
	db, _, _ := openPartialsDB(t)
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	url := "https://shop.test/"
	at := func(id, anon string, ts time.Time) IngestEvent {
		return IngestEvent{ID: id, SiteID: "s", Type: "pageview", AnonID: anon, TS: ts, URL: &url, Raw: []byte(`{}`)}
	}
	day := time.Date(2026, 3, 10, 0, 0, 0, 0, ny) // UTC 04:00 on the 10th to 04:00 on the 11th
	ingestBatches(t, db, []IngestEvent{at("1", "a", day.Add(12*time.Hour))})
	if got, want := dayPageviews(t, db, ny, day, 1), []string{"2026-03-10: [1 1]"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	waitPartials(t, db)
	dayRows := ` AND day_start = ?`
	kept := partialRows(t, db, dayRows, day.UnixMilli())
	if kept == 0 {
		t.Fatal("got no kept partial of the day")
	}
	// The next local day, on the same UTC date as the day's last hours.
	ingestBatches(t, db, []IngestEvent{at("2", "b", day.Add(30*time.Hour))})
	if got := partialRows(t, db, dayRows, day.UnixMilli()); got != kept {
		t.Errorf("got %d kept partials of the day after an event of the next, want %d", got, kept)
	}
	// The day's own last hour (03:30 UTC on the 11th).
	ingestBatches(t, db, []IngestEvent{at("3", "c", day.Add(23*time.Hour+30*time.Minute))})
	if got := partialRows(t, db, dayRows, day.UnixMilli()); got != 0 {
		t.Errorf("got %d kept partials of the day after an event of its last hour, want 0", got)
	}
	if got, want := dayPageviews(t, db, ny, day, 2), []string{"2026-03-10: [2 2]", "2026-03-11: [1 1]"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestPartialGensFoldHours: hourly change counts are folded into daily
// ones as they age, and the count of any range still moves with every
// change inside it and never goes back.
func TestPartialGensFoldHours(t *testing.T) {
	t.Parallel()
	g := &partialGens{}
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	const hours = 300
	type span struct{ from, to time.Time }
	var spans []span
	for i := 0; i < hours; i++ {
		spans = append(spans, span{base.Add(time.Duration(i) * time.Hour), base.Add(time.Duration(i+1) * time.Hour)})
	}
	for d := 0; d < hours/24+1; d++ {
		spans = append(spans, span{base.AddDate(0, 0, d), base.AddDate(0, 0, d+1)})
	}
	last := make([]uint64, len(spans))
	for i := 0; i < hours; i++ {
		at := base.Add(time.Duration(i) * time.Hour)
		g.bump("s", at.Format(hourKeyLayout))
		for k, sp := range spans {
			n := g.daysGen("s", sp.from, sp.to)
			if n < last[k] {
				t.Fatalf("bump %d: span %v: got %d, want at least %d", i, sp.from, n, last[k])
			}
			if !at.Before(sp.from) && at.Before(sp.to) && n == last[k] {
				t.Fatalf("bump %d: span %v holding it: got %d unchanged", i, sp.from, n)
			}
			last[k] = n
		}
		if n := len(g.hours["s"]); n > maxGenHours+1 {
			t.Fatalf("bump %d: got %d hourly counts, want at most %d", i, n, maxGenHours+1)
		}
	}
}

// TestPartialsFollowAVisitAcrossDays: the events of a visit are grouped by
// the visit's attributes in the partials of every day it runs over, so a
// late event that moves the visit's start (and so its entry page) drops
// the kept partials of each of those days, not only of the day it lands in.
func TestPartialsFollowAVisitAcrossDays(t *testing.T) {
	t.Parallel()
	db, _, _ := openPartialsDB(t)
	at := func(id, path string, ts time.Time) IngestEvent {
		url := "https://shop.test" + path
		return IngestEvent{ID: id, SiteID: "s", Type: "pageview", AnonID: "v", TS: ts, URL: &url, Raw: []byte(`{}`)}
	}
	// One visit of three days: each event within the session gap of the
	// one before.
	var visit []IngestEvent
	for i, ts := 0, partialsStart.Add(23*time.Hour+50*time.Minute); ts.Before(partialsStart.Add(49 * time.Hour)); i, ts = i+1, ts.Add(20*time.Minute) {
		visit = append(visit, at(fmt.Sprintf("e%d", i), "/p", ts))
	}
	ingestBatches(t, db, visit)
	for day := 1; day <= 2; day++ {
		from := partialsStart.AddDate(0, 0, day)
		q := StatsQuery{Site: "s", From: from, To: from.AddDate(0, 0, 1), Zone: time.UTC,
			Metrics: []string{MetricPageviews}, Dimensions: []string{"visit:entry_page"}}
		if got, want := fmt.Sprint(statsText(t, db, q, false)), fmt.Sprint(statsText(t, db, q, true)); got != want {
			t.Fatalf("day %d before: got %s, want %s", day, got, want)
		}
	}
	waitPartials(t, db)
	// Late: the visit now starts ten minutes earlier, on /landing.
	ingestBatches(t, db, []IngestEvent{at("late", "/landing", partialsStart.Add(23*time.Hour+40*time.Minute))})
	for day := 1; day <= 2; day++ {
		from := partialsStart.AddDate(0, 0, day)
		q := StatsQuery{Site: "s", From: from, To: from.AddDate(0, 0, 1), Zone: time.UTC,
			Metrics: []string{MetricPageviews}, Dimensions: []string{"visit:entry_page"}}
		got, _, _ := statsText(t, db, q, false)
		want, _, _ := statsText(t, db, q, true)
		if !slices.Equal(got, want) || len(want) != 1 || !strings.HasPrefix(want[0], "/landing:") {
			t.Errorf("day %d after the late event: got %v, want %v (every pageview under /landing)", day, got, want)
		}
	}
}
