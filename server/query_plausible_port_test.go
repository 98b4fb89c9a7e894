package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tally-analytics/tally/internal/dbtest"
)

// TestQueryPlausiblePort runs Tally's port of Plausible's own tests of the
// Stats API v2 (plausible/analytics,
// test/plausible_web/controllers/api/external_stats_controller/query_*_test.exs;
// docs/query-api.md#plausible-test-port): each case is one Plausible test
// (or one query of it), its fixture sent through Plausible's /api/event,
// its query to POST /api/v2/query, its expected results and meta
// unchanged. A case with a gap is one Tally answers otherwise today, for
// the reason given: the test asserts that it still does, so the fix of a
// gap fails here and says to remove the field.
func TestQueryPlausiblePort(t *testing.T) {
	dbtest.SkipUnderRace(t, "data-heavy answers compared in one goroutine")
	t.Parallel()
	h := newHarness(t, portGeo(t))
	tn := h.setupTenant("acme", "web")
	cases := portCases()
	var same, gaps int
	sites := map[string]string{} // a case's data: its site
	for i, c := range cases {
		t.Run(c.from+"/"+c.name, func(t *testing.T) {
			site, loaded := sites[c.portData()]
			if !loaded {
				site = fmt.Sprintf("p%03d", i)
				sites[c.portData()] = site
			}
			diff := portRun(t, h, tn, site, loaded, c)
			switch {
			case c.gap == "" && diff != "":
				t.Errorf("%s", diff)
			case c.gap != "" && diff == "":
				t.Errorf("gap %q: Tally now answers as Plausible does; remove the case's gap field", c.gap)
			case c.gap != "":
				gaps++
				t.Logf("known gap (%s): %s", c.gap, diff)
			default:
				same++
			}
		})
	}
	t.Logf("%d cases over %d sites: %d answered as Plausible does, %d known gaps", len(cases), len(sites), same, gaps)
}

// portAgg is the results of an aggregate query: one row of metrics.
func portAgg(metrics string) string { return `[{"dimensions":[],"metrics":[` + metrics + `]}]` }

// The Plausible test files the cases come from.
const (
	fQuery          = "query"
	fSpecial        = "query_special_metrics"
	fGoalDim        = "query_goal_dimension"
	fComparison     = "query_comparisons"
	fImported       = "query_imported"
	fValidation     = "query_validations"
	fGoalProps      = "query_goal_custom_props"
	fTimezone       = "query_timezone"
	fGoalPropsVisit = "query_goal_custom_props_visit_dimensions"
	// Outside external_stats_controller: the dashboard API's query test
	// (stats_controller) and the query parser's (test/plausible/stats).
	fStatsQuery = "stats_controller/query"
	fParseBuild = "query_parse_and_build"
)

// twitterName is the source of a twitter.com referrer (or utm_source=twitter), as Plausible's
// ingestion names it, where Plausible's fixture stores "Twitter".
const twitterName = "X (Twitter)"

