package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func (c *reportCache) hitCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits
}

// TestReportCacheFollowsThePartials: a report of closed days is answered
// from the cache until a partial of one of its days changes (a late event
// on one of its days, an erasure, a time-zone change), and stays cached
// when only another day changes (today's events).
func TestReportCacheFollowsThePartials(t *testing.T) {
	t.Parallel()
	db, _, _ := openPartialsDB(t)
	db.hooks.exactVisitorsBelow = 0
	url := "https://shop.test/"
	n := 0
	event := func(anon string, ts time.Time) IngestEvent {
		n++
		return IngestEvent{ID: fmt.Sprint("e", n), SiteID: "s", Type: "pageview", AnonID: anon, TS: ts, URL: &url, Raw: []byte(`{}`)}
	}
	ingestBatches(t, db, []IngestEvent{event("a", partialsStart.Add(10*time.Hour)), event("b", partialsStart.Add(30*time.Hour))})
	q := StatsQuery{Site: "s", From: partialsStart, To: partialsStart.AddDate(0, 0, 3), Zone: time.UTC,
		Metrics: []string{MetricVisitors, MetricPageviews}, Dimensions: []string{"event:page"}}
	ask := func(stage string, want string, cached bool) {
		t.Helper()
		hits := db.reports.hitCount()
		rows, err := db.Stats(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(rows); got != want {
			t.Errorf("%s: got %s, want %s", stage, got, want)
		}
		if got := db.reports.hitCount() > hits; got != cached {
			t.Errorf("%s: got from the cache %v, want %v", stage, got, cached)
		}
	}
	ask("first", "[{[/] [2 2]}]", false)
	ask("again", "[{[/] [2 2]}]", true)
	ingestBatches(t, db, []IngestEvent{event("c", partialsNow)})
	ask("today's event", "[{[/] [2 2]}]", true)
	ingestBatches(t, db, []IngestEvent{event("c", partialsStart.Add(50*time.Hour))})
	ask("late event in the range", "[{[/] [3 3]}]", false)
	ask("again", "[{[/] [3 3]}]", true)
	site, _ := db.Site("s")
	if _, err := db.EraseSubject(context.Background(), Actor{Kind: ActorSystem}, site, Subject{AnonID: "a"}); err != nil {
		t.Fatal(err)
	}
	ask("erasure", "[{[/] [2 2]}]", false)
	ask("again", "[{[/] [2 2]}]", true)
	if _, err := db.UpdateSite(context.Background(), Actor{Kind: ActorSystem}, site, SiteChange{TimeZone: ptr("Europe/Berlin")}); err != nil {
		t.Fatal(err)
	}
	ask("time zone change", "[{[/] [2 2]}]", false)
}

// TestReportCacheIsBounded: however many answers are put, the cache holds
// at most reportCacheBytes, the most recent kept.
func TestReportCacheIsBounded(t *testing.T) {
	t.Parallel()
	var c reportCache
	big := func(i int) *cachedReport {
		r := &cachedReport{key: fmt.Sprint("report-", i), answer: &basisAnswer{}}
		for k := range 5000 {
			r.answer.keys = append(r.answer.keys, strings.Repeat("p", 40)+fmt.Sprint(k))
			r.answer.groups = append(r.answer.groups, basisGroup{})
		}
		return r
	}
	for i := range 200 {
		c.put(big(i))
	}
	entries, bytes := c.size()
	if bytes > reportCacheBytes || entries == 0 || entries == 200 {
		t.Errorf("got %d answers of %d bytes, want some, at most %d bytes", entries, bytes, reportCacheBytes)
	}
	if _, ok := c.get("report-199", 0); !ok {
		t.Error("got the last answer evicted, want it kept")
	}
	if _, ok := c.get("report-0", 0); ok {
		t.Error("got the first answer kept, want it evicted")
	}
}

// ForgetPartials without rows empties the report cache only: the next
// report reads the kept partials, computing none, on either backend (on
// PostgreSQL a change counted in the database would make every kept
// partial of the site be computed again).
func TestForgetReportsKeepsThePartials(t *testing.T) {
	t.Parallel()
	db, _, _ := openPartialsDB(t)
	db.hooks.exactVisitorsBelow = 0
	ingestBatches(t, db, randomEvents(rand.New(rand.NewPCG(3, 4)), "a", 300, 40, 5))
	q := StatsQuery{Site: "s", From: partialsStart, To: partialsStart.AddDate(0, 0, 5), Zone: time.UTC,
		Metrics: []string{MetricVisitors, MetricPageviews}, Dimensions: []string{"event:page"}}
	first, _, _ := statsText(t, db, q, false)
	waitPartials(t, db)
	if err := db.ForgetPartials(context.Background(), "s", false); err != nil {
		t.Fatal(err)
	}
	computed := db.partialDaysComputed()
	hits := db.reports.hitCount()
	again, _, estimated := statsText(t, db, q, false)
	if !slices.Equal(again, first) || !estimated {
		t.Errorf("got %v (from partials %v), want %v from partials", again, estimated, first)
	}
	if db.reports.hitCount() > hits {
		t.Error("got the answer from the report cache, want it emptied")
	}
	if n := db.partialDaysComputed() - computed; n != 0 {
		t.Errorf("got %d day partials computed after ForgetPartials without rows, want 0 (kept ones read)", n)
	}
}
