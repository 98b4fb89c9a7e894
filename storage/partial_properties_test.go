package storage

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestPropertyPartialsKeptOnlyWhenFew: a day's partial of a custom property
// is kept with up to maxPropPartialValues distinct values and not with
// one more (docs/query-api.md#how-reports-stay-fast); either way the
// answers from partials equal the scan's, and a day not kept is computed
// again by the next report.
func TestPropertyPartialsKeptOnlyWhenFew(t *testing.T) {
	t.Parallel()
	db, _, _ := openPartialsDB(t)
	db.hooks.exactVisitorsBelow = 0
	// Day 1: maxPropPartialValues distinct order ids; day 2: one more.
	// Every event also carries one of two plans.
	var events []IngestEvent
	for day, n := range []int{maxPropPartialValues, maxPropPartialValues + 1} {
		for i := range n {
			url := "https://shop.test/checkout"
			events = append(events, IngestEvent{ID: fmt.Sprintf("e%d-%d", day, i), SiteID: "s", Type: "purchase",
				AnonID: fmt.Sprintf("v%d", i%400), TS: partialsStart.AddDate(0, 0, day).Add(time.Duration(i) * time.Second), URL: &url,
				Raw: []byte(fmt.Sprintf(`{"properties":{"order":"o-%d-%d","plan":"p%d"}}`, day, i, i%2))})
		}
	}
	ingestBatches(t, db, events)
	days, _ := localDays(partialsStart, partialsStart.AddDate(0, 0, 2), time.UTC)
	for _, tc := range []struct {
		dim  string
		kept []bool
	}{
		{"event:props:order", []bool{true, false}},
		{"event:props:plan", []bool{true, true}},
	} {
		q := StatsQuery{Site: "s", Zone: time.UTC, From: days[0].start, To: days[1].end,
			Metrics: []string{MetricVisitors, MetricEvents}, Dimensions: []string{tc.dim}}
		got, _, estimated := statsText(t, db, q, false)
		want, _, _ := statsText(t, db, q, true)
		if !estimated || !slices.Equal(got, want) {
			t.Errorf("%s: got %d rows (from partials %v), want the scan's %d", tc.dim, len(got), estimated, len(want))
		}
		waitPartials(t, db)
		for i, d := range days {
			n := partialRows(t, db, ` AND dim = ? AND day_start = ?`, tc.dim, d.start.UnixMilli())
			if got := n == 1; got != tc.kept[i] {
				t.Errorf("%s day %d: got kept %v, want %v", tc.dim, i+1, got, tc.kept[i])
			}
		}
	}
	// The day not kept is computed again, and still answers right.
	computed := db.partialDaysComputed()
	if _, err := db.dayPartials(context.Background(), "s", time.UTC, days, "event:props:order", nil, basisEvents, false, partialsNow); err != nil {
		t.Fatal(err)
	}
	if n := db.partialDaysComputed() - computed; n != 1 {
		t.Errorf("got %d days computed again, want 1 (the day of too many values)", n)
	}
}

// TestPropertyPartialsOnlyOfHeldNames: a report by a custom property that
// no event of the range has keeps no day partials, so a read key naming
// random properties fills nothing (issue 29, item 7), while a property the
// events have keeps one a day; both answer as the scan does.
func TestPropertyPartialsOnlyOfHeldNames(t *testing.T) {
	t.Parallel()
	db, _, _ := openPartialsDB(t)
	db.hooks.exactVisitorsBelow = 0
	const days = 10
	var events []IngestEvent
	for d := range days {
		url := "https://shop.test/"
		events = append(events, IngestEvent{ID: fmt.Sprint("e", d), SiteID: "s", Type: "pageview", AnonID: fmt.Sprint("v", d),
			TS: partialsStart.AddDate(0, 0, d).Add(time.Hour), URL: &url, Raw: []byte(`{"properties":{"plan":"pro"}}`)})
	}
	ingestBatches(t, db, events)
	names := []string{"plan"}
	for i := range 20 {
		names = append(names, fmt.Sprintf("random-%d", i))
	}
	for _, name := range names {
		q := StatsQuery{Site: "s", Zone: time.UTC, From: partialsStart, To: partialsStart.AddDate(0, 0, days),
			Metrics: []string{MetricVisitors, MetricEvents}, Dimensions: []string{PropPrefix + name}}
		got, _, _ := statsText(t, db, q, false)
		want, _, _ := statsText(t, db, q, true)
		if !slices.Equal(got, want) {
			t.Errorf("%s: got %v, want the scan's %v", name, got, want)
		}
	}
	waitPartials(t, db)
	if n := partialRows(t, db, ` AND dim = ?`, PropPrefix+"plan"); n != days {
		t.Errorf("got %d partials of event:props:plan, want one a day, %d", n, days)
	}
	if n := partialRows(t, db, ` AND dim LIKE ? AND dim <> ?`, PropPrefix+"%", PropPrefix+"plan"); n != 0 {
		t.Errorf("got %d partials of properties no event has, want 0", n)
	}
}
