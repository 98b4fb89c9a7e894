package storage

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestHostnameFilterKeepsVisitsEnteredOnTheHost: an event:hostname filter
// on a breakdown by source, campaign or entry page keeps the visits that
// entered on the host, by exit page those that left on it; on other
// dimensions it keeps every visit with an event on the host, as
// Plausible's. Every read (through visits, in one query, through the event
// index, with event_pages or without, the day partials and the kept
// answers after the days closed) answers the same.
func TestHostnameFilterKeepsVisitsEnteredOnTheHost(t *testing.T) {
	t.Parallel()
	db, _, _ := openPartialsDB(t)
	day := partialsStart.AddDate(0, 0, 2)
	ev := func(anon, id, typ, u string, ref string, min int) IngestEvent {
		e := IngestEvent{ID: id, SiteID: "s", Type: typ, AnonID: anon, TS: day.Add(time.Duration(min) * time.Minute), URL: &u, Raw: []byte(`{}`)}
		if ref != "" {
			e.Referrer = &ref
		}
		return e
	}
	ingestBatches(t, db, []IngestEvent{
		// a: from Facebook to the blog, then the app, where it signs up.
		ev("a", "a1", "pageview", "https://blog.example.com/post?utm_campaign=ad", "https://facebook.com/", 0),
		ev("a", "a2", "pageview", "https://app.example.com/register", "", 5),
		ev("a", "a3", "signup", "https://app.example.com/register", "", 6),
		// b: from Google to the app, then the blog.
		ev("b", "b1", "pageview", "https://www.app.example.com/", "https://www.google.com/", 0),
		ev("b", "b2", "pageview", "https://blog.example.com/post", "", 3),
		// c: the app alone, from Bing.
		ev("c", "c1", "pageview", "https://app.example.com/pricing", "https://www.bing.com/", 10),
	})
	app := QueryFilter{Op: "is", Dim: HostnameDimension, Values: []string{"app.example.com"}}
	notApp := QueryFilter{Op: "is_not", Dim: HostnameDimension, Values: []string{"app.example.com"}}
	visitors := []string{MetricVisitors}
	cases := []struct {
		metrics, dims []string
		filters       []QueryFilter
		want          string
	}{
		{visitors, []string{"visit:source"}, []QueryFilter{app}, "[Bing: [1] Google: [1]]"},
		{visitors, []string{"visit:utm_campaign"}, []QueryFilter{app}, "[(not set): [2]]"},
		{visitors, []string{"visit:referrer"}, []QueryFilter{app}, "[bing.com: [1] google.com: [1]]"},
		{visitors, []string{"visit:entry_page"}, []QueryFilter{app}, "[/: [1] /pricing: [1]]"},
		{visitors, []string{"visit:exit_page"}, []QueryFilter{app}, "[/pricing: [1] /register: [1]]"},
		{visitors, []string{"visit:source"}, []QueryFilter{notApp}, "[Facebook: [1]]"},
		// Not an acquisition dimension: every visit with an event there.
		{visitors, []string{"visit:country"}, []QueryFilter{app}, "[(not set): [3]]"},
		{visitors, nil, []QueryFilter{app}, "[: [3]]"},
		// Session metrics of the visits that entered on the host.
		{[]string{MetricVisits, MetricBounceRate, MetricVisitDuration}, []string{"visit:source"}, []QueryFilter{app},
			"[Bing: [1 100 0] Google: [1 0 180]]"},
		{[]string{MetricVisitors, MetricPercentage}, []string{"visit:source"}, []QueryFilter{app}, "[Bing: [1 50] Google: [1 50]]"},
	}
	for _, stage := range []string{"open", "closed"} {
		if stage == "closed" {
			waitPartials(t, db)
		}
		for _, c := range cases {
			q := StatsQuery{Site: "s", From: day, To: day.AddDate(0, 0, 1), Zone: time.UTC, Metrics: c.metrics, Dimensions: c.dims, Filters: c.filters}
			reads := map[string]func(*StatsQuery){
				"through visits": func(q *StatsQuery) { q.scan = true },
				"in one read":    func(q *StatsQuery) { q.scan, q.oneRead = true, true },
				"by events":      func(q *StatsQuery) { q.scan, q.byEvents = true, true },
				"wide events":    func(q *StatsQuery) { q.scan, q.wideEvents = true, true },
				"partials":       func(*StatsQuery) {},
			}
			for name, set := range reads {
				rq := q
				set(&rq)
				rows, err := db.Stats(t.Context(), rq)
				if err != nil {
					t.Fatalf("%s %s %v %v: %v", stage, name, c.dims, c.filters, err)
				}
				slices.SortFunc(rows, func(a, b StatsRow) int { return strings.Compare(strings.Join(a.Dims, "|"), strings.Join(b.Dims, "|")) })
				var got []string
				for _, r := range rows {
					got = append(got, fmt.Sprintf("%s: %v", strings.Join(r.Dims, " "), r.Metrics))
				}
				if g := fmt.Sprint(got); g != c.want {
					t.Errorf("%s, %s: %v %v %v: got %s, want %s", stage, name, c.metrics, c.dims, c.filters, g, c.want)
				}
			}
		}
	}
}

// TestWithVisitHosts: the filters added, once, for the dimensions that
// take them, and none without an event:hostname filter at the top.
func TestWithVisitHosts(t *testing.T) {
	host := QueryFilter{Op: "contains", Dim: HostnameDimension, Values: []string{"app."}, Fold: true}
	nested := QueryFilter{Op: "or", Children: []QueryFilter{host}}
	for _, c := range []struct {
		fs   []QueryFilter
		dims []string
		want string
	}{
		{[]QueryFilter{host}, []string{"visit:source", "visit:utm_medium", "visit:exit_page"},
			"[event:hostname visit:entry_page_hostname visit:exit_page_hostname]"},
		{[]QueryFilter{host}, []string{"visit:browser", "event:page"}, "[event:hostname]"},
		{[]QueryFilter{nested}, []string{"visit:source"}, "[]"},
		{withVisitHosts([]QueryFilter{host}, []string{"visit:source"}), []string{"visit:source"}, "[event:hostname visit:entry_page_hostname]"},
	} {
		var got []string
		for _, f := range withVisitHosts(c.fs, c.dims) {
			if f.Dim != "" {
				got = append(got, f.Dim)
				if f.Op != host.Op || !f.Fold || !slices.Equal(f.Values, host.Values) {
					t.Errorf("%v: got filter %+v, want the hostname filter's operator, values and case", c.dims, f)
				}
			}
		}
		if g := fmt.Sprint(got); g != c.want && !(c.want == "[]" && got == nil) {
			t.Errorf("%v %v: got %s, want %s", c.fs, c.dims, g, c.want)
		}
	}
}