// portCases is the port, in the order of Plausible's files.
func portCases() []portCase {
	const full = `"metrics":["pageviews","visitors","bounce_rate","visit_duration"],"date_range":"all"`
	var cs []portCase
	add := func(c ...portCase) { cs = append(cs, c...) }

	// query_test.exs: aggregates.
	add(portCase{from: fQuery, name: "aggregates a single metric",
		events: []pev{pv(u(7), at("2021-01-01 00:00:00")), pv(u(7), at("2021-01-01 00:25:00")), pv(at("2021-01-01 00:00:00"))},
		query:  `{"metrics":["pageviews"],"date_range":"all"}`, want: portAgg("3")},
		portCase{from: fQuery, name: "aggregate views_per_visit rounds to two decimal places",
			events: []pev{pv(u(7), at("2021-01-01 00:00:00")), pv(u(7), at("2021-01-01 00:25:00")),
				pv(u(8), at("2021-01-01 00:00:00")), pv(u(8), at("2021-01-01 00:25:00")), pv(at("2021-01-01 00:00:00"))},
			query: `{"metrics":["views_per_visit"],"date_range":"all"}`, want: portAgg("1.67")},
		portCase{from: fQuery, name: "aggregates all metrics in a single query",
			events: []pev{pv(u(7), at("2021-01-01 00:00:00")), pv(u(7), at("2021-01-01 00:25:00")), pv(at("2021-01-01 00:00:00"))},
			query:  `{"metrics":["pageviews","visits","views_per_visit","visitors","bounce_rate","visit_duration"],"date_range":"all"}`,
			want:   portAgg("3, 2, 1.5, 2, 50, 750")},
	)

	// query_test.exs: "aggregation with filters".
	filter := func(name string, attr popt, f string) portCase {
		return portCase{from: fQuery, name: name, events: filterTrio(attr),
			query: `{` + full + `,"filters":[` + f + `]}`, want: portAgg("2, 1, 0, 1500")}
	}
	add(filter("can filter by source", src("Google"), `["is","visit:source",["Google"]]`),
		filter("can filter by channel", src("Google"), `["is","visit:channel",["Organic Search"]]`),
		portCase{from: fQuery, name: "can filter by no source/referrer",
			events: []pev{pv(u(7), at("2021-01-01 00:00:00")), pv(u(7), at("2021-01-01 00:25:00")), pv(src("Google"), at("2021-01-01 00:00:00"))},
			query:  `{` + full + `,"filters":[["is","visit:source",["Direct / None"]]]}`, want: portAgg("2, 1, 0, 1500")},
		// Adapted: Plausible's fixture stores referrer "https://facebook.com" as sent; its ingestion,
		// as Tally's, keeps host and path (Source.format_referrer), so the filter names "facebook.com".
		filter("can filter by referrer", ref("https://facebook.com"), `["is","visit:referrer",["facebook.com"]]`),
		portCase{from: fQuery, name: "contains referrer filter",
			events: []pev{pv(ref("https://a.com")), pv(ref("https://a.com")), pv(ref("https://ab.com"))},
			query:  `{"metrics":["visitors"],"date_range":"all","filters":[["contains","visit:referrer",["a.com"]]]}`, want: portAgg("2")},
		filter("can filter by utm_medium", utm("utm_medium=social"), `["is","visit:utm_medium",["social"]]`),
		portCase{from: fQuery, name: "can filter by utm_medium case insensitively",
			events: []pev{pv(utm("utm_medium=Social"), u(7), at("2021-01-01 00:00:00")), pv(utm("utm_medium=SOCIAL"), u(7), at("2021-01-01 00:25:00")), pv(at("2021-01-01 00:00:00"))},
			query:  `{` + full + `,"filters":[["is","visit:utm_medium",["sociaL"],{"case_sensitive":false}]]}`, want: portAgg("2, 1, 0, 1500")},
		portCase{from: fQuery, name: "can filter by is_not utm_medium case insensitively",
			events: []pev{pv(utm("utm_medium=Social"), u(7), at("2021-01-01 00:00:00")), pv(utm("utm_medium=SOCIAL"), u(7), at("2021-01-01 00:25:00")), pv(at("2021-01-01 00:00:00"))},
			query:  `{"metrics":["pageviews"],"date_range":"all","filters":[["is_not","visit:utm_medium",["sociaL"],{"case_sensitive":false}]]}`, want: portAgg("1")},
		filter("can filter by utm_source", utm("utm_source=Twitter"), `["is","visit:utm_source",["Twitter"]]`),
		filter("can filter by utm_campaign", utm("utm_campaign=profile"), `["is","visit:utm_campaign",["profile"]]`),
		filter("can filter by device type", device("Desktop"), `["is","visit:device",["Desktop"]]`),
		filter("can filter by browser", browser("Chrome"), `["is","visit:browser",["Chrome"]]`),
		// Adapted: the fixture stores browser_version "56"; Plausible's ingestion keeps major.minor
		// of the User-Agent's version (Chrome/56.0.0.0 is "56.0"), as Tally does.
		filter("can filter by browser version", func(e *pev) { e.browser, e.browserV = "Chrome", "56" }, `["is","visit:browser_version",["56.0"]]`),
		filter("can filter by operating system", osys("Mac"), `["is","visit:os",["Mac"]]`),
		filter("can filter by operating system version", osys("macOS 10.5"), `["is","visit:os_version",["10.5"]]`),
		filter("can filter by country", cc("EE"), `["is","visit:country",["EE"]]`),
		portCase{from: fQuery, name: "can filter by page",
			events: []pev{pv(u(7), at("2021-01-01 00:00:00")), pv(u(7), page("/blogpost"), at("2021-01-01 00:25:00")),
				pv(at("2021-01-01 00:00:00")), pv(page("/blogpost"), at("2021-01-01 00:00:00"))},
			query: `{` + full + `,"filters":[["is","event:page",["/blogpost"]]]}`, want: portAgg("2, 2, 100, 750")},
		portCase{from: fQuery, name: "can filter by hostname",
			events: []pev{pv(host("one.example.com"), at("2021-01-01 00:00:00")), pv(host("example.com"), at("2021-01-01 00:25:00")), pv(at("2021-01-01 00:00:00"))},
			query:  `{` + full + `,"filters":[["contains","event:hostname",["one.example.com","example.com"]]]}`, want: portAgg("2, 2, 100, 0")},
		portCase{from: fQuery, name: "filtering by event:name",
			events: []pev{ce("Signup", at("2021-01-01 00:00:00")), ce("Signup", u(7), at("2021-01-01 00:25:00")), ce("Signup", u(7), at("2021-01-01 00:25:00")), pv(at("2021-01-01 00:00:00"))},
			query:  `{"metrics":["visitors","pageviews"],"date_range":"all","filters":[["is","event:name",["Signup"]]]}`, want: portAgg("2, 0")},
	)
	signups := []pev{ce("Signup", at("2021-01-01 00:00:00")), ce("Signup", u(7), at("2021-01-01 00:25:00")), ce("Signup", u(7), at("2021-01-01 00:25:00")), ce("NotConfigured", at("2021-01-01 00:25:00"))}
	add(portCase{from: fQuery, name: "filtering by a custom event goal", goals: []pgoal{{event: "Signup"}}, events: signups,
		query: `{"metrics":["visitors","events"],"date_range":"all","filters":[["is","event:goal",["Signup"]]]}`, want: portAgg("2, 3")},
		portCase{from: fQuery, name: "filtering by a custom event goal (case insensitive)", goals: []pgoal{{event: "Signup"}}, events: signups,
			query: `{"metrics":["visitors","events"],"date_range":"all","filters":[["is","event:goal",["signup"],{"case_sensitive":false}]]}`, want: portAgg("2, 3")},
		portCase{from: fQuery, name: "filtering by a revenue goal", goals: []pgoal{{event: "Purchase", currency: "USD"}},
			events: []pev{ce("Purchase", at("2021-01-01 00:00:00")), ce("Purchase", u(7), at("2021-01-01 00:25:00")), ce("Purchase", u(7), at("2021-01-01 00:25:00"))},
			query:  `{"metrics":["visitors","events"],"date_range":"all","filters":[["is","event:goal",["Purchase"]]]}`, want: portAgg("2, 3")},
		portCase{from: fQuery, name: "filtering by a simple pageview goal", goals: []pgoal{{page: "/register"}},
			events: []pev{pv(page("/register"), at("2021-01-01 00:00:00")), pv(page("/register"), u(7), at("2021-01-01 00:25:00")),
				pv(page("/register"), u(7), at("2021-01-01 00:25:00")), pv(at("2021-01-01 00:25:00"))},
			query: `{"metrics":["visitors","pageviews"],"date_range":"all","filters":[["is","event:goal",["Visit /register"]]]}`, want: portAgg("2, 3")},
		portCase{from: fQuery, name: "filtering by a wildcard pageview goal", goals: []pgoal{{page: "/blog**"}},
			events: []pev{pv(page("/blog/post-1")), pv(page("/blog/post-2"), u(7)), pv(page("/blog"), u(7)), pv()},
			query:  `{"metrics":["visitors","pageviews"],"date_range":"all","filters":[["is","event:goal",["Visit /blog**"]]]}`, want: portAgg("2, 3")},
		portCase{from: fQuery, name: "filtering by multiple custom event goals", goals: []pgoal{{event: "Signup"}, {event: "Purchase"}},
			events: []pev{ce("Signup"), ce("Purchase", u(7)), ce("Purchase", u(7)), pv()},
			query:  `{"metrics":["visitors","events"],"date_range":"all","filters":[["is","event:goal",["Signup","Purchase"]]]}`, want: portAgg("2, 3")},
		portCase{from: fQuery, name: "filtering by multiple mixed goals", goals: []pgoal{{event: "Signup"}, {page: "/**register"}},
			events: []pev{pv(page("/account/register")), pv(page("/register"), u(7)), ce("Signup", u(7)), pv()},
			query:  `{"metrics":["visitors","events","pageviews"],"date_range":"all","filters":[["is","event:goal",["Signup","Visit /**register"]]]}`, want: portAgg("2, 3, 2")},
		portCase{from: fQuery, name: "combining filters",
			events: []pev{pv(page("/blogpost"), cc("EE"), u(7), at("2021-01-01 00:00:00")), pv(u(7), at("2021-01-01 00:25:00")),
				pv(at("2021-01-01 00:00:00")), pv(page("/blogpost"), at("2021-01-01 00:00:00"))},
			query: `{` + full + `,"filters":[["is","event:page",["/blogpost"]],["is","visit:country",["EE"]]]}`, want: portAgg("1, 1, 0, 1500")},
		portCase{from: fQuery, name: "contains page filter", events: portPages("/en/page1", "/en/page2", "/pl/page1"),
			query: `{"metrics":["visitors"],"date_range":"all","filters":[["contains","event:page",["/en/"]]]}`, want: portAgg("2")},
		portCase{from: fQuery, name: "contains page filter case insensitive", events: portPages("/en/page1", "/EN/page2", "/pl/page1"),
			query: `{"metrics":["visitors"],"date_range":"all","filters":[["contains","event:page",["/En/"],{"case_sensitive":false}]]}`, want: portAgg("2")},
		portCase{from: fQuery, name: "contains_not page filter case insensitive", events: portPages("/en/page1", "/EN/page2", "/pl/page1"),
			query: `{"metrics":["visitors"],"date_range":"all","filters":[["contains_not","event:page",["/En/"],{"case_sensitive":false}]]}`, want: portAgg("1")},
		portCase{from: fQuery, name: "contains_not page filter", events: portPages("/en/page1", "/en/page2", "/pl/page1"),
			query: `{"metrics":["visitors"],"date_range":"all","filters":[["contains_not","event:page",["/en/"]]]}`, want: portAgg("1")},
		portCase{from: fQuery, name: "contains with and/or/not filters", events: portPages("/en/page1", "/en/page2", "/eng/page1", "/pl/page1", "/gb/page1"),
			query: `{"metrics":["visitors"],"date_range":"all","filters":[["or",[["and",[["contains","event:page",["/en"]],["not",["contains","event:page",["/eng"]]]]],["contains","event:page",["/gb"]]]]]}`,
			want:  portAgg("3")},
		portCase{from: fQuery, name: "contains and member filter combined", events: portPages("/en/page1", "/en/page2", "/pl/page1", "/ee/page1"),
			query: `{"metrics":["visitors"],"date_range":"all","filters":[["contains","event:page",["/en/","/pl/"]]]}`, want: portAgg("3")},
		portCase{from: fQuery, name: "can escape pipe character in member + contains filter", events: portPages("/blog/post|1", "/otherpost|1", "/blog/post|2", "/something-else"),
			query: `{"metrics":["visitors"],"date_range":"all","filters":[["contains","event:page",["post|1","/something-else"]]]}`, want: portAgg("3")},
		portCase{from: fQuery, name: "`matches` operator", events: portPages("/user/1234", "/user/789/contributions", "/blog/user/1234", "/user/ef/contributions", "/other/path"),
			query: `{"metrics":["visitors"],"date_range":"all","filters":[["matches","event:page",["^/user/[0-9]+"]]]}`, want: portAgg("2")},
		portCase{from: fQuery, name: "`matches_not` operator", events: portPages("/user/1234", "/user/789/contributions", "/blog/user/1234", "/user/ef/contributions", "/other/path"),
			query: `{"metrics":["visitors"],"date_range":"all","filters":[["matches_not","event:page",["^/user/[0-9]+"]]]}`, want: portAgg("3")},
	)
	tiers := func(v1, v2, v3, v4, v5, v7 string) []pev {
		return []pev{pv(props("tier", "large-1", "value", v1)), pv(props("tier", "small-1", "value", v2)), pv(props("tier", "small-1", "value", v3)),
			pv(props("tier", "small-2", "value", v4)), pv(props("tier", "small-2", "value", v5)), pv(props("tier", "small-3")), pv(props("value", v7)), pv()}
	}
	names := []pev{pv(props("name", "large-1")), pv(props("name", "Small-1")), pv(props("name", "mall-1")), pv(props("name", "SMALL-2")), pv(props("name", "small-2")), pv()}
	add(portCase{from: fQuery, name: "`contains` and `contains_not` operator with custom properties", events: tiers("ax", "bx", "ax", "bx", "cx", "ax"),
		query: `{"metrics":["visitors"],"date_range":"all","filters":[["contains","event:props:tier",["small"]],["contains_not","event:props:value",["b","c"]]]}`, want: portAgg("1")},
		portCase{from: fQuery, name: "`contains` operator with custom properties case insensitive", events: names,
			query: `{"metrics":["visitors"],"date_range":"all","filters":[["contains","event:props:name",["maLL"],{"case_sensitive":false}]]}`, want: portAgg("4")},
		portCase{from: fQuery, name: "`contains_not` operator with custom properties case insensitive", events: names,
			query: `{"metrics":["visitors"],"date_range":"all","filters":[["contains_not","event:props:name",["maLL"],{"case_sensitive":false}]]}`, want: portAgg("1")},
		portCase{from: fQuery, name: "`matches` and `matches_not` operator with custom properties", events: tiers("a", "b", "a", "b", "c", "a"),
			query: `{"metrics":["visitors"],"date_range":"all","filters":[["matches","event:props:tier",["small.+"]],["matches_not","event:props:value",["b|c"]]]}`, want: portAgg("1")},
		portCase{from: fQuery, name: "handles filtering by visit:country", events: []pev{pv(cc("EE")), pv(cc("EE")), pv(cc("EE"))},
			query: `{"metrics":["pageviews"],"date_range":"all","filters":[["is","visit:country",["EE"]]]}`, want: portAgg("3")},
		portCase{from: fQuery, name: "handles filtering by visit:country with contains", events: []pev{pv(cc("EE")), pv(cc("EE")), pv(cc("IT")), pv(cc("DE"))},
			query: `{"metrics":["pageviews"],"date_range":"all","filters":[["contains","visit:country",["E"]]]}`, want: portAgg("3")},
		// The fixture's city_geoname_id is where the port's City database places each event's
		// address (portGeo); 0 is an address it places nowhere.
		portCase{from: fQuery, name: "handles filtering by visit:city", events: []pev{pv(city(588409)), pv(city(689123)), pv(city(0)), pv(city(10))},
			query: `{"metrics":["pageviews"],"date_range":"all","filters":[["is","visit:city",[588409,689123]]]}`, want: portAgg("2")},
	)

	// query_test.exs: "timeseries".
	hours := make([]string, 24)
	for i := range hours {
		hours[i] = fmt.Sprintf("%q", fmt.Sprintf("2021-01-01 %02d:00:00", i))
	}
	days373 := make([]string, 0, 373)
	for d := portTime("2020-01-01 00:00:00"); !d.After(portTime("2021-01-07 00:00:00")); d = d.AddDate(0, 0, 1) {
		days373 = append(days373, fmt.Sprintf("%q", d.Format("2006-01-02")))
	}
	add(portCase{from: fQuery, name: "shows hourly data for a certain date with time_labels",
		events: []pev{pv(u(7), at("2021-01-01 00:00:00")), pv(u(7), at("2021-01-01 00:10:00")), pv(at("2021-01-01 23:59:00"))},
		query:  `{"metrics":["visitors","pageviews","visits","visit_duration","bounce_rate"],"date_range":["2021-01-01","2021-01-01"],"dimensions":["time:hour"],"include":{"time_labels":true}}`,
		want:   `[{"dimensions":["2021-01-01 00:00:00"],"metrics":[1,2,1,600,0]},{"dimensions":["2021-01-01 23:00:00"],"metrics":[1,1,1,0,100]}]`,
		meta:   `{"time_labels":[` + portJoin(hours) + `]}`},
		portCase{from: fQuery, name: "shows last 7 days of visitors with time labels",
			events: []pev{pv(at("2021-01-01 00:00:00")), pv(at("2021-01-07 23:59:00"))},
			query:  `{"metrics":["visitors"],"date_range":["2021-01-01","2021-01-07"],"dimensions":["time"],"include":{"time_labels":true}}`,
			want:   `[{"dimensions":["2021-01-01"],"metrics":[1]},{"dimensions":["2021-01-07"],"metrics":[1]}]`,
			meta:   `{"time_labels":["2021-01-01","2021-01-02","2021-01-03","2021-01-04","2021-01-05","2021-01-06","2021-01-07"]}`},
		portCase{from: fQuery, name: "shows weekly data with time labels",
			events: []pev{pv(at("2021-01-01 00:00:00")), pv(at("2021-01-03 23:59:00")), pv(at("2021-01-07 23:59:00"))},
			query:  `{"metrics":["visitors"],"date_range":["2020-12-20","2021-01-07"],"dimensions":["time:week"],"include":{"time_labels":true}}`,
			want:   `[{"dimensions":["2020-12-28"],"metrics":[2]},{"dimensions":["2021-01-04"],"metrics":[1]}]`,
			meta:   `{"time_labels":["2020-12-20","2020-12-21","2020-12-28","2021-01-04"]}`},
		portCase{from: fQuery, name: "shows last 6 months of visitors",
			events: []pev{pv(at("2020-08-13 00:00:00")), pv(at("2020-12-31 00:00:00")), pv(at("2021-01-01 00:00:00")), pv(at("2021-01-01 00:00:00"))},
			query:  `{"metrics":["visitors"],"date_range":["2020-07-01","2021-01-31"],"dimensions":["time:month"]}`,
			want:   `[{"dimensions":["2020-08-01"],"metrics":[1]},{"dimensions":["2020-12-01"],"metrics":[1]},{"dimensions":["2021-01-01"],"metrics":[2]}]`},
		portCase{from: fQuery, name: "shows last 12 months of visitors",
			events: []pev{pv(at("2020-02-01 00:00:00")), pv(at("2020-12-31 00:00:00")), pv(at("2021-01-01 00:00:00")), pv(at("2021-01-01 00:00:00"))},
			query:  `{"metrics":["visitors"],"date_range":["2020-01-01","2021-01-01"],"dimensions":["time:month"]}`,
			want:   `[{"dimensions":["2020-02-01"],"metrics":[1]},{"dimensions":["2020-12-01"],"metrics":[1]},{"dimensions":["2021-01-01"],"metrics":[2]}]`},
		portCase{from: fQuery, name: "shows last 12 months of visitors with interval daily",
			events: []pev{pv(at("2020-02-01 00:00:00")), pv(at("2020-12-31 00:00:00")), pv(at("2021-01-01 00:00:00")), pv(at("2021-01-01 00:00:00"))},
			query:  `{"metrics":["visitors"],"date_range":["2020-01-01","2021-01-07"],"dimensions":["time:day"],"include":{"time_labels":true}}`,
			want:   `[{"dimensions":["2020-02-01"],"metrics":[1]},{"dimensions":["2020-12-31"],"metrics":[1]},{"dimensions":["2021-01-01"],"metrics":[2]}]`,
			meta:   `{"time_labels":[` + portJoin(days373) + `]}`},
		portCase{from: fQuery, name: "shows a custom range with daily interval",
			events: []pev{pv(at("2021-01-01 00:00:00")), pv(at("2021-01-01 00:00:00")), pv(at("2021-01-02 00:00:00"))},
			query:  `{"metrics":["visitors"],"date_range":["2021-01-01","2021-01-02"],"dimensions":["time:day"]}`,
			want:   `[{"dimensions":["2021-01-01"],"metrics":[2]},{"dimensions":["2021-01-02"],"metrics":[1]}]`},
		portCase{from: fQuery, name: "shows a custom range with monthly interval",
			events: []pev{pv(u(7), at("2020-12-01 00:00:00")), pv(u(7), at("2020-12-01 00:05:00")), pv(at("2021-01-01 00:00:00")), pv(at("2021-01-02 00:00:00"))},
			query:  `{"metrics":["pageviews","visitors","bounce_rate","visit_duration"],"date_range":["2020-12-01","2021-01-02"],"dimensions":["time:month"]}`,
			want:   `[{"dimensions":["2020-12-01"],"metrics":[2,1,0,300]},{"dimensions":["2021-01-01"],"metrics":[2,2,100,0]}]`},
		portCase{from: fQuery, name: "timeseries with explicit order_by",
			events: []pev{pv(at("2021-01-01 00:00:00")), pv(at("2021-01-02 00:00:00")), pv(at("2021-01-02 00:00:00")), pv(at("2021-01-02 00:00:00")),
				pv(at("2021-01-03 00:00:00")), pv(at("2021-01-03 00:00:00")), pv(at("2021-01-04 00:00:00")), pv(at("2021-01-04 00:00:00"))},
			query: `{"metrics":["pageviews"],"date_range":["2020-12-01","2021-01-04"],"dimensions":["time"],"order_by":[["pageviews","desc"],["time","asc"]]}`,
			want:  `[{"dimensions":["2021-01-02"],"metrics":[3]},{"dimensions":["2021-01-03"],"metrics":[2]},{"dimensions":["2021-01-04"],"metrics":[2]},{"dimensions":["2021-01-01"],"metrics":[1]}]`},
		portCase{from: fQuery, name: "timeseries with quarter-hour timezone", tz: "Asia/Katmandu",
			events: []pev{pv(at("2021-01-02 05:00:00")), pv(at("2021-01-02 05:15:00")), pv(at("2021-01-02 05:30:00")), pv(at("2021-01-02 05:45:00")),
				pv(at("2021-01-02 06:00:00")), pv(at("2021-01-02 06:15:00")), pv(at("2021-01-02 06:30:00"))},
			query: `{"metrics":["visits"],"date_range":["2021-01-02","2021-01-02"],"dimensions":["time:hour"]}`,
			want:  `[{"dimensions":["2021-01-02 10:00:00"],"metrics":[1]},{"dimensions":["2021-01-02 11:00:00"],"metrics":[4]},{"dimensions":["2021-01-02 12:00:00"],"metrics":[2]}]`},
	)

	// query_test.exs: breakdowns.
	add(portCase{from: fQuery, name: "breakdown by visit:source",
		events: []pev{pv(src("Google"), at("2021-01-01 00:00:00")), pv(src("Google"), at("2021-01-01 00:25:00")), pv(at("2021-01-01 00:00:00"))},
		query:  `{"metrics":["visitors"],"date_range":"all","dimensions":["visit:source"]}`,
		want:   `[{"dimensions":["Google"],"metrics":[2]},{"dimensions":["Direct / None"],"metrics":[1]}]`},
		portCase{from: fQuery, name: "breakdown by visit:channel",
			events: []pev{pv(src("Google"), at("2021-01-01 00:00:00")), pv(src("Google"), at("2021-01-01 00:25:00")), pv(at("2021-01-01 00:00:00"))},
			query:  `{"metrics":["visitors"],"date_range":"all","dimensions":["visit:channel"]}`,
			want:   `[{"dimensions":["Organic Search"],"metrics":[2]},{"dimensions":["Direct"],"metrics":[1]}]`},
		portCase{from: fQuery, name: "breakdown by visit:country",
			events: []pev{pv(cc("EE"), at("2021-01-01 00:00:00")), pv(cc("EE"), at("2021-01-01 00:25:00")), pv(cc("US"), at("2021-01-01 00:00:00"))},
			query:  `{"metrics":["visitors"],"date_range":"all","dimensions":["visit:country"]}`,
			want:   `[{"dimensions":["EE"],"metrics":[2]},{"dimensions":["US"],"metrics":[1]}]`},
	)
	for _, d := range []string{"utm_campaign", "utm_source", "utm_term", "utm_content"} {
		add(portCase{from: fQuery, name: "breakdown by visit:" + d + " when filtered by hostname",
			events: []pev{pv(utm(d+"=ad"), u(7), host("two.example.com"), at("2021-01-01 00:00:00")), pv(u(7), host("one.example.com"), at("2021-01-01 00:15:00"))},
			query:  `{"metrics":["visitors"],"date_range":"all","filters":[["is","event:hostname",["one.example.com"]]],"dimensions":["visit:` + d + `"]}`,
			want:   `[]`})
	}
	// shown2, where set, is v2 as Plausible's ingestion names it. Adapted: the fixture stores
	// referrer_source "Twitter"; a referrer of twitter.com is named "X (Twitter)" by Plausible's
	// ingestion, as by Tally's (docs/intake.md#source-names).
	for _, b := range []struct {
		dim, v1, v2, blank, shown2 string
		attr                       func(string) popt
	}{
		{"visit:source", "Google", "Twitter", "Direct / None", twitterName, src},
		{"visit:referrer", "example.com", "google.com", "Direct / None", "", func(v string) popt { return ref("https://" + v + "/") }},
		{"visit:utm_medium", "Search", "social", "(not set)", "", func(v string) popt { return utm("utm_medium=" + v) }},
		{"visit:utm_source", "Google", "Bing", "(not set)", "", func(v string) popt { return utm("utm_source=" + v) }},
		{"visit:utm_campaign", "ads", "profile", "(not set)", "", func(v string) popt { return utm("utm_campaign=" + v) }},
		{"visit:utm_content", "Content1", "blog2", "(not set)", "", func(v string) popt { return utm("utm_content=" + v) }},
		{"visit:utm_term", "Term1", "favicon", "(not set)", "", func(v string) popt { return utm("utm_term=" + v) }},
		{"visit:os", "Mac", "Windows", "(not set)", "", osys},
		{"visit:browser", "Chrome", "Safari", "(not set)", "", browser},
		{"visit:device", "Mobile", "Desktop", "(not set)", "", device},
	} {
		if b.shown2 == "" {
			b.shown2 = b.v2
		}
		add(portCase{from: fQuery, name: "simple breakdown by " + b.dim,
			events: []pev{pv(b.attr(b.v1), at("2021-01-01 00:00:00")), pv(b.attr(b.v1), at("2021-01-01 00:25:00")), pv(b.attr(b.v1), at("2021-01-01 00:55:00")),
				pv(b.attr(b.v2), at("2021-01-01 01:00:00")), pv(b.attr(b.v2), at("2021-01-01 01:25:00")), pv(at("2021-01-01 00:00:00"))},
			query: `{"metrics":["visitors","percentage"],"date_range":["2021-01-01","2021-01-01"],"dimensions":["` + b.dim + `"]}`,
			want:  fmt.Sprintf(`[{"dimensions":[%q],"metrics":[3,50]},{"dimensions":[%q],"metrics":[2,33.3]},{"dimensions":[%q],"metrics":[1,16.7]}]`, b.v1, b.shown2, b.blank)})
	}
	// Adapted: the fixture stores macOS "14", Windows "11", Chrome "14" and Firefox "11", and a
	// version without an OS or browser; no User-Agent carries those. Through a real client the
	// versions are the User-Agents' as Plausible's ingestion keeps them (major.minor of the
	// parser's version): Safari's frozen "Mac OS X 10_15_7" is 10.15, "Windows NT 10.0" is 10
	// (Windows 11 sends it too), Chrome/14.0.0.0 is 14.0, Firefox/121.0 is 121.0; a visitor
	// without a User-Agent has neither name nor version.
	add(portCase{from: fQuery, name: "breakdown by visit:os and visit:os_version",
		events: []pev{pv(osys("Mac")), pv(osys("Mac")), pv(osys("Mac")), pv(), pv(osys("Windows")), pv(osys("Windows"))},
		query:  `{"metrics":["visitors"],"date_range":"all","dimensions":["visit:os","visit:os_version"]}`,
		want:   `[{"dimensions":["Mac","10.15"],"metrics":[3]},{"dimensions":["Windows","10"],"metrics":[2]},{"dimensions":["(not set)","(not set)"],"metrics":[1]}]`},
		portCase{from: fQuery, name: "breakdown by visit:browser and visit:browser_version",
			events: []pev{pv(browser("Chrome"), browserV("14")), pv(browser("Chrome"), browserV("14")), pv(browser("Chrome"), browserV("14")), pv(), pv(browser("Firefox")), pv(browser("Firefox"))},
			query:  `{"metrics":["visitors"],"date_range":"all","dimensions":["visit:browser","visit:browser_version"]}`,
			want:   `[{"dimensions":["Chrome","14.0"],"metrics":[3]},{"dimensions":["Firefox","121.0"],"metrics":[2]},{"dimensions":["(not set)","(not set)"],"metrics":[1]}]`},
		// Adapted: the fixture stores os "Linux"; Plausible's parser, as Tally's, names a Linux
		// User-Agent "GNU/Linux".
		portCase{from: fQuery, name: "explicit order_by",
			events: []pev{pv(osys("Windows"), browser("Chrome")), pv(osys("Windows"), browser("Firefox")), pv(osys("Linux"), browser("Firefox")),
				pv(osys("Linux"), browser("Firefox")), pv(osys("Mac"), browser("Chrome"))},
			query: `{"metrics":["visitors"],"date_range":"all","dimensions":["visit:os","visit:browser"],"order_by":[["visitors","asc"],["visit:browser","desc"],["visit:os","asc"]]}`,
			want:  `[{"dimensions":["Windows","Firefox"],"metrics":[1]},{"dimensions":["Mac","Chrome"],"metrics":[1]},{"dimensions":["Windows","Chrome"],"metrics":[1]},{"dimensions":["GNU/Linux","Firefox"],"metrics":[2]}]`},
		portCase{from: fQuery, name: "breakdown by event:page",
			events: []pev{pv(at("2021-01-01 00:00:00")), pv(at("2021-01-01 00:25:00")), pv(page("/plausible.io"), at("2021-01-01 00:00:00"))},
			query:  `{"metrics":["visitors"],"date_range":"all","dimensions":["event:page"]}`,
			want:   `[{"dimensions":["/"],"metrics":[2]},{"dimensions":["/plausible.io"],"metrics":[1]}]`},
		portCase{from: fQuery, name: "attempting to breakdown by event:hostname returns an error",
			events: []pev{pv(host("a.example.com")), pv(host("a.example.com")), pv(host("a.example.com")), pv(host("b.example.com"))},
			query:  `{"metrics":["pageviews"],"date_range":"all","dimensions":["event:hostname"]}`,
			want:   `[{"dimensions":["a.example.com"],"metrics":[3]},{"dimensions":["b.example.com"],"metrics":[1]}]`},
	)

	// query_test.exs: "custom events".
	add(portCase{from: fQuery, name: "can breakdown by event:name",
		events: []pev{ce("Signup", at("2021-01-01 00:00:00")), ce("Signup", at("2021-01-01 00:00:00")), pv(at("2021-01-01 00:25:00"))},
		query:  `{"metrics":["visitors"],"date_range":"all","dimensions":["event:name"]}`,
		want:   `[{"dimensions":["Signup"],"metrics":[2]},{"dimensions":["pageview"],"metrics":[1]}]`},
		portCase{from: fQuery, name: "can breakdown by event:name with visitors and events metrics",
			events: []pev{pv(page("/non-existing"), u(7), at("2021-01-01 00:00:00")), ce("404", page("/non-existing"), u(7), at("2021-01-01 00:00:00")),
				pv(page("/non-existing"), at("2021-01-01 00:00:01")), pv(page("/non-existing"), u(7), at("2021-01-01 00:00:02")),
				ce("404", page("/non-existing"), u(7), at("2021-01-01 00:00:02")), pv(page("/non-existing"), u(7), at("2021-01-01 00:00:03"))},
			query: `{"metrics":["visitors","events"],"date_range":"all","dimensions":["event:name"]}`,
			want:  `[{"dimensions":["pageview"],"metrics":[2,4]},{"dimensions":["404"],"metrics":[1,2]}]`},
		portCase{from: fQuery, name: "can breakdown by event:name while filtering for something",
			events: []pev{ce("Signup", page("/pageA"), browser("Chrome"), at("2021-01-01 00:00:00")), ce("Signup", page("/pageA"), browser("Chrome"), at("2021-01-01 00:00:00")),
				ce("Signup", page("/pageA"), browser("Safari"), at("2021-01-01 00:00:00")), ce("Signup", page("/pageB"), browser("Chrome"), at("2021-01-01 00:00:00")),
				pv(page("/pageA"), browser("Chrome"), at("2021-01-01 00:25:00"))},
			query: `{"metrics":["visitors"],"date_range":"all","dimensions":["event:name"],"filters":[["is","event:page",["/pageA"]],["is","visit:browser",["Chrome"]]]}`,
			want:  `[{"dimensions":["Signup"],"metrics":[2]},{"dimensions":["pageview"],"metrics":[1]}]`},
		portCase{from: fQuery, name: "can breakdown by a visit:property when filtering by event:name",
			events: []pev{pv(src("Google"), u(7), at("2021-01-01 00:00:00")), ce("Signup", u(7), at("2021-01-01 00:00:00")), pv(src("Twitter"), at("2021-01-01 00:25:00"))},
			query:  `{"metrics":["visitors"],"date_range":"all","dimensions":["visit:source"],"filters":[["is","event:name",["Signup"]]]}`,
			want:   `[{"dimensions":["Google"],"metrics":[1]}]`},
		portCase{from: fQuery, name: "can breakdown by event:name when filtering by event:page",
			events: []pev{pv(page("/pageA"), at("2021-01-01 00:00:00")), pv(page("/pageA"), at("2021-01-01 00:00:00")), ce("Signup", page("/pageA"), at("2021-01-01 00:00:00")),
				pv(page("/pageB"), src("Twitter"), at("2021-01-01 00:25:00"))},
			query: `{"metrics":["visitors"],"date_range":"all","dimensions":["event:name"],"filters":[["contains","event:page",["/pageA"]]]}`,
			want:  `[{"dimensions":["pageview"],"metrics":[2]},{"dimensions":["Signup"],"metrics":[1]}]`},
		portCase{from: fQuery, name: "can breakdown by event:page when filtering by event:name",
			events: []pev{ce("Signup", page("/pageA"), at("2021-01-01 00:00:00")), ce("Signup", page("/pageA"), at("2021-01-01 00:00:00")), ce("Signup", page("/pageB"), at("2021-01-01 00:00:00")),
				pv(page("/pageB"), src("Twitter"), at("2021-01-01 00:25:00"))},
			query: `{"metrics":["visitors"],"date_range":"all","dimensions":["event:page"],"filters":[["is","event:name",["Signup"]]]}`,
			want:  `[{"dimensions":["/pageA"],"metrics":[2]},{"dimensions":["/pageB"],"metrics":[1]}]`},
		portCase{from: fQuery, name: "can filter event:page with a wildcard", events: portPages("/en/page1", "/en/page2", "/en/page2", "/pl/page1"),
			query: `{"metrics":["visitors"],"date_range":"all","dimensions":["event:page"],"filters":[["contains","event:page",["/en/"]]]}`,
			want:  `[{"dimensions":["/en/page2"],"metrics":[2]},{"dimensions":["/en/page1"],"metrics":[1]}]`},
		portCase{from: fQuery, name: "can filter event:hostname with a contains",
			events: []pev{pv(host("alice-m.example.com"), page("/a")), pv(host("anna-m.example.com"), page("/a")), pv(host("adam-m.example.com"), page("/a")), pv(host("bob.example.com"), page("/b"))},
			query:  `{"metrics":["visitors"],"date_range":"all","dimensions":["event:page"],"filters":[["contains","event:hostname",["-m.example.com"]]]}`,
			want:   `[{"dimensions":["/a"],"metrics":[3]}]`},
		portCase{from: fQuery, name: "breakdown by custom event property",
			events: []pev{ce("Purchase", props("package", "business"), at("2021-01-01 00:00:00")), ce("Purchase", props("package", "personal"), at("2021-01-01 00:00:00")),
				ce("Purchase", props("package", "business"), at("2021-01-01 00:25:00")), ce("Some other event", props("package", "business"), at("2021-01-01 00:25:00"))},
			query: `{"metrics":["visitors"],"date_range":"all","dimensions":["event:props:package"],"filters":[["is","event:name",["Purchase"]]]}`,
			want:  `[{"dimensions":["business"],"metrics":[2]},{"dimensions":["personal"],"metrics":[1]}]`},
		portCase{from: fQuery, name: "breakdown by custom event property, with pageviews metric",
			events: []pev{pv(props("package", "business"), at("2021-01-01 00:00:00")), pv(props("package", "personal"), at("2021-01-01 00:00:00")), pv(props("package", "business"), at("2021-01-01 00:25:00"))},
			query:  `{"metrics":["pageviews"],"date_range":"all","dimensions":["event:props:package"]}`,
			want:   `[{"dimensions":["business"],"metrics":[2]},{"dimensions":["personal"],"metrics":[1]}]`},
		portCase{from: fQuery, name: "breakdown by custom event property, with (none)",
			events: []pev{ce("Purchase", props("cost", "16"), at("2021-01-01 00:00:00")), ce("Purchase", props("cost", "16"), at("2021-01-01 00:00:00")),
				ce("Purchase", props("cost", "16"), at("2021-01-01 00:00:00")), ce("Purchase", at("2021-01-01 00:25:00")),
				ce("Purchase", props("cost", "14"), at("2021-01-01 00:25:00")), ce("Purchase", props("cost", "14"), at("2021-01-01 00:26:00"))},
			query: `{"metrics":["visitors"],"date_range":"all","dimensions":["event:props:cost"],"filters":[["is","event:name",["Purchase"]]]}`,
			want:  `[{"dimensions":["16"],"metrics":[3]},{"dimensions":["14"],"metrics":[2]},{"dimensions":["(none)"],"metrics":[1]}]`},
		portCase{from: fQuery, name: "event:goal filter returns 400 when goal not configured",
			query: `{"metrics":["visitors"],"date_range":"all","dimensions":["visit:browser"],"filters":[["is","event:goal",["Register"]]]}`, status: 400},
		portCase{from: fQuery, name: "validates that filters are valid",
			query: `{"metrics":["visitors"],"date_range":"all","dimensions":["visit:browser"],"filters":[["is","badproperty",["bar"]]]}`, status: 400},
		portCase{from: fQuery, name: "event:page filter for breakdown by session props",
			events: []pev{pv(page("/ignore"), browser("Chrome"), at("2021-01-01 00:00:00")), pv(page("/plausible.io"), browser("Chrome"), at("2021-01-01 00:00:00")),
				pv(page("/plausible.io"), browser("Chrome"), at("2021-01-01 00:25:00")), pv(page("/plausible.io"), browser("Safari"), at("2021-01-01 00:00:00"))},
			query: `{"metrics":["visitors"],"date_range":"all","dimensions":["visit:browser"],"filters":[["is","event:page",["/plausible.io"]]]}`,
			want:  `[{"dimensions":["Chrome"],"metrics":[2]},{"dimensions":["Safari"],"metrics":[1]}]`},
	)
	sessionSources := []pev{
		pv(src("Twitter"), utm("utm_medium=Twitter&utm_source=Twitter&utm_campaign=Twitter"), u(7)), pv(page("/plausible.io"), u(7)),
		pv(page("/plausible.io"), src("Google"), utm("utm_medium=Google&utm_source=Google&utm_campaign=Google")),
		pv(page("/plausible.io"), src("Google"), utm("utm_medium=Google&utm_source=Google&utm_campaign=Google")),
	}
	for _, d := range []string{"visit:source", "visit:utm_medium", "visit:utm_source", "visit:utm_campaign"} {
		// Adapted (visit:source): the fixture stores the source "Twitter"; Plausible's ingestion,
		// as Tally's, names utm_source=Twitter after the known source, "X (Twitter)".
		twitter := "Twitter"
		if d == "visit:source" {
			twitter = twitterName
		}
		add(portCase{from: fQuery, name: "event:page filter shows sources of sessions that have visited that page (" + d + ")", events: sessionSources,
			query: `{"metrics":["visitors"],"date_range":"all","dimensions":["` + d + `"],"filters":[["is","event:page",["/plausible.io"]]]}`,
			want:  `[{"dimensions":["Google"],"metrics":[2]},{"dimensions":["` + twitter + `"],"metrics":[1]}]`})
	}
	add(portCase{from: fQuery, name: "top sources for a custom goal and filtered by hostname",
		events: []pev{pv(host("blog.example.com"), src("Facebook"), u(7)), pv(host("app.example.com"), page("/register"), u(7)), ce("Signup", host("app.example.com"), page("/register"), u(7))},
		query:  `{"metrics":["visitors"],"date_range":"all","dimensions":["visit:source"],"filters":[["is","event:hostname",["app.example.com"]]]}`,
		want:   `[]`},
		portCase{from: fQuery, name: "top sources for a custom goal and filtered by hostname (2)",
			events: []pev{pv(host("app.example.com"), src("Facebook"), page("/register"), u(7)), ce("Signup", host("app.example.com"), page("/register"), u(7))},
			query:  `{"metrics":["visitors"],"date_range":"all","dimensions":["visit:source"],"filters":[["is","event:hostname",["app.example.com"]]]}`,
			want:   `[{"dimensions":["Facebook"],"metrics":[1]}]`},
		portCase{from: fQuery, name: "event:page filter is interpreted as entry_page filter only for bounce_rate",
			events: []pev{pv(browser("Chrome"), u(7), page("/ignore"), at("2021-01-01 00:00:00")), pv(browser("Chrome"), u(7), page("/plausible.io"), at("2021-01-01 00:01:00")),
				pv(browser("Chrome"), u(8), page("/important-page"), at("2021-01-01 00:00:00")), pv(browser("Chrome"), u(8), page("/"), at("2021-01-01 00:01:00")),
				pv(browser("Chrome"), page("/plausible.io"), at("2021-01-01 00:01:00"))},
			query: `{"metrics":["visitors","bounce_rate"],"date_range":"all","filters":[["is","event:page",["/plausible.io","/important-page"]]],"dimensions":["visit:browser"]}`,
			want:  `[{"dimensions":["Chrome"],"metrics":[3,50]}]`},
		portCase{from: fQuery, name: "event:goal pageview filter for breakdown by visit source", goals: []pgoal{{page: "/plausible.io"}},
			events: []pev{pv(src("Bing"), at("2021-01-01 00:00:00")), pv(src("Google"), u(7), at("2021-01-01 00:00:00")), pv(page("/plausible.io"), u(7), at("2021-01-01 00:00:00"))},
			query:  `{"metrics":["visitors"],"date_range":"all","dimensions":["visit:source"],"filters":[["is","event:goal",["Visit /plausible.io"]]]}`,
			want:   `[{"dimensions":["Google"],"metrics":[1]}]`},
		portCase{from: fQuery, name: "event:goal custom event filter for breakdown by visit source", goals: []pgoal{{event: "Register"}},
			events: []pev{pv(src("Bing"), at("2021-01-01 00:00:00")), pv(src("Google"), u(7), at("2021-01-01 00:00:00")), ce("Register", u(7), at("2021-01-01 00:00:00"))},
			query:  `{"metrics":["visitors"],"date_range":"all","dimensions":["visit:source"],"filters":[["is","event:goal",["Register"]]]}`,
			want:   `[{"dimensions":["Google"],"metrics":[1]}]`},
		portCase{from: fQuery, name: "wildcard pageview goal filter for breakdown by event:page", goals: []pgoal{{page: "/**register"}},
			events: []pev{pv(page("/en/register")), pv(page("/en/register"), u(7)), pv(page("/en/register"), u(7)), pv(page("/123/it/register")), pv(page("/should-not-appear"))},
			query:  `{"metrics":["visitors","pageviews"],"date_range":"all","dimensions":["event:page"],"filters":[["is","event:goal",["Visit /**register"]]]}`,
			want:   `[{"dimensions":["/en/register"],"metrics":[2,3]},{"dimensions":["/123/it/register"],"metrics":[1,1]}]`},
	)
	onboarding := []pev{ce("Onboarding conversion: Step 1"), ce("Onboarding conversion: Step 1"), ce("Onboarding conversion: Step 2"), ce("Unrelated"), pv(page("/conversion"))}
	onboardingGoals := []pgoal{{event: "Onboarding conversion: Step 1"}, {event: "Onboarding conversion: Step 2"}, {event: "Unrelated"}, {page: "/conversion"}}
	add(portCase{from: fQuery, name: "goal contains filter for goal breakdown", goals: onboardingGoals, events: onboarding,
		query: `{"metrics":["visitors"],"date_range":"all","dimensions":["event:goal"],"filters":[["contains","event:goal",["conversion"]]]}`,
		want:  `[{"dimensions":["Onboarding conversion: Step 1"],"metrics":[2]},{"dimensions":["Onboarding conversion: Step 2"],"metrics":[1]},{"dimensions":["Visit /conversion"],"metrics":[1]}]`},
		portCase{from: fQuery, name: "goal contains filter for goal breakdown (case insensitive)", goals: onboardingGoals, events: onboarding,
			query: `{"metrics":["visitors"],"date_range":"all","dimensions":["event:goal"],"filters":[["contains","event:goal",["step"],{"case_sensitive":false}]]}`,
			want:  `[{"dimensions":["Onboarding conversion: Step 1"],"metrics":[2]},{"dimensions":["Onboarding conversion: Step 2"],"metrics":[1]}]`},
		portCase{from: fQuery, name: "mixed multi-goal filter for breakdown by visit:country", goals: []pgoal{{page: "/**register"}, {event: "Signup"}},
			events: []pev{pv(cc("EE"), page("/en/register")), ce("Signup", cc("EE"), page("/en/register")), pv(cc("US"), page("/123/it/register")), pv(cc("US"), page("/different"))},
			query:  `{"metrics":["visitors","pageviews","events"],"date_range":"all","dimensions":["visit:country"],"filters":[["is","event:goal",["Signup","Visit /**register"]]]}`,
			want:   `[{"dimensions":["EE"],"metrics":[2,1,2]},{"dimensions":["US"],"metrics":[1,1,1]}]`},
		portCase{from: fQuery, name: "event:goal custom event filter for breakdown by event page", goals: []pgoal{{event: "Register"}},
			events: []pev{ce("Register", page("/en/register")), ce("Register", page("/en/register")), ce("Register", page("/it/register"))},
			query:  `{"metrics":["visitors"],"date_range":"all","dimensions":["event:page"],"filters":[["is","event:goal",["Register"]]]}`,
			want:   `[{"dimensions":["/en/register"],"metrics":[2]},{"dimensions":["/it/register"],"metrics":[1]}]`},
		portCase{from: fQuery, name: "IN filter for event:page", events: portPages("/ignore", "/plausible.io", "/plausible.io", "/important-page"),
			query: `{"metrics":["visitors"],"date_range":"all","dimensions":["event:page"],"filters":[["is","event:page",["/plausible.io","/important-page"]]]}`,
			want:  `[{"dimensions":["/plausible.io"],"metrics":[2]},{"dimensions":["/important-page"],"metrics":[1]}]`},
		portCase{from: fQuery, name: "IN filter for visit:browser",
			events: []pev{pv(page("/ignore"), browser("Firefox")), pv(page("/plausible.io"), browser("Chrome")), pv(page("/plausible.io"), browser("Safari")), pv(page("/important-page"), browser("Safari"))},
			query:  `{"metrics":["visitors"],"date_range":"all","dimensions":["event:page"],"filters":[["is","visit:browser",["Chrome","Safari"]]]}`,
			want:   `[{"dimensions":["/plausible.io"],"metrics":[2]},{"dimensions":["/important-page"],"metrics":[1]}]`},
		// Plausible's test asserts the two rows in any order; these are in Tally's tie order.
		portCase{from: fQuery, name: "IN filter for visit:entry_page", events: portPages("/ignore", "/plausible.io", "/plausible.io", "/important-page"),
			query: `{"metrics":["bounce_rate"],"date_range":"all","dimensions":["event:page"],"filters":[["is","event:page",["/plausible.io","/important-page"]]]}`,
			want:  `[{"dimensions":["/important-page"],"metrics":[100]},{"dimensions":["/plausible.io"],"metrics":[100]}]`},
		portCase{from: fQuery, name: "IN filter for event:name", events: []pev{ce("Signup"), ce("Signup"), ce("Login"), ce("Irrelevant")},
			query: `{"metrics":["visitors"],"date_range":"all","dimensions":["event:name"],"filters":[["is","event:name",["Signup","Login"]]]}`,
			want:  `[{"dimensions":["Signup"],"metrics":[2]},{"dimensions":["Login"],"metrics":[1]}]`},
		portCase{from: fQuery, name: "IN filter for event:name case insensitive", events: []pev{ce("Signup"), ce("Signup"), ce("Login"), ce("Irrelevant")},
			query: `{"metrics":["visitors"],"date_range":"all","filters":[["is","event:name",["signup","LOGIN"],{"case_sensitive":false}]]}`, want: portAgg("3")},
		portCase{from: fQuery, name: "IN filter for event:props:*",
			events: []pev{pv(browser("Chrome"), props("browser", "Chrome")), pv(browser("Chrome"), props("browser", "Chrome")), pv(browser("Safari"), props("browser", "Safari")), pv(browser("Firefox"), props("browser", "Firefox"))},
			query:  `{"metrics":["visitors"],"date_range":"all","dimensions":["visit:browser"],"filters":[["is","event:props:browser",["Chrome","Safari"]]]}`,
			want:   `[{"dimensions":["Chrome"],"metrics":[2]},{"dimensions":["Safari"],"metrics":[1]}]`},
		portCase{from: fQuery, name: "Multiple event:props:* filters",
			events: []pev{pv(browser("Chrome"), props("browser", "Chrome")), pv(browser("Chrome"), props("browser", "Chrome", "prop", "xyz")),
				pv(browser("Safari"), props("browser", "Safari", "prop", "target_value")), pv(browser("Chrome"), props("browser", "Chrome", "prop", "target_value")),
				pv(browser("Firefox"), props("browser", "Firefox", "prop", "target_value"))},
			query: `{"metrics":["visitors"],"date_range":"all","dimensions":["visit:browser"],"filters":[["is","event:props:browser",["CHROME","sAFari"],{"case_sensitive":false}],["is_not","event:props:browser",["Chrome"],{"case_sensitive":false}],["is","event:props:prop",["target_value"]]]}`,
			want:  `[{"dimensions":["Safari"],"metrics":[1]}]`},
		portCase{from: fQuery, name: "IN filter for event:props:* including (none) value",
			events: []pev{pv(browser("Chrome"), props("browser", "Chrome")), pv(browser("Chrome"), props("browser", "Chrome")), pv(browser("Safari")), pv(browser("Firefox"), props("browser", "Firefox"))},
			query:  `{"metrics":["visitors"],"date_range":"all","dimensions":["visit:browser"],"filters":[["is","event:props:browser",["Chrome","(none)"]]]}`,
			want:   `[{"dimensions":["Chrome"],"metrics":[2]},{"dimensions":["Safari"],"metrics":[1]}]`},
		// Adapted: the fixture stores browser "Edge"; Plausible's parser, as Tally's, names Edge's
		// User-Agent "Microsoft Edge".
		portCase{from: fQuery, name: "can use a is_not filter", events: []pev{pv(browser("Chrome")), pv(browser("Safari")), pv(browser("Safari")), pv(browser("Edge"))},
			query: `{"metrics":["visitors"],"date_range":"all","dimensions":["visit:browser"],"filters":[["is_not","visit:browser",["Chrome"]]]}`,
			want:  `[{"dimensions":["Safari"],"metrics":[2]},{"dimensions":["Microsoft Edge"],"metrics":[1]}]`},
	)

	// query_test.exs: "metrics". Adapted here and in "multiple breakdown timeseries with
	// sources": the fixture's referrer_source "Twitter" is a twitter.com referrer, which Plausible's
	// ingestion, as Tally's, names "X (Twitter)".
	add(portCase{from: fQuery, name: "all metrics for breakdown by visit prop",
		events: []pev{pv(u(1), src("Google"), at("2021-01-01 00:00:00")), ce("signup", u(1), src("Google"), at("2021-01-01 00:05:00")), pv(u(1), src("Google"), at("2021-01-01 00:10:00")),
			pv(src("Google"), at("2021-01-01 00:25:00")), pv(src("Twitter"), at("2021-01-01 00:00:00"))},
		query: `{"metrics":["visitors","visits","pageviews","events","bounce_rate","visit_duration"],"date_range":"all","dimensions":["visit:source"]}`,
		want:  `[{"dimensions":["Google"],"metrics":[2,2,3,4,50,300]},{"dimensions":["` + twitterName + `"],"metrics":[1,1,1,1,100,0]}]`},
		portCase{from: fQuery, name: "metrics=bounce_rate does not add visits to the response",
			events: []pev{pv(u(1), page("/entry-page-1"), at("2021-01-01 00:00:00")), pv(u(1), page("/some-page"), at("2021-01-01 00:10:00")), pv(u(2), page("/entry-page-2"), src("Google"), at("2021-01-01 00:05:00"))},
			query:  `{"metrics":["bounce_rate"],"date_range":"all","dimensions":["visit:entry_page"],"order_by":[["visit:entry_page","asc"]]}`,
			want:   `[{"dimensions":["/entry-page-1"],"metrics":[0]},{"dimensions":["/entry-page-2"],"metrics":[100]}]`},
		portCase{from: fQuery, name: "all metrics for breakdown by event prop",
			events: []pev{pv(u(1), at("2021-01-01 00:00:00")), pv(u(1), page("/plausible.io"), at("2021-01-01 00:10:00")), pv(at("2021-01-01 00:25:00")), pv(page("/plausible.io"), at("2021-01-01 00:00:00"))},
			query:  `{"metrics":["visitors","visits","pageviews","events","bounce_rate","visit_duration"],"date_range":"all","dimensions":["event:page"],"order_by":[["event:page","desc"]]}`,
			want:   `[{"dimensions":["/plausible.io"],"metrics":[2,2,2,2,100,0]},{"dimensions":["/"],"metrics":[2,2,2,2,50,300]}]`},
		portCase{from: fQuery, name: "filtering by custom event property",
			events: []pev{ce("Purchase", props("package", "business"), browser("Chrome"), at("2021-01-01 00:00:00")), ce("Purchase", props("package", "business"), browser("Safari"), at("2021-01-01 00:00:00")),
				ce("Purchase", props("package", "business"), browser("Safari"), at("2021-01-01 00:25:00")), ce("Purchase", props("package", "personal"), browser("IE"), at("2021-01-01 00:25:00"))},
			query: `{"metrics":["visitors"],"date_range":"all","dimensions":["visit:browser"],"filters":[["is","event:name",["Purchase"]],["is","event:props:package",["business"]]]}`,
			want:  `[{"dimensions":["Safari"],"metrics":[2]},{"dimensions":["Chrome"],"metrics":[1]}]`},
		portCase{from: fQuery, name: "multiple breakdown timeseries with sources",
			events: []pev{pv(src("Google"), at("2021-01-01 00:00:00")), pv(at("2021-01-02 00:00:00")), pv(src("Google"), at("2021-01-02 00:00:00")), pv(src("Google"), at("2021-01-02 00:00:00")),
				pv(at("2021-01-03 00:00:00")), pv(at("2021-01-03 00:00:00")), pv(src("Twitter"), at("2021-01-03 00:00:00"))},
			query: `{"metrics":["visitors"],"date_range":["2021-01-01","2021-01-03"],"dimensions":["time","visit:source"]}`,
			want:  `[{"dimensions":["2021-01-01","Google"],"metrics":[1]},{"dimensions":["2021-01-02","Google"],"metrics":[2]},{"dimensions":["2021-01-02","Direct / None"],"metrics":[1]},{"dimensions":["2021-01-03","Direct / None"],"metrics":[2]},{"dimensions":["2021-01-03","` + twitterName + `"],"metrics":[1]}]`},
	)

	add(portCase{from: fQuery, name: "using the returned query object in a new POST request: yields the same results for a simple aggregate query",
		tz: "Europe/Tallinn", again: true,
		events: []pev{pv(u(7), at("2021-01-01 00:00:00")), pv(u(7), at("2021-01-01 00:25:00")), pv(at("2021-01-01 00:00:00"))},
		query:  `{"metrics":["pageviews"],"date_range":"all"}`, want: portAgg("3")})

	// query_test.exs: "pagination".
	eight := portPages("/1", "/2", "/3", "/4", "/5", "/6", "/7", "/8")
	paged := func(name, pagination, want string) portCase {
		return portCase{from: fQuery, name: name, events: eight,
			query: `{"metrics":["pageviews"],"date_range":"all","dimensions":["event:page"],"order_by":[["event:page","asc"]],"include":{"total_rows":true},"pagination":` + pagination + `}`,
			want:  want, meta: `{"total_rows":8}`}
	}
	rows := func(paths ...string) string {
		var r []string
		for _, p := range paths {
			r = append(r, fmt.Sprintf(`{"dimensions":[%q],"metrics":[1]}`, p))
		}
		return "[" + portJoin(r) + "]"
	}
	add(paged("pagination above total count - all results are returned", `{"limit":10}`, rows("/1", "/2", "/3", "/4", "/5", "/6", "/7", "/8")),
		paged("pagination with offset (limit 3)", `{"limit":3}`, rows("/1", "/2", "/3")),
		paged("pagination with offset (offset 3)", `{"limit":3,"offset":3}`, rows("/4", "/5", "/6")),
		paged("pagination with offset (offset 6)", `{"limit":3,"offset":6}`, rows("/7", "/8")),
		paged("pagination with offset (offset 9)", `{"limit":3,"offset":9}`, `[]`),
	)

	// query_test.exs: "scroll_depth" (the others ask Plausible's internal route).
	// Its "scroll depth is (not yet) available in public API" (a 400) is not
	// ported: Plausible's v2 docs now list scroll_depth, and issue 31 asks
	// for it (docs/query-api.md#plausible-test-port).
	add(portCase{from: fQuery, name: "can query scroll_depth metric with a page filter",
		events: []pev{pv(u(123), at("2021-01-01 00:00:00")), engagement(40, u(123), at("2021-01-01 00:00:10")), pv(u(123), at("2021-01-01 00:00:10")),
			engagement(60, u(123), at("2021-01-01 00:00:20")), pv(u(456), at("2021-01-01 00:00:00")), engagement(80, u(456), at("2021-01-01 00:00:10"))},
		query: `{"metrics":["scroll_depth"],"date_range":"all","filters":[["is","event:page",["/"]]]}`, want: portAgg("70")},
		portCase{from: fQuery, name: "scroll depth is 0 when no engagement data in range", events: []pev{pv(at("2021-01-01 00:00:00"))},
			query: `{"metrics":["visitors","scroll_depth"],"date_range":"all","filters":[["is","event:page",["/"]]]}`, want: portAgg("1, null")},
		portCase{from: fQuery, name: "breakdown by event:page with scroll_depth metric",
			events: []pev{pv(u(12), page("/blog"), at("2020-01-01 00:00:00")), engagement(20, u(12), page("/blog"), at("2020-01-01 00:01:00")),
				pv(u(12), page("/another"), at("2020-01-01 00:01:00")), engagement(24, u(12), page("/another"), at("2020-01-01 00:02:00")),
				pv(u(34), page("/blog"), at("2020-01-01 00:00:00")), engagement(17, u(34), page("/blog"), at("2020-01-01 00:01:00")),
				pv(u(34), page("/another"), at("2020-01-01 00:01:00")), engagement(26, u(34), page("/another"), at("2020-01-01 00:02:00")),
				pv(u(34), page("/blog"), at("2020-01-01 00:02:00")), engagement(60, u(34), page("/blog"), at("2020-01-01 00:03:00")),
				pv(u(56), page("/blog"), at("2020-01-01 00:00:00")), engagement(100, u(56), page("/blog"), at("2020-01-01 00:01:00"))},
			query: `{"metrics":["scroll_depth"],"date_range":"all","dimensions":["event:page"]}`,
			want:  `[{"dimensions":["/blog"],"metrics":[60]},{"dimensions":["/another"],"metrics":[25]}]`},
	)

	// query_test.exs: "revenue metrics".
	payments := []pev{ce("Purchase", at("2021-01-01 00:00:00"), revenue("100.3", "USD")), ce("Payment", at("2021-01-01 00:00:00"), revenue("40.3", "USD")),
		ce("Payment", at("2021-01-01 00:00:00"), revenue("60.6", "USD")), ce("Subscription", at("2021-01-01 00:00:00"), revenue("100", "EUR")), ce("Signup", at("2021-01-01 00:00:00"))}
	paymentGoals := []pgoal{{event: "Purchase", currency: "USD"}, {event: "Payment", currency: "USD"}, {event: "Subscription", currency: "EUR"}, {event: "Signup"}}
	noRevenue := `{"code":"no_revenue_goals_matching","warning":"Revenue metrics are null as there are no matching revenue goals."}`
	add(portCase{from: fQuery, name: "not requested leads to no metric_warnings",
		query: `{"metrics":["pageviews"],"date_range":"all"}`, want: portAgg("0"), meta: `{"metric_warnings":null}`},
		portCase{from: fQuery, name: "no revenue goals configured", goals: []pgoal{{event: "Signup"}}, events: []pev{ce("Signup", at("2021-01-01 00:00:00"))},
			query: `{"metrics":["average_revenue","total_revenue"],"date_range":"all","dimensions":["event:goal"]}`,
			want:  `[{"dimensions":["Signup"],"metrics":[null,null]}]`,
			meta:  `{"metric_warnings":{"average_revenue":` + noRevenue + `,"total_revenue":` + noRevenue + `}}`},
		portCase{from: fQuery, name: "not filtering or grouping by goals leads to warnings",
			query: `{"metrics":["average_revenue","total_revenue"],"date_range":"all"}`, want: portAgg("null, null"),
			meta: `{"metric_warnings":{"average_revenue":` + noRevenue + `,"total_revenue":` + noRevenue + `}}`},
		portCase{from: fQuery, name: "filtering by revenue goals with same currency", goals: paymentGoals, events: payments,
			query: `{"metrics":["events","average_revenue","total_revenue"],"date_range":"all","filters":[["is","event:goal",["Signup","Purchase","Payment"]]]}`,
			want:  portAgg(`4,{"currency":"USD","long":"$67.07","short":"$67.1","value":67.066},{"currency":"USD","long":"$201.20","short":"$201.2","value":201.2}`),
			meta:  `{"metric_warnings":null}`},
		portCase{from: fQuery, name: "filtering by revenue goals with different currencies", goals: paymentGoals, events: payments,
			query: `{"metrics":["average_revenue","total_revenue"],"date_range":"all","filters":[["is","event:goal",["Subscription","Payment"]]]}`,
			want:  portAgg("null, null"),
			meta: `{"metric_warnings":{"average_revenue":{"code":"no_single_revenue_currency","warning":"Revenue metrics are null as there are multiple currencies for the selected event:goals."},` +
				`"total_revenue":{"code":"no_single_revenue_currency","warning":"Revenue metrics are null as there are multiple currencies for the selected event:goals."}}}`},
		portCase{from: fQuery, name: "breakdown by revenue goals", goals: paymentGoals, events: payments,
			query: `{"metrics":["average_revenue","total_revenue"],"date_range":"all","dimensions":["event:goal"]}`,
			want: `[{"dimensions":["Purchase"],"metrics":[{"currency":"USD","long":"$100.30","short":"$100.3","value":100.3},{"currency":"USD","long":"$100.30","short":"$100.3","value":100.3}]},` +
				`{"dimensions":["Subscription"],"metrics":[{"currency":"EUR","long":"€100.00","short":"€100.0","value":100.0},{"currency":"EUR","long":"€100.00","short":"€100.0","value":100.0}]},` +
				`{"dimensions":["Payment"],"metrics":[{"currency":"USD","long":"$50.45","short":"$50.4","value":50.45},{"currency":"USD","long":"$100.90","short":"$100.9","value":100.9}]},` +
				`{"dimensions":["Signup"],"metrics":[null,null]}]`,
			meta: `{"metric_warnings":null}`},
		portCase{from: fQuery, name: "breakdown by revenue goals + filtering", goals: paymentGoals, events: payments,
			query: `{"metrics":["average_revenue","total_revenue"],"date_range":"all","filters":[["is","event:goal",["Signup","Purchase"]]],"dimensions":["event:goal"]}`,
			want: `[{"dimensions":["Purchase"],"metrics":[{"currency":"USD","long":"$100.30","short":"$100.3","value":100.3},{"currency":"USD","long":"$100.30","short":"$100.3","value":100.3}]},` +
				`{"dimensions":["Signup"],"metrics":[null,null]}]`,
			meta: `{"metric_warnings":null}`},
	)

	// query_test.exs: "behavioral (has_done/has_not_done) filters" (Plausible's
	// internal route; its docs list them for the public API).
	purchases := []pev{ce("pageview", u(1), at("2021-01-01 00:00:00")), ce("AddToCart", u(1), at("2021-01-01 00:00:00")), ce("Purchase", u(1), at("2021-01-01 00:00:00")),
		ce("pageview", u(2), at("2021-01-01 00:00:00")), ce("Purchase", u(2), at("2021-01-01 00:00:00")), ce("pageview", u(3), at("2021-01-01 00:00:00")),
		ce("pageview", u(4), at("2021-01-01 00:00:00")), ce("Purchase", u(5), at("2021-01-01 00:00:00"))}
	blogVisits := []pev{pv(u(1), page("/blog/post/1"), at("2021-01-01 00:00:00")), pv(u(1), at("2021-01-01 00:00:00")), pv(u(2), at("2021-01-01 00:00:00")), pv(u(3), page("/blog/post/1"), at("2021-01-01 00:00:00"))}
	conversions := []pev{ce("Conversion", u(1), at("2021-01-01 00:00:00")), ce("Conversion", u(1), at("2021-01-01 00:00:00")), pv(u(1), at("2021-01-01 00:00:00")),
		pv(u(1), at("2021-01-01 00:00:00")), pv(u(1), at("2021-01-01 00:00:00")), ce("Conversion", u(2), at("2021-01-01 00:00:00")), pv(u(2), at("2021-01-01 00:00:00")),
		ce("Conversion", u(3), at("2021-01-01 00:00:00")), pv(u(4), at("2021-01-01 00:00:00"))}
	// Adapted: the fixture's user_id 1 has events on three days. Plausible's fixture sets the id
	// directly; through Plausible's tracker it is a cookieless hash that changes every day, so
	// Plausible's own ingestion would count three visitors (as Tally's cookieless ids do). The
	// case's users go through Tally's envelope with a stable anon_id instead (stableIDs), as a
	// client that keeps an id sends them: one user over three days is one visitor, and the case
	// still asks what it asks, that has_done counts the visits.
	add(portCase{from: fQuery, name: "has_done does counting by sessions",
		events: []pev{ce("Conversion", u(1), at("2021-01-01 00:00:00")), pv(u(1), at("2021-01-01 00:01:00")), pv(u(1), at("2021-01-02 00:00:00")), pv(u(1), at("2021-01-02 00:01:00")),
			ce("Conversion", u(1), at("2021-01-03 00:00:00")), pv(u(1), at("2021-01-03 00:01:00")), pv(u(1), at("2021-01-03 00:02:00")), pv(u(1), at("2021-01-03 00:03:00")),
			ce("Conversion", u(2), at("2021-01-01 00:00:00")), pv(u(2), at("2021-01-01 00:01:00")), pv(u(2), at("2021-01-01 00:02:00")), pv(u(2), at("2021-01-01 00:03:00")), pv(u(2), at("2021-01-01 00:04:00"))},
		query: `{"metrics":["visitors","visits","events","pageviews"],"date_range":"all","filters":[["has_done",["is","event:name",["Conversion"]]]]}`,
		want:  portAgg("2, 3, 11, 8"), stableIDs: true},
		portCase{from: fQuery, name: "has_done returns all events by users who match condition if no further filters are provided", events: purchases,
			query: `{"metrics":["visitors","events","pageviews"],"date_range":"all","filters":[["has_done",["is","event:name",["Purchase"]]]]}`, want: portAgg("3, 6, 2")},
		portCase{from: fQuery, name: "has_done event:page filter", events: blogVisits,
			query: `{"metrics":["visitors","pageviews"],"date_range":"all","filters":[["has_done",["contains","event:page",["/blog/"]]]]}`, want: portAgg("2, 3")},
		portCase{from: fQuery, name: "has_not_done event:page filter", events: blogVisits,
			query: `{"metrics":["visitors","pageviews"],"date_range":"all","filters":[["has_not_done",["contains","event:page",["/blog/"]]]]}`, want: portAgg("1, 1")},
		portCase{from: fQuery, name: "has_done event:goal filter", goals: []pgoal{{event: "Conversion"}}, events: conversions,
			query: `{"metrics":["visitors","pageviews"],"date_range":"all","filters":[["has_done",["is","event:goal",["Conversion"]]],["is","event:name",["pageview"]]]}`, want: portAgg("2, 4")},
		portCase{from: fQuery, name: "has_not_done event:goal filter", goals: []pgoal{{event: "Conversion"}}, events: conversions,
			query: `{"metrics":["visitors","pageviews"],"date_range":"all","filters":[["has_not_done",["is","event:goal",["Conversion"]]],["is","event:name",["pageview"]]]}`, want: portAgg("1, 1")},
		portCase{from: fQuery, name: "visit filters are not allowed with has_done/has_not_done filters",
			query: `{"metrics":["visitors"],"date_range":"all","dimensions":["visit:browser"],"filters":[["has_done",["is","visit:browser",["Chrome"]]]]}`, status: 400},
		portCase{from: fQuery, name: "segment filters are (not yet) available in public API",
			query: `{"metrics":["visitors"],"date_range":"all","filters":[["is","segment",[1]]]}`, status: 400},
	)

	// Saved segments: the dashboard API's query test of a shared link
	// limited to a segment (its query through the public API), and the
	// refusals of query_parse_and_build_test.exs's "filtering with segments".
	foo := []pev{pv(u(5), page("/foo"), at("2021-01-01 00:00:00")), pv(u(5), at("2021-01-01 00:25:00")), pv(at("2021-01-01 00:00:00"))}
	scandinavia := []pseg{{name: "Scandinavia", data: `{"filters":[["is","event:page",["/foo"]]]}`}}
	add(
		portCase{from: fStatsQuery, name: "returns metrics with shared link auth that is limited to segment", events: foo, segments: scandinavia,
			query: `{"metrics":["pageviews"],"date_range":"all","filters":[["is","segment",["$seg:Scandinavia"]]]}`, want: portAgg("1")},
		portCase{from: fParseBuild, name: "parsing fails when too many segments in query", events: foo, segments: scandinavia,
			query: `{"metrics":["visitors"],"date_range":"all","filters":[["and",[` + strings.Repeat(`["is","segment",["$seg:Scandinavia"]],`, 10) +
				`["is","segment",["$seg:Scandinavia"]]]]]}`, status: 400},
		portCase{from: fParseBuild, name: "validation fails with string segment ids", events: foo, segments: scandinavia,
			query: `{"metrics":["visitors"],"date_range":"all","filters":[["is","segment",["123"]]]}`, status: 400},
	)

	// query_special_metrics_test.exs.
	authors := []pev{pv(page("/blog/1"), props("author", "Uku")), pv(page("/blog/2"), props("author", "Uku")), pv(page("/blog/3"), props("author", "Uku")),
		pv(page("/blog/1"), props("author", "Marko")), pv(page("/blog/2"), props("author", "Marko"), u(1)), pv(page("/blog/3"), props("author", "Marko"), u(1)),
		pv(page("/blog")), pv(props("author", "Marko")), pv()}
	registers := []pev{ce("pageview", page("/en/register")), ce("Signup", page("/en/register")), ce("Signup", page("/en/register")),
		ce("Signup", page("/it/register"), u(1)), ce("Signup", page("/it/register"), u(1)), ce("pageview", page("/it/register"))}
	add(portCase{from: fSpecial, name: "returns conversion_rate in a goal filtered custom prop breakdown", goals: []pgoal{{page: "/blog**"}}, events: authors,
		query: `{"metrics":["visitors","events","conversion_rate"],"date_range":"all","filters":[["is","event:goal",["Visit /blog**"]]],"dimensions":["event:props:author"]}`,
		want:  `[{"dimensions":["Uku"],"metrics":[3,3,37.5]},{"dimensions":["Marko"],"metrics":[2,3,25.0]},{"dimensions":["(none)"],"metrics":[1,1,12.5]}]`},
		portCase{from: fSpecial, name: "returns conversion_rate alone in a goal filtered custom prop breakdown", goals: []pgoal{{page: "/blog**"}},
			events: []pev{pv(page("/blog/1"), props("author", "Uku")), pv()},
			query:  `{"metrics":["conversion_rate"],"date_range":"all","dimensions":["event:props:author"],"filters":[["is","event:goal",["Visit /blog**"]]]}`,
			want:   `[{"dimensions":["Uku"],"metrics":[50]}]`},
		portCase{from: fSpecial, name: "returns conversion_rate in a goal filtered event:page breakdown", goals: []pgoal{{event: "Signup"}}, events: registers,
			query: `{"metrics":["visitors","events","group_conversion_rate"],"date_range":"all","dimensions":["event:page"],"filters":[["is","event:goal",["Signup"]]]}`,
			want:  `[{"dimensions":["/en/register"],"metrics":[2,2,66.67]},{"dimensions":["/it/register"],"metrics":[1,2,50.0]}]`},
		portCase{from: fSpecial, name: "returns conversion_rate alone in a goal filtered event:page breakdown", goals: []pgoal{{event: "Signup"}},
			events: []pev{ce("pageview", page("/en/register")), ce("Signup", page("/en/register"))},
			query:  `{"metrics":["group_conversion_rate"],"date_range":"all","filters":[["is","event:goal",["Signup"]]],"dimensions":["event:page"]}`,
			want:   `[{"dimensions":["/en/register"],"metrics":[50.0]}]`},
		portCase{from: fSpecial, name: "returns conversion_rate in a multi-goal filtered visit:screen_size breakdown", goals: []pgoal{{event: "Purchase"}, {event: "AddToCart"}},
			events: []pev{ce("pageview", device("Mobile")), ce("AddToCart", device("Mobile")), ce("AddToCart", device("Mobile")),
				ce("AddToCart", device("Desktop"), u(1)), ce("Purchase", device("Desktop"), u(1)), ce("pageview", device("Desktop"))},
			query: `{"metrics":["visitors","events","group_conversion_rate"],"date_range":"all","dimensions":["visit:device"],"filters":[["is","event:goal",["AddToCart","Purchase"]]]}`,
			want:  `[{"dimensions":["Mobile"],"metrics":[2,2,66.67]},{"dimensions":["Desktop"],"metrics":[1,2,50]}]`},
		portCase{from: fSpecial, name: "returns conversion_rate alone in a goal filtered visit:screen_size breakdown", goals: []pgoal{{event: "AddToCart"}},
			events: []pev{ce("pageview", device("Mobile")), ce("AddToCart", device("Mobile"))},
			query:  `{"metrics":["conversion_rate"],"date_range":"all","dimensions":["visit:device"],"filters":[["is","event:goal",["AddToCart"]]]}`,
			want:   `[{"dimensions":["Mobile"],"metrics":[50]}]`},
		portCase{from: fSpecial, name: "can break down by visit:device with only percentage metric",
			imports: []pimport{portImp("visitors", hVisitors, "2021-01-01,5,5,0,5,50"), portImp("devices", hDevices, "2021-01-01,Desktop,5,5,50,0,5")},
			events:  []pev{pv(device("Mobile")), pv(device("Mobile")), pv(device("Desktop"))},
			query:   `{"metrics":["percentage"],"date_range":"all","dimensions":["visit:device"],"include":{"imports":true}}`,
			want:    `[{"dimensions":["Desktop"],"metrics":[75.0]},{"dimensions":["Mobile"],"metrics":[25.0]}]`},
		portCase{from: fSpecial, name: "exit_rate in visit:exit_page breakdown without filters",
			events: []pev{pv(u(1), page("/one"), at("2021-01-01 00:00:00")), pv(u(1), page("/two"), at("2021-01-01 00:10:00")), pv(u(3), page("/one"), at("2021-01-01 00:00:00")),
				pv(u(3), page("/never-exit"), at("2021-01-01 00:00:00")), ce("a", u(3), page("/one"), at("2021-01-01 00:00:00")), pv(u(3), page("/one"), at("2021-01-01 00:10:00"))},
			query: `{"metrics":["exit_rate"],"date_range":"all","dimensions":["visit:exit_page"],"order_by":[["exit_rate","desc"]]}`,
			want:  `[{"dimensions":["/two"],"metrics":[100]},{"dimensions":["/one"],"metrics":[33.3]}]`},
		portCase{from: fSpecial, name: "exit_rate in visit:exit_page breakdown filtered by visit:exit_page",
			events: []pev{pv(page("/one"), at("2021-01-01 00:00:00")), pv(page("/one"), at("2021-01-01 00:00:00")), pv(u(1), page("/one"), at("2021-01-01 00:00:00")), pv(u(1), page("/two"), at("2021-01-01 00:10:00"))},
			query:  `{"metrics":["exit_rate"],"date_range":"all","dimensions":["visit:exit_page"],"filters":[["is","visit:exit_page",["/one"]]]}`,
			want:   `[{"dimensions":["/one"],"metrics":[66.7]}]`},
	)

	// query_goal_dimension_test.exs: "breakdown by event:goal".
	add(portCase{from: fGoalDim, name: "returns custom event goals and pageview goals", goals: []pgoal{{event: "Purchase"}, {page: "/test"}},
		events: []pev{pv(at("2021-01-01 00:00:01"), page("/test")), ce("Purchase", at("2021-01-01 00:00:03")), ce("Purchase", at("2021-01-01 00:00:03"))},
		query:  `{"metrics":["visitors"],"date_range":"all","dimensions":["event:goal"]}`,
		want:   `[{"dimensions":["Purchase"],"metrics":[2]},{"dimensions":["Visit /test"],"metrics":[1]}]`},
		portCase{from: fGoalDim, name: "returns pageview goals containing wildcards", goals: []pgoal{{page: "/**/post"}, {page: "/blog**"}},
			events: []pev{pv(page("/blog"), u(7)), pv(page("/blog/post-1"), u(7)), pv(page("/blog/post-2"), u(7)), pv(page("/blog/something/post")), pv(page("/different/page/post"))},
			query:  `{"metrics":["visitors","pageviews"],"date_range":"all","dimensions":["event:goal"],"order_by":[["pageviews","desc"]]}`,
			want:   `[{"dimensions":["Visit /blog**"],"metrics":[2,4]},{"dimensions":["Visit /**/post"],"metrics":[2,2]}]`},
		portCase{from: fGoalDim, name: "does not return goals that are not configured for the site", events: []pev{pv(page("/register")), ce("Signup")},
			query: `{"metrics":["visitors","pageviews"],"date_range":"all","dimensions":["event:goal"]}`, want: `[]`},
		portCase{from: fGoalDim, name: "returns conversion_rate in an event:goal breakdown", goals: []pgoal{{event: "Signup"}, {page: "/blog**"}},
			events: []pev{ce("Signup", u(1)), ce("Signup", u(1)), pv(page("/blog")), pv(page("/blog/post")), pv()},
			query:  `{"metrics":["visitors","events","conversion_rate"],"date_range":"all","dimensions":["event:goal"]}`,
			want:   `[{"dimensions":["Visit /blog**"],"metrics":[2,2,50.0]},{"dimensions":["Signup"],"metrics":[1,2,25.0]}]`},
		portCase{from: fGoalDim, name: "returns conversion_rate alone in an event:goal breakdown", goals: []pgoal{{event: "Signup"}},
			events: []pev{ce("Signup", u(1)), pv()},
			query:  `{"metrics":["conversion_rate"],"date_range":"all","dimensions":["event:goal"]}`,
			want:   `[{"dimensions":["Signup"],"metrics":[50.0]}]`},
	)

	// query_comparisons_test.exs (Plausible's internal route; Tally answers
	// comparisons on POST /api/v2/query).
	browsers := func(b string, n int, ts string) []pev {
		var es []pev
		for i := 0; i < n; i++ {
			es = append(es, pv(browser(b), at(ts)))
		}
		return es
	}
	var lowLimit []pev
	for _, b := range []struct {
		name string
		n    int
		ts   string
	}{{"Firefox", 4, "2021-01-01 00:00:00"}, {"Safari", 3, "2021-01-01 00:00:00"}, {"Chrome", 1, "2021-01-01 00:00:00"},
		{"Chrome", 3, "2021-01-07 00:00:00"}, {"Firefox", 2, "2021-01-07 00:00:00"}, {"Safari", 1, "2021-01-08 00:00:00"}} {
		lowLimit = append(lowLimit, browsers(b.name, b.n, b.ts)...)
	}
	add(portCase{from: fComparison, name: "aggregates a single metric",
		events: []pev{pv(at("2021-01-01 00:00:00")), pv(at("2021-01-01 00:25:00")), pv(at("2021-01-02 00:00:00")), pv(at("2021-01-07 00:00:00"))},
		query:  `{"metrics":["pageviews"],"date_range":["2021-01-07","2021-01-13"],"include":{"comparisons":{"mode":"previous_period"}}}`,
		want:   `[{"dimensions":[],"metrics":[1],"comparison":{"change":[-67],"dimensions":[],"metrics":[3]}}]`},
		portCase{from: fComparison, name: "timeseries comparison",
			events: []pev{pv(at("2021-01-01 00:00:00")), pv(at("2021-01-01 00:25:00")), pv(at("2021-01-06 00:00:00")), pv(at("2021-01-07 00:00:00")), pv(at("2021-01-08 00:00:00"))},
			query:  `{"metrics":["pageviews"],"date_range":["2021-01-07","2021-01-13"],"dimensions":["time:day"],"include":{"comparisons":{"mode":"previous_period"}}}`,
			want: `[{"dimensions":["2021-01-07"],"metrics":[1],"comparison":{"dimensions":["2020-12-31"],"metrics":[0],"change":[100]}},` +
				`{"dimensions":["2021-01-08"],"metrics":[1],"comparison":{"dimensions":["2021-01-01"],"metrics":[2],"change":[-50]}},` +
				`{"dimensions":["2021-01-09"],"metrics":[0],"comparison":{"dimensions":["2021-01-02"],"metrics":[0],"change":[0]}},` +
				`{"dimensions":["2021-01-10"],"metrics":[0],"comparison":{"dimensions":["2021-01-03"],"metrics":[0],"change":[0]}},` +
				`{"dimensions":["2021-01-11"],"metrics":[0],"comparison":{"dimensions":["2021-01-04"],"metrics":[0],"change":[0]}},` +
				`{"dimensions":["2021-01-12"],"metrics":[0],"comparison":{"dimensions":["2021-01-05"],"metrics":[0],"change":[0]}},` +
				`{"dimensions":["2021-01-13"],"metrics":[0],"comparison":{"dimensions":["2021-01-06"],"metrics":[1],"change":[-100]}}]`},
		portCase{from: fComparison, name: "dimensional comparison with low limit", events: lowLimit,
			query: `{"metrics":["visitors","percentage"],"date_range":["2021-01-07","2021-01-13"],"dimensions":["visit:browser"],"include":{"comparisons":{"mode":"previous_period"}},"pagination":{"limit":2}}`,
			want: `[{"dimensions":["Chrome"],"metrics":[3,50.0],"comparison":{"dimensions":["Chrome"],"metrics":[1,12.5],"change":[200,300]}},` +
				`{"dimensions":["Firefox"],"metrics":[2,33.3],"comparison":{"dimensions":["Firefox"],"metrics":[4,50.0],"change":[-50,-33]}}]`},
		portCase{from: fComparison, name: "dimensional comparison with low limit (offset 2)", events: lowLimit,
			query: `{"metrics":["visitors","percentage"],"date_range":["2021-01-07","2021-01-13"],"dimensions":["visit:browser"],"include":{"comparisons":{"mode":"previous_period"}},"pagination":{"limit":2,"offset":2}}`,
			want:  `[{"dimensions":["Safari"],"metrics":[1,16.7],"comparison":{"dimensions":["Safari"],"metrics":[3,37.5],"change":[-67,-55]}}]`},
		portCase{from: fComparison, name: "dimensional comparison with imported data",
			imports: []pimport{portImp("browsers", hBrowsers, "2021-01-01,Firefox,121,50,50,0,0,50", "2021-01-01,Chrome,99,39,39,0,0,39", "2021-01-01,Safari,99,10,10,0,0,10"),
				portImp("visitors", hVisitors, "2021-01-01,99,99,0,99,0")},
			events: []pev{pv(browser("Chrome"), at("2021-01-01 00:00:00")), pv(browser("Chrome"), at("2021-01-07 00:00:00")), pv(browser("Chrome"), at("2021-01-07 00:00:00")), pv(browser("Firefox"), at("2021-01-07 00:00:00"))},
			query:  `{"metrics":["visitors","percentage"],"date_range":["2021-01-07","2021-01-13"],"dimensions":["visit:browser"],"include":{"imports":true,"comparisons":{"mode":"previous_period"}},"pagination":{"limit":2}}`,
			want: `[{"dimensions":["Chrome"],"metrics":[2,66.7],"comparison":{"dimensions":["Chrome"],"metrics":[40,40.0],"change":[-95,67]}},` +
				`{"dimensions":["Firefox"],"metrics":[1,33.3],"comparison":{"dimensions":["Firefox"],"metrics":[50,50.0],"change":[-98,-33]}}]`},
	)

	// query_imported_test.exs.
	add(portCase{from: fImported, name: "does not count imported stats unless specified",
		imports: []pimport{portImp("visitors", hVisitors, "2023-01-01,1,1,0,1,10")}, events: []pev{pv(at("2023-01-01 00:00:00"))},
		query: `{"metrics":["pageviews"],"date_range":"all"}`, want: portAgg("1")},
		portCase{from: fImported, name: "does not count imported stats unless specified (with imports)",
			imports: []pimport{portImp("visitors", hVisitors, "2023-01-01,1,1,0,1,10")}, events: []pev{pv(at("2023-01-01 00:00:00"))},
			query: `{"metrics":["pageviews"],"date_range":"all","include":{"imports":true}}`, want: portAgg("2"),
			meta: `{"imports_included":true,"imports_warning":null}`},
		portCase{from: fImported, name: "filters correctly with 'is' operator",
			imports: []pimport{portImp("pages", hPages, "2023-01-01,/blog,3,5", "2023-01-01,/blog/post/1,2,2")},
			events:  []pev{pv(page("/blog"), at("2023-01-01 00:00:00")), pv(page("/blog"), at("2023-01-01 00:00:00")), pv(page("/blog/post/1"), at("2023-01-01 00:00:00")), pv(page("/about"), at("2023-01-01 00:00:00"))},
			query:   `{"metrics":["visitors","pageviews"],"date_range":"all","filters":[["is","event:page",["/blog"]]],"include":{"imports":true}}`, want: portAgg("5, 7")},
		portCase{from: fImported, name: "filters correctly with 'is' operator (case insensitive)",
			imports: []pimport{portImp("pages", hPages, "2023-01-01,/BLOG,3,5", "2023-01-01,/blog/post/1,2,2")},
			events:  []pev{pv(page("/BLOG"), at("2023-01-01 00:00:00")), pv(page("/blog"), at("2023-01-01 00:00:00")), pv(page("/blog/post/1"), at("2023-01-01 00:00:00")), pv(page("/about"), at("2023-01-01 00:00:00"))},
			query:   `{"metrics":["visitors","pageviews"],"date_range":"all","filters":[["is","event:page",["/blOG"],{"case_sensitive":false}]],"include":{"imports":true}}`, want: portAgg("5, 7")},
		portCase{from: fImported, name: "filters correctly with 'contains' operator",
			imports: []pimport{portImp("pages", hPages, "2023-01-01,/blog,3,5", "2023-01-01,/blog/post/1,2,2", "2023-01-01,/blog/POST/2,1,3")},
			events:  []pev{pv(page("/blog"), at("2023-01-01 00:00:00")), pv(page("/blog/post/1"), at("2023-01-01 00:00:00")), pv(page("/blog/post/2"), at("2023-01-01 00:00:00")), pv(page("/about"), at("2023-01-01 00:00:00"))},
			query:   `{"metrics":["visitors","pageviews"],"date_range":"all","filters":[["contains","event:page",["blog/post"]]],"include":{"imports":true}}`, want: portAgg("4, 4")},
		portCase{from: fImported, name: "filters correctly with 'contains' operator (case insensitive)",
			imports: []pimport{portImp("pages", hPages, "2023-01-01,/BLOG/POST/1,3,5", "2023-01-01,/blog/post/2,2,2")},
			events:  []pev{pv(page("/BLOG/post/1"), at("2023-01-01 00:00:00")), pv(page("/blog/POST/2"), at("2023-01-01 00:00:00")), pv(page("/about"), at("2023-01-01 00:00:00"))},
			query:   `{"metrics":["visitors","pageviews"],"date_range":"all","filters":[["contains","event:page",["blog/POST"],{"case_sensitive":false}]],"include":{"imports":true}}`, want: portAgg("7, 9")},
	)
	purchaseImports := []pimport{portImp("custom_events", hEvents, "2023-01-01,Purchase,3,5", "2023-01-01,Signup,2,2")}
	purchaseEvents := []pev{ce("Purchase", at("2023-01-01 00:00:00")), ce("Purchase", at("2023-01-01 00:00:00")), ce("Signup", at("2023-01-01 00:00:00"))}
	for _, f := range []struct{ name, filter string }{
		{"aggregates custom event goals with 'is' and 'contains' operators (is)", `["is","event:goal",["Purchase"]]`},
		{"aggregates custom event goals with 'is' and 'contains' operators (contains)", `["contains","event:goal",["Purch","sign"]]`},
		{"aggregates custom event goals with 'is' and 'contains' operators (case insensitive, is)", `["is","event:goal",["purchase"],{"case_sensitive":false}]`},
		{"aggregates custom event goals with 'is' and 'contains' operators (case insensitive, contains)", `["contains","event:goal",["PURCH"],{"case_sensitive":false}]`},
	} {
		add(portCase{from: fImported, name: f.name, goals: []pgoal{{event: "Purchase"}}, imports: purchaseImports, events: purchaseEvents,
			query: `{"metrics":["visitors","events"],"date_range":"all","filters":[` + f.filter + `],"include":{"imports":true}}`, want: portAgg("5, 7")})
	}
	add(portCase{from: fImported, name: "breaks down all metrics by visit:referrer with imported data",
		imports: []pimport{portImp("sources", hSources, "2021-01-01,,site.com,,,,,,2,2,2,120,1", "2021-01-01,,site.com/2,,,,,,2,2,2,0,2", "2021-01-01,,,,,,,,50,10,11,1100,0")},
		events:  []pev{pv(ref("https://site.com"), at("2021-01-01 00:00:00")), pv(ref("https://site.com/1"), at("2021-01-01 00:00:00"))},
		query:   `{"metrics":["visitors","visits","pageviews","bounce_rate","visit_duration"],"date_range":"all","dimensions":["visit:referrer"],"include":{"imports":true}}`,
		want: `[{"dimensions":["Direct / None"],"metrics":[10,11,50,0.0,100.0]},{"dimensions":["site.com"],"metrics":[3,3,3,67.0,40.0]},` +
			`{"dimensions":["site.com/2"],"metrics":[2,2,2,100.0,0.0]},{"dimensions":["site.com/1"],"metrics":[1,1,1,100.0,0.0]}]`},
		portCase{from: fImported, name: "breaks down all metrics by visit:utm_source with imported data",
			imports: []pimport{portImp("sources", hSources, "2021-01-01,,,SomeUTMSource,,,,,2,2,2,120,1", "2021-01-01,,,SomeUTMSource-2,,,,,2,2,2,0,2", "2021-01-01,,,,,,,,50,10,11,1100,0")},
			events:  []pev{pv(utm("utm_source=SomeUTMSource"), at("2021-01-01 00:00:00")), pv(utm("utm_source=SomeUTMSource-1"), at("2021-01-01 00:00:00"))},
			query:   `{"metrics":["visitors","visits","pageviews","bounce_rate","visit_duration"],"date_range":"all","dimensions":["visit:utm_source"],"include":{"imports":true}}`,
			want: `[{"dimensions":["SomeUTMSource"],"metrics":[3,3,3,67.0,40.0]},{"dimensions":["SomeUTMSource-2"],"metrics":[2,2,2,100.0,0.0]},` +
				`{"dimensions":["SomeUTMSource-1"],"metrics":[1,1,1,100.0,0.0]}]`},
		// Plausible's test lists /plausible.io (the site's own) before /include-me (imported), of
		// equal pageviews. No rule gives that order: Plausible orders by the query's order_by alone
		// (SQL.QueryBuilder.build_order_by, no tie-break), over a full join of its own rows and the
		// imported ones (Stats.Imported.merge_imported), so equal rows come as ClickHouse's join and
		// sort leave them. Like the other cases of equal rows, this one lists them in Tally's order:
		// the dimension's values ascending (docs/query-api.md#plausible-test-port).
		portCase{from: fImported, name: "pageviews breakdown by event:page - imported data having pageviews=0 and visitors=n should be bypassed",
			imports: []pimport{portImp("pages", hPages, "2021-01-01,/skip-me,1,0", "2021-01-01,/include-me,1,1")},
			events:  []pev{pv(at("2021-01-01 00:00:00")), pv(at("2021-01-01 00:25:00")), pv(page("/plausible.io"), at("2021-01-01 00:00:00"))},
			query:   `{"metrics":["pageviews"],"date_range":"all","dimensions":["event:page"],"include":{"imports":true}}`,
			want:    `[{"dimensions":["/"],"metrics":[2]},{"dimensions":["/include-me"],"metrics":[1]},{"dimensions":["/plausible.io"],"metrics":[1]}]`},
		portCase{from: fImported, name: "breakdown by visit:exit_page with: can query with visit:exit_page dimension",
			imports: []pimport{portImp("exit_pages", hExitPages, "2021-01-01,/b,2,3,5")},
			events:  []pev{pv(page("/a"), at("2021-01-01 00:00:00")), pv(u(7), page("/a"), at("2021-01-01 00:25:00")), pv(u(7), page("/b"), at("2021-01-01 00:35:00"))},
			query:   `{"metrics":["visits"],"date_range":"all","dimensions":["visit:exit_page"],"include":{"imports":true}}`,
			want:    `[{"dimensions":["/b"],"metrics":[4]},{"dimensions":["/a"],"metrics":[1]}]`},
		portCase{from: fImported, name: "returns screen sizes breakdown when filtering by screen size",
			imports: []pimport{portImp("devices", hDevices, "2021-01-01,Mobile,3,3,30,0,5")},
			events:  []pev{pv(at("2021-01-01 00:00:01"), device("Mobile"))},
			query:   `{"metrics":["visitors","pageviews"],"date_range":"all","dimensions":["visit:device"],"filters":[["is","visit:device",["Mobile"]]],"include":{"imports":true}}`,
			want:    `[{"dimensions":["Mobile"],"metrics":[4,6]}]`},
		portCase{from: fImported, name: "returns custom event goals and pageview goals", goals: []pgoal{{event: "Purchase"}, {page: "/test"}},
			imports: []pimport{portImp("custom_events", hEvents, "2021-01-01,Purchase,3,5"), portImp("pages", hPages, "2021-01-01,/test,2,2"), portImp("visitors", hVisitors, "2021-01-01,5,5,0,5,50")},
			events:  []pev{pv(at("2021-01-01 00:00:01"), page("/test")), ce("Purchase", at("2021-01-01 00:00:03")), ce("Purchase", at("2021-01-01 00:00:03"))},
			query:   `{"metrics":["visitors","events","pageviews","conversion_rate"],"date_range":"all","dimensions":["event:goal"],"include":{"imports":true}}`,
			want:    `[{"dimensions":["Purchase"],"metrics":[5,7,0,62.5]},{"dimensions":["Visit /test"],"metrics":[3,3,3,37.5]}]`},
		portCase{from: fImported, name: "includes imported data for time:day dimension",
			imports: []pimport{portImp("visitors", hVisitors, "2021-01-01,5,5,0,5,50")},
			events:  []pev{pv(at("2021-01-01 00:00:00")), pv(at("2021-01-01 00:10:00")), pv(at("2021-01-01 23:59:00"))},
			query:   `{"metrics":["visitors"],"date_range":["2021-01-01","2021-01-02"],"dimensions":["time:day"],"include":{"imports":true}}`,
			want:    `[{"dimensions":["2021-01-01"],"metrics":[8]}]`, meta: `{"imports_included":true}`},
		portCase{from: fImported, name: "adds a warning when time:hour dimension",
			imports: []pimport{portImp("visitors", hVisitors, "2021-01-01,5,5,0,5,50")},
			events:  []pev{pv(at("2021-01-01 00:00:00")), pv(at("2021-01-01 00:10:00")), pv(at("2021-01-01 23:59:00"))},
			query:   `{"metrics":["visitors"],"date_range":["2021-01-01","2021-01-02"],"dimensions":["time:hour"],"include":{"imports":true}}`,
			want:    `[{"dimensions":["2021-01-01 00:00:00"],"metrics":[2]},{"dimensions":["2021-01-01 23:00:00"],"metrics":[1]}]`,
			meta:    `{"imports_included":false,"imports_skip_reason":"unsupported_interval","imports_warning":"Imported stats are not included because the time dimension (i.e. the interval) is too short."}`},
		portCase{from: fImported, name: "adds a warning when query params are not supported for imported data", goals: []pgoal{{event: "Signup"}},
			imports: []pimport{portImp("visitors", hVisitors, "2021-01-19,9,9,0,9,90")}, events: []pev{ce("Signup", props("package", "large"))},
			query: `{"metrics":["visitors"],"date_range":"all","dimensions":["event:props:package"],"filters":[["is","event:goal",["Signup"]]],"include":{"imports":true}}`,
			want:  `[{"dimensions":["large"],"metrics":[1]}]`,
			meta:  `{"imports_included":false,"imports_skip_reason":"unsupported_query","imports_warning":"Imported stats are not included in the results because query parameters are not supported. For more information, see: https://plausible.io/docs/stats-api#filtering-imported-stats"}`},
		portCase{from: fImported, name: "does not add a warning when there are no site imports", goals: []pgoal{{event: "Signup"}},
			events: []pev{ce("Signup", props("package", "large"))},
			query:  `{"metrics":["visitors"],"date_range":"all","dimensions":["event:props:package"],"filters":[["is","event:goal",["Signup"]]],"include":{"imports":true}}`,
			meta:   `{"imports_included":false,"imports_skip_reason":"no_imported_data","imports_warning":null}`},
	)

	// query_validations_test.exs: "param validation" (the messages need not
	// match Plausible's: the status and the body's shape must).
	for _, v := range []struct{ name, query string }{
		{"does not allow querying conversion_rate without a goal filter", `{"metrics":["conversion_rate"],"date_range":"all","dimensions":["event:page"],"filters":[["is","event:props:author",["Uku"]]]}`},
		{"validates that dimensions are valid", `{"metrics":["visitors"],"date_range":"all","dimensions":["badproperty"]}`},
		{"empty custom property is invalid", `{"metrics":["visitors"],"date_range":"all","dimensions":["event:props:"]}`},
		{"validates that correct date range is used", `{"metrics":["visitors"],"date_range":"bad_period","dimensions":["event:name"]}`},
		{"fails when an invalid metric is provided", `{"metrics":["visitors","baa"],"date_range":"all","dimensions":["event:name"]}`},
		{"session metrics cannot be used with event:name dimension", `{"metrics":["visitors","bounce_rate"],"date_range":"all","dimensions":["event:name"]}`},
		{"session metrics cannot be used with event:props:* dimension", `{"metrics":["visitors","bounce_rate"],"date_range":"all","dimensions":["event:props:url"]}`},
		{"validates that metric views_per_visit cannot be used with event:page filter", `{"metrics":["views_per_visit"],"date_range":"all","filters":[["is","event:page",["/something"]]]}`},
		{"validates that metric views_per_visit cannot be used together with dimensions", `{"metrics":["views_per_visit"],"date_range":"all","dimensions":["event:name"]}`},
		{"validates a metric can't be asked multiple times", `{"metrics":["views_per_visit","visitors","visitors"],"date_range":"all"}`},
		{"handles filtering by visit:country with invalid country code", `{"metrics":["pageviews"],"date_range":"all","filters":[["is","visit:country",["USA"]]]}`},
	} {
		add(portCase{from: fValidation, name: v.name, query: v.query, status: 400})
	}

	// query_goal_custom_props_test.exs (a goal of Tally holds one custom
	// property: the test of two is left out).
	add(portCase{from: fGoalProps, name: "filters custom event goals by custom properties", goals: []pgoal{{event: "Purchase", prop: []string{"variant", "A"}}},
		events: []pev{ce("Purchase", props("variant", "A"), at("2021-01-01 00:00:01")), ce("Purchase", props("variant", "A"), at("2021-01-01 00:00:02")),
			ce("Purchase", props("variant", "B"), at("2021-01-01 00:00:03")), ce("Purchase", at("2021-01-01 00:00:04"))},
		query: `{"metrics":["visitors","events"],"date_range":"all","filters":[["is","event:goal",["Purchase"]]]}`, want: portAgg("2, 2")},
		portCase{from: fGoalProps, name: "goals without custom_props filter match all events", goals: []pgoal{{event: "Signup"}},
			events: []pev{ce("Signup", props("source", "google")), ce("Signup", props("source", "twitter")), ce("Signup")},
			query:  `{"metrics":["visitors","events"],"date_range":"all","filters":[["is","event:goal",["Signup"]]]}`, want: portAgg("3, 3")},
		portCase{from: fGoalProps, name: "breakdown by event:goal with custom property filters",
			goals:  []pgoal{{event: "Purchase A", prop: []string{"variant", "A"}}, {event: "Purchase B", prop: []string{"variant", "B"}}},
			events: []pev{ce("Purchase A", props("variant", "A"), u(1)), ce("Purchase A", props("variant", "A"), u(1)), ce("Purchase B", props("variant", "B"), u(1))},
			query:  `{"metrics":["visitors","events"],"date_range":"all","dimensions":["event:goal"]}`,
			want:   `[{"dimensions":["Purchase A"],"metrics":[1,2]},{"dimensions":["Purchase B"],"metrics":[1,1]}]`},
		portCase{from: fGoalProps, name: "custom property filters work with conversion_rate metric", goals: []pgoal{{event: "Signup", prop: []string{"method", "email"}}},
			events: []pev{pv(u(1)), ce("Signup", props("method", "email"), u(1)), pv(u(2)), ce("Signup", props("method", "google"), u(2)), pv(u(3))},
			query:  `{"metrics":["visitors","events","conversion_rate"],"date_range":"all","filters":[["is","event:goal",["Signup"]]]}`, want: portAgg("1, 1, 33.33")},
		// Plausible's test asserts the two rows in any order.
		portCase{from: fGoalProps, name: "custom property filters work with multi-dimensional breakdown", goals: []pgoal{{event: "Purchase", prop: []string{"variant", "A"}}},
			events: []pev{ce("Purchase", props("variant", "A", "plan", "premium")), ce("Purchase", props("variant", "A", "plan", "free"), u(2)), ce("Purchase", props("variant", "B", "plan", "premium"), u(3))},
			query:  `{"metrics":["visitors","events"],"date_range":"all","dimensions":["event:goal","event:props:plan"],"filters":[["is","event:goal",["Purchase"]]]}`,
			want:   `[{"dimensions":["Purchase","free"],"metrics":[1,1]},{"dimensions":["Purchase","premium"],"metrics":[1,1]}]`},
		portCase{from: fGoalProps, name: "custom property filters work with time series queries", goals: []pgoal{{event: "Click", prop: []string{"button", "cta"}}},
			events: []pev{ce("Click", props("button", "cta"), at("2021-01-01 00:00:00")), ce("Click", props("button", "nav"), at("2021-01-01 00:00:00")), ce("Click", props("button", "cta"), at("2021-01-02 00:00:00"))},
			query:  `{"metrics":["visitors"],"date_range":["2021-01-01","2021-01-02"],"dimensions":["time:day"],"filters":[["is","event:goal",["Click"]]]}`,
			want:   `[{"dimensions":["2021-01-01"],"metrics":[1]},{"dimensions":["2021-01-02"],"metrics":[1]}]`},
		// Plausible's test finds the two goals' rows in the answer, in any order, and no row named
		// after the event; these are in Tally's order.
		portCase{from: fGoalProps, name: "different goals with same event name but different custom props are distinguished",
			goals:  []pgoal{{event: "Button Click", name: "Red Button", prop: []string{"color", "red"}}, {event: "Button Click", name: "Blue Button", prop: []string{"color", "blue"}}},
			events: []pev{ce("Button Click", props("color", "red"), u(1)), ce("Button Click", props("color", "red"), u(1)), ce("Button Click", props("color", "blue"), u(2)), ce("Button Click", u(3))},
			query:  `{"metrics":["visitors","events"],"date_range":"all","dimensions":["event:goal"]}`,
			want:   `[{"dimensions":["Blue Button"],"metrics":[1,1]},{"dimensions":["Red Button"],"metrics":[1,2]}]`},
	)

	// query_timezone_test.exs: "query parser timezone conversion for date ranges".
	add(portCase{from: fTimezone, name: "uses site timezone to determine 'today' (negative offset)", tz: "America/New_York", now: "2024-01-02 02:00:00",
		events: []pev{pv(at("2024-01-01 12:00:00")), pv(at("2024-01-02 12:00:00")), pv(at("2024-01-02 14:00:00"))},
		query:  `{"metrics":["pageviews"],"date_range":"day"}`, want: portAgg("1")},
		portCase{from: fTimezone, name: "uses site timezone to determine 'today' (positive offset)", tz: "Asia/Tokyo", now: "2024-01-01 16:00:00",
			events: []pev{pv(at("2024-01-01 10:00:00")), pv(at("2024-01-01 12:00:00")), pv(at("2024-01-02 12:00:00"))},
			query:  `{"metrics":["pageviews"],"date_range":"day"}`, want: portAgg("1")},
		portCase{from: fTimezone, name: "handles timezone gap when date starts at non-existent midnight (spring forward)", tz: "America/Santiago",
			events: []pev{pv(at("2022-09-11 03:59:00")), pv(at("2022-09-11 04:00:00")), pv(at("2022-09-11 05:00:00"))},
			query:  `{"metrics":["pageviews"],"date_range":["2022-09-11","2022-09-11"]}`, want: portAgg("2")},
		portCase{from: fTimezone, name: "handles ambiguous datetime at start of range (fall back)", tz: "America/Havana",
			events: []pev{pv(at("2023-11-05 04:30:00")), pv(at("2023-11-05 05:30:00")), pv(at("2023-11-05 06:30:00"))},
			query:  `{"metrics":["pageviews"],"date_range":["2023-11-05","2023-11-05"]}`, want: portAgg("2")},
		// Adapted: the test's third pageview, 03:00 UTC, is midnight of the 24th in the time zone
		// data Plausible's test was written against; in Go's (the IANA data), Paraguay falls back
		// from -03 to -04 at that instant, so it is 23:00 on the 23rd again and the 24th begins at
		// 04:00 UTC. The third pageview is at 04:00 UTC here, the first instant of the 24th, so that
		// the case still asks whether the day's end, after the repeated hour, leaves the next day out.
		portCase{from: fTimezone, name: "handles ambiguous datetime at end of range (fall back)", tz: "America/Asuncion",
			events: []pev{pv(at("2024-03-23 12:00:00")), pv(at("2024-03-24 02:58:00")), pv(at("2024-03-24 04:00:00"))},
			query:  `{"metrics":["pageviews"],"date_range":["2024-03-23","2024-03-23"]}`, want: portAgg("2")},
	)

	// query_imported_test.exs: "imported data", continued.
	allReports := []pimport{portImp("browsers", hBrowsers, "2021-01-01,Chrome,,1,1,10,0,1"), portImp("devices", hDevices, "2021-01-01,Desktop,1,1,10,0,1"),
		portImp("entry_pages", hEntryPages, "2021-01-01,/test,1,1,10,0,1"), portImp("exit_pages", hExitPages, "2021-01-01,/test,1,1,1"),
		portImp("locations", hLocations, "2021-01-01,EE,,,1,1,10,0,1"), portImp("operating_systems", hOS, "2021-01-01,Mac,,1,1,10,0,1"),
		portImp("pages", hPages, "2021-01-01,/test,1,1"), portImp("sources", hSources, "2021-01-01,Google,,,,,,,1,1,1,10,0")}
	for _, d := range []struct{ dim, value string }{
		{"visit:browser", "Chrome"}, {"visit:device", "Desktop"}, {"visit:country", "EE"}, {"visit:os", "Mac"}, {"event:page", "/test"}, {"visit:source", "Google"},
	} {
		add(portCase{from: fImported, name: "pageviews are returned as events for breakdown reports other than custom events (" + d.dim + ")", imports: allReports,
			query: `{"metrics":["events"],"date_range":["2021-01-01","2021-01-01"],"dimensions":["` + d.dim + `"],"include":{"imports":true}}`,
			want:  `[{"dimensions":["` + d.value + `"],"metrics":[1]}]`})
	}
	var hundredPages []string
	for i := 1; i <= 100; i++ {
		hundredPages = append(hundredPages, fmt.Sprintf("2021-01-01,/%d,1,1", i))
	}
	locations := []pev{pv(at("2021-01-01 00:15:00"), cc("DE"), region("DE-BE")), pv(at("2021-01-01 00:15:00"), cc("DE"), region("DE-BE")),
		pv(at("2021-01-01 00:15:00"), cc("EE"), region("EE-37"))}
	add(portCase{from: fImported, name: "applies multiple filters if the properties belong to the same table",
		imports: []pimport{portImp("sources", hSources, "2023-01-01,Google,,,organic,,,one,1,1,1,10,0", "2023-01-01,Twitter,,,organic,,,two,1,1,1,10,0", "2023-01-01,Facebook,,,something_else,,,one,1,1,1,10,0")},
		query:   `{"metrics":["visitors"],"date_range":"day","dimensions":["visit:source"],"filters":[["is","visit:utm_medium",["organic"]],["is","visit:utm_term",["one"]]],"include":{"imports":true}}`,
		want:    `[{"dimensions":["Google"],"metrics":[1]}]`},
		portCase{from: fImported, name: "ignores imported data if filtered property belongs to a different table than the breakdown property",
			imports: []pimport{portImp("sources", hSources, "2023-01-01,Google,,,,,,,1,1,1,10,0"), portImp("devices", hDevices, "2023-01-01,Desktop,1,1,10,0,1")},
			query:   `{"metrics":["visitors"],"date_range":"day","dimensions":["visit:source"],"filters":[["is","visit:device",["Desktop"]]],"include":{"imports":true}}`,
			want:    `[]`, meta: `{"imports_included":false,"imports_warning":"Imported stats are not included in the results because query parameters are not supported. For more information, see: https://plausible.io/docs/stats-api#filtering-imported-stats"}`},
		portCase{from: fImported, name: "imported country, region and city data (visit:country)",
			imports: []pimport{portImp("locations", hLocations, "2020-12-31,EE,EE-37,588409,33,33,330,0,33")}, events: locations,
			query: `{"metrics":["visitors"],"date_range":"all","dimensions":["visit:country"],"include":{"imports":true}}`,
			want:  `[{"dimensions":["EE"],"metrics":[34]},{"dimensions":["DE"],"metrics":[2]}]`},
		portCase{from: fImported, name: "imported country, region and city data (visit:country_name)",
			imports: []pimport{portImp("locations", hLocations, "2020-12-31,EE,EE-37,588409,33,33,330,0,33")}, events: locations,
			query: `{"metrics":["visitors"],"date_range":"all","dimensions":["visit:country_name"],"include":{"imports":true}}`,
			want:  `[{"dimensions":["Estonia"],"metrics":[34]},{"dimensions":["Germany"],"metrics":[2]}]`},
		portCase{from: fImported, name: "imported country, region and city data (visit:region)",
			imports: []pimport{portImp("locations", hLocations, "2020-12-31,EE,EE-37,588409,33,33,330,0,33")}, events: locations,
			query: `{"metrics":["visitors"],"date_range":"all","dimensions":["visit:region"],"include":{"imports":true}}`,
			want:  `[{"dimensions":["EE-37"],"metrics":[34]},{"dimensions":["DE-BE"],"metrics":[2]}]`},
		portCase{from: fImported, name: "page breakdown with paginate_optimization (ideal case)",
			imports: []pimport{portImp("pages", hPages, hundredPages...)}, events: []pev{pv(page("/99"), at("2021-01-01 00:00:00"))},
			query: `{"metrics":["pageviews"],"date_range":"all","dimensions":["event:page"],"include":{"imports":true},"pagination":{"limit":1}}`,
			want:  `[{"dimensions":["/99"],"metrics":[2]}]`},
		portCase{from: fImported, name: "imports are skipped when has_done filter is used",
			imports: []pimport{portImp("pages", hPages, "2020-12-31,/blog,3,5")},
			events:  []pev{pv(u(1), at("2021-01-01 00:00:00")), pv(u(2), at("2021-01-01 00:00:00")), ce("Conversion", u(3), at("2021-01-01 00:00:00"))},
			query:   `{"metrics":["visitors"],"date_range":"all","filters":[["has_done",["is","event:name",["pageview"]]]],"include":{"imports":true}}`,
			want:    portAgg("2")},
	)

	// query_goal_custom_props_visit_dimensions_test.exs (a goal of two
	// properties and visit:city as a GeoNames id left out).
	add(portCase{from: fGoalPropsVisit, name: "filters visit:country by goal with custom props correctly", goals: []pgoal{{event: "Signup", prop: []string{"plan", "premium"}}},
		events: []pev{pv(u(1), cc("US"), at("2021-01-01 00:00:00")), ce("Signup", u(1), props("plan", "premium"), at("2021-01-01 00:00:01")),
			pv(u(2), cc("GB"), at("2021-01-01 00:00:00")), ce("Signup", u(2), props("plan", "basic"), at("2021-01-01 00:00:02")),
			pv(u(3), cc("CA"), at("2021-01-01 00:00:00")), ce("Signup", u(4), at("2021-01-01 00:00:03")), pv(u(5), cc("DE"), at("2021-01-01 00:00:00"))},
		query: `{"metrics":["visitors","events"],"date_range":"all","dimensions":["visit:country"],"filters":[["is","event:goal",["Signup"]]]}`,
		want:  `[{"dimensions":["US"],"metrics":[1,1]}]`},
		portCase{from: fGoalPropsVisit, name: "filters visit:os by goal with custom prop containing special characters", goals: []pgoal{{event: "Custom Event", prop: []string{"tag", "test-value"}}},
			events: []pev{pv(u(1), osys("Mac"), at("2021-01-01 00:00:00")), ce("Custom Event", u(1), props("tag", "test-value"), at("2021-01-01 00:00:01")),
				pv(u(2), osys("Windows"), at("2021-01-01 00:00:00")), ce("Custom Event", u(2), props("tag", "other-value"), at("2021-01-01 00:00:02"))},
			query: `{"metrics":["visitors","events"],"date_range":"all","dimensions":["visit:os"],"filters":[["is","event:goal",["Custom Event"]]]}`,
			want:  `[{"dimensions":["Mac"],"metrics":[1,1]}]`},
		portCase{from: fGoalPropsVisit, name: "works with additional visit dimension filters combined", goals: []pgoal{{event: "Newsletter", prop: []string{"source", "sidebar"}}},
			events: []pev{pv(u(1), cc("US"), browser("Chrome"), at("2021-01-01 00:00:00")), ce("Newsletter", u(1), props("source", "sidebar"), at("2021-01-01 00:00:01")),
				pv(u(2), cc("US"), browser("Firefox"), at("2021-01-01 00:00:00")), ce("Newsletter", u(2), props("source", "footer"), at("2021-01-01 00:00:02")),
				pv(u(3), cc("GB"), browser("Chrome"), at("2021-01-01 00:00:00")), ce("Newsletter", u(3), props("source", "sidebar"), at("2021-01-01 00:00:03"))},
			query: `{"metrics":["visitors","events"],"date_range":"all","dimensions":["visit:browser"],"filters":[["is","event:goal",["Newsletter"]],["is","visit:country",["US"]]]}`,
			want:  `[{"dimensions":["Chrome"],"metrics":[1,1]}]`},
		// Plausible's test sorts the rows; so does Tally's tie order.
		portCase{from: fGoalPropsVisit, name: "handles multiple goal filters with different custom props",
			goals: []pgoal{{event: "Action A", prop: []string{"type", "alpha"}}, {event: "Action B", prop: []string{"type", "beta"}}},
			events: []pev{pv(u(1), cc("US"), at("2021-01-01 00:00:00")), ce("Action A", u(1), props("type", "alpha"), at("2021-01-01 00:00:01")),
				pv(u(2), cc("GB"), at("2021-01-01 00:00:00")), ce("Action B", u(2), props("type", "beta"), at("2021-01-01 00:00:02")),
				pv(u(3), cc("CA"), at("2021-01-01 00:00:00")), ce("Action A", u(3), props("type", "gamma"), at("2021-01-01 00:00:03"))},
			query: `{"metrics":["visitors","events"],"date_range":"all","dimensions":["visit:country"],"filters":[["is","event:goal",["Action A","Action B"]]]}`,
			want:  `[{"dimensions":["GB"],"metrics":[1,1]},{"dimensions":["US"],"metrics":[1,1]}]`},
	)
	return cs
}

