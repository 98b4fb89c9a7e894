package server

import (
	"fmt"
	"testing"
)

// TestImportedGoals: the rules of imported days in goal queries that the
// port of Plausible's tests does not hold (docs/query-api.md, imported
// days): a goal only imported is listed; a page goal counts the imported
// pages its wildcard matches, an imported row once however many goals of
// a filter it matches; a query the rollups cannot answer (another
// dimension, two kinds of goals filtered on, a goal with a property, a
// revenue metric) is answered from the site's own events and says so.
func TestImportedGoals(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	imports := []pimport{portImp("custom_events", hEvents, "2021-01-01,Signup,4,6", "2021-01-01,Purchase,1,1"),
		portImp("pages", hPages, "2021-01-01,/blog/a,2,3", "2021-01-01,/blog/b,1,0", "2021-01-01,/about,5,5"),
		portImp("visitors", hVisitors, "2021-01-01,10,8,0,10,0")}
	goals := []pgoal{{event: "Purchase"}, {event: "Signup"}, {page: "/blog/*"}, {page: "/blog/a"}, {event: "Buy", prop: []string{"plan", "pro"}}}
	events := []pev{ce("Purchase", at("2021-01-01 00:00:00"))}
	included := `{"imports_included":true}`
	unsupported := `{"imports_included":false,"imports_skip_reason":"unsupported_query"}`
	cases := []portCase{
		{name: "a goal only imported is listed", goals: goals[:3], imports: imports, events: events,
			query: `{"metrics":["visitors","events"],"date_range":"all","dimensions":["event:goal"],"include":{"imports":true}}`,
			want:  `[{"dimensions":["Signup"],"metrics":[4,6]},{"dimensions":["Visit /blog/*"],"metrics":[3,3]},{"dimensions":["Purchase"],"metrics":[2,2]}]`, meta: included},
		{name: "asked for pageviews, a page goal leaves out a page of none", goals: goals[:3], imports: imports, events: events,
			query: `{"metrics":["visitors","pageviews","conversion_rate"],"date_range":"all","filters":[["is","event:goal",["Visit /blog/*"]]],"include":{"imports":true}}`,
			want:  `[{"dimensions":[],"metrics":[2,3,18.18]}]`, meta: included},
		{name: "an imported page counts once in a filter of two goals", goals: goals[:4], imports: imports, events: events,
			query: `{"metrics":["visitors","events"],"date_range":"all","filters":[["contains","event:goal",["blog"]]],"include":{"imports":true}}`,
			want:  `[{"dimensions":[],"metrics":[3,3]}]`, meta: included},
		{name: "another dimension", goals: goals[:3], imports: imports, events: events,
			query: `{"metrics":["visitors"],"date_range":"all","dimensions":["time:day"],"filters":[["is","event:goal",["Signup"]]],"include":{"imports":true}}`,
			want:  `[]`, meta: unsupported},
		{name: "goals of two kinds filtered on", goals: goals[:3], imports: imports, events: events,
			query: `{"metrics":["visitors"],"date_range":"all","filters":[["is","event:goal",["Purchase","Visit /blog/*"]]],"include":{"imports":true}}`,
			want:  portAgg("1"), meta: unsupported},
		{name: "a goal with a property", goals: goals, imports: imports, events: events,
			query: `{"metrics":["visitors"],"date_range":"all","dimensions":["event:goal"],"include":{"imports":true}}`,
			want:  `[{"dimensions":["Purchase"],"metrics":[1]}]`, meta: unsupported},
		{name: "a revenue metric", goals: goals[:3], imports: imports, events: events,
			query:  `{"metrics":["visitors","total_revenue"],"date_range":"all","filters":[["is","event:goal",["Purchase"]]],"include":{"imports":true}}`,
			status: 0, meta: unsupported},
	}
	site := ""
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			loaded := i > 0 && c.portData() == cases[i-1].portData()
			if !loaded {
				site = fmt.Sprintf("g%d", i)
			}
			if diff := portRun(t, h, tn, site, loaded, c); diff != "" {
				t.Errorf("%s", diff)
			}
		})
	}
}
