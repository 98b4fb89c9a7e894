package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestGoalsInOneRead: a breakdown by goal in one read (StatsQuery.Goals)
// answers, goal by goal, what a read filtered on each goal does, an event
// completing two goals counting in both; through event_pages and the wide
// rows, in two halves and in one query.
func TestGoalsInOneRead(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	ingestBatches(t, db, eventPagesFixture())
	from := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	goals := []Goal{{EventName: "click"}, {PagePath: "/blog/*"}, {PagePath: "/docs"}, {EventName: "signup"}, {PagePath: "/**"}, {EventName: "none"}}
	var filters []QueryFilter
	for _, g := range goals {
		filters = append(filters, GoalFilter(g))
	}
	for _, dims := range [][]string{nil, {"visit:country"}, {"event:page"}} {
		for _, fs := range [][]QueryFilter{nil, {{Op: "is_not", Dim: "visit:country", Values: []string{"US"}}}} {
			base := StatsQuery{Site: "s", From: from, To: from.AddDate(0, 0, 1), Zone: time.UTC, scan: true,
				Metrics: []string{MetricVisitors, MetricPageviews, MetricEvents}, Dimensions: dims, Filters: fs}
			var want []string
			for i, f := range filters {
				q := base
				q.Filters = append(slices.Clone(fs), f)
				rows, err := db.Stats(context.Background(), q)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rows {
					if len(dims) == 0 && r.Metrics[2] == 0 {
						continue
					}
					want = append(want, fmt.Sprint(fmt.Sprint(i)+" ", r.Dims, r.Metrics))
				}
			}
			slices.Sort(want)
			for _, wide := range []bool{false, true} {
				for _, one := range []bool{false, true} {
					q := base
					q.Dimensions = append([]string{GoalDimension}, dims...)
					q.Goals, q.wideEvents, q.oneRead, q.scan = filters, wide, one, false
					rows, err := db.Stats(context.Background(), q)
					if err != nil {
						t.Fatal(err)
					}
					var got []string
					for _, r := range rows {
						got = append(got, fmt.Sprint(r.Dims[0]+" ", r.Dims[1:], r.Metrics))
					}
					slices.Sort(got)
					if !slices.Equal(got, want) {
						t.Errorf("wide %v, one read %v, by %v, %v: got %s, want %s", wide, one, dims, fs, strings.Join(got, "; "), strings.Join(want, "; "))
					}
				}
			}
		}
	}
}