// filterTrio is the fixture of Plausible's "can filter by ..." tests: a
// visit of two pageviews 25 minutes apart whose first has attr, and
// another visitor's bounce.
func filterTrio(attr popt) []pev {
	return []pev{pv(attr, u(7), at("2021-01-01 00:00:00")), pv(u(7), at("2021-01-01 00:25:00")), pv(at("2021-01-01 00:00:00"))}
}

// portPages is one pageview of each path, each of its own visitor.
func portPages(paths ...string) []pev {
	var es []pev
	for _, p := range paths {
		es = append(es, pv(page(p)))
	}
	return es
}

// The header rows of Plausible's export's CSV files.
const (
	hVisitors   = "date,visitors,pageviews,bounces,visits,visit_duration"
	hSources    = "date,source,referrer,utm_source,utm_medium,utm_campaign,utm_content,utm_term,pageviews,visitors,visits,visit_duration,bounces"
	hPages      = "date,page,visitors,pageviews"
	hExitPages  = "date,exit_page,visitors,exits,pageviews"
	hDevices    = "date,device,visitors,visits,visit_duration,bounces,pageviews"
	hBrowsers   = "date,browser,browser_version,visitors,visits,visit_duration,bounces,pageviews"
	hEvents     = "date,name,visitors,events"
	hEntryPages = "date,entry_page,visitors,entrances,visit_duration,bounces,pageviews"
	hLocations  = "date,country,region,city,visitors,visits,visit_duration,bounces,pageviews"
	hOS         = "date,operating_system,operating_system_version,visitors,visits,visit_duration,bounces,pageviews"
)

// portImp is one report of a Plausible export: build(:imported_REPORT, ...).
func portImp(report, header string, rows ...string) pimport {
	return pimport{file: "imported_" + report + ".csv", header: header, rows: rows}
}

// portJoin is strings joined by commas.
func portJoin(s []string) string { return strings.Join(s, ",") }
