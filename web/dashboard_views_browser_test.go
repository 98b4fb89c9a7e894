package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/tally-analytics/tally/server/servertest"
)

// viewsServer is a site with a month of visits from eight countries, the
// month before it, a Signup goal (every third visitor signs up), and the visits of the last 30 minutes
// (docs/dashboard.md). The clock stands at now; the history was received
// two hours before, so only the last 30 minutes' visits are current.
//
// Day i of the 30 (0 the oldest) has 2 + i%4 visitors; a visitor's country
// is the i-th of viewCountries in turn. The 30 days before have 2 visitors
// a day. The last 30 minutes: 4 visitors
// (r0..r3, 12 to 3 minutes ago), each on /live, r0 and r1 from
// google.test.
type viewsData struct {
	srv   *servertest.Server
	clock *servertest.Clock
	now   time.Time
	n     int
	// countries counts the month's visitors per country; visitors,
	// signups the month's.
	countries          map[string]int
	visitors, signups  int
	previous, realtime int
}

var viewCountries = []struct{ code, city string }{
	{"DE", "Berlin"}, {"US", "New York"}, {"DE", "Hamburg"}, {"FR", "Paris"}, {"GB", "London"},
	{"US", "Chicago"}, {"BR", "São Paulo"}, {"IN", "Mumbai"}, {"JP", "Tokyo"}, {"AU", "Sydney"},
}

func viewsServer(t *testing.T) *viewsData {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Second)
	d := &viewsData{now: now, clock: servertest.NewClock(now.Add(-2 * time.Hour)), countries: map[string]int{}}
	d.srv = servertest.New(t, servertest.WithClock(d.clock.Now), servertest.WithProxyGeo())
	if res := call(t, d.srv, "POST", "/v1/sites/"+d.srv.SiteID+"/goals", d.srv.AdminToken, `{"name":"Signup","event_name":"signup"}`); res.StatusCode != 201 {
		t.Fatalf("create goal: got %d, want 201", res.StatusCode)
	}
	pages := []string{"/", "/pricing", "/blog/a-long-post-title-that-wraps", "/docs/getting-started"}
	sources := []string{"", "https://google.test/", "https://news.test/item?id=1"}
	today := time.Date(now.Year(), now.Month(), now.Day(), 9, 0, 0, 0, time.UTC)
	visitor := 0
	for i := 0; i < 60; i++ {
		day := today.AddDate(0, 0, i-59)
		n := 2
		if i >= 30 {
			n = 2 + (i-30)%4
		}
		for j := 0; j < n; j++ {
			c := viewCountries[visitor%len(viewCountries)]
			anon := fmt.Sprintf("v%d", visitor)
			ts := day.Add(time.Duration(j*37) * time.Minute)
			if i == 59 && ts.After(now.Add(-time.Hour)) {
				ts = now.Add(-time.Duration(2+j) * time.Hour)
			}
			evs := []map[string]any{d.event(anon, "pageview", pages[visitor%len(pages)], sources[visitor%len(sources)], ts)}
			if visitor%2 == 0 {
				evs = append(evs, d.event(anon, "pageview", "/pricing", "", ts.Add(time.Minute)))
			}
			if visitor%3 == 0 {
				evs = append(evs, d.event(anon, "signup", "/pricing", "", ts.Add(2*time.Minute)))
			}
			if i >= 30 {
				d.visitors++
				d.countries[c.code]++
				if visitor%3 == 0 {
					d.signups++
				}
			} else {
				d.previous++
			}
			d.send(t, c.code, c.city, evs...)
			visitor++
		}
	}
	d.clock.Set(now)
	for j := 0; j < 4; j++ {
		c := viewCountries[j]
		d.send(t, c.code, c.city, d.event(fmt.Sprintf("r%d", j), "pageview", "/live", sources[j%2], now.Add(-time.Duration(12-3*j)*time.Minute)))
		d.realtime++
	}
	return d
}

func (d *viewsData) event(anon, typ, path, referrer string, ts time.Time) map[string]any {
	d.n++
	e := map[string]any{"id": fmt.Sprintf("3f2504e0-4f89-41d3-9a0c-%012d", d.n), "site_id": d.srv.SiteID, "anon_id": anon,
		"type": typ, "url": "https://shop.test" + path, "ts": ts.Format(time.RFC3339)}
	if referrer != "" {
		e["referrer"] = referrer
	}
	return e
}

// send posts events as a browser in country and city would have them
// (the proxy's headers).
func (d *viewsData) send(t *testing.T, country, city string, events ...map[string]any) {
	t.Helper()
	body, _ := json.Marshal(events)
	req, _ := http.NewRequest("POST", d.srv.CollectorURL+"/v1/events", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+d.srv.SiteID)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("CF-IPCountry", country)
	req.Header.Set("CF-IPCity", city)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 202 {
		t.Fatalf("send: got %d, want 202", res.StatusCode)
	}
}

func click(t *testing.T, ctx context.Context, css string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(css))); err != nil {
		t.Fatalf("click %s: %v", css, err)
	}
}

// waitFor polls js until it is true.
func waitFor(t *testing.T, ctx context.Context, js, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !mustEval[bool](t, ctx, js) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 20 s for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// brokenWords lists the words of the shown tables' cells that the
// browser broke over two lines, and the cells whose text overflows them.
const brokenWords = `(function () {
	var out = [];
	document.querySelectorAll("table td, table th").forEach(function (td) {
		if (!td.getClientRects().length) return;
		if (td.scrollWidth > td.clientWidth + 1) out.push(td.closest("table").id + " overflows: " + td.textContent);
		var walk = document.createTreeWalker(td, NodeFilter.SHOW_TEXT), n;
		while ((n = walk.nextNode())) {
			var re = /\S+/g, m;
			while ((m = re.exec(n.data))) {
				var r = document.createRange();
				r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
				var lines = new Set(Array.from(r.getClientRects()).filter(function (x) { return x.width > 0; }).map(function (x) { return Math.round(x.top); }));
				if (lines.size > 1) out.push(td.closest("table").id + ": " + m[0]);
			}
		}
	});
	return out.slice(0, 10).join(", ");
})()`

// The views of issue 31's dashboard parity, at 1280 and 390 px: the graph
// with the previous period and its metric and interval switches, the map
// and its tabs, conversions as top stats under a goal filter, the
// realtime view updating without a reload, and no word broken in any
// table, the audit log's included. With TALLY_SCREENSHOTS=1 it writes
// docs/dashboard-*.png.
func TestDashboardViews(t *testing.T) {
	d := viewsServer(t)
	ctx, cancel := browser(t)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `window.tallyRefreshMs = 300;`})
		return err
	})); err != nil {
		t.Fatal(err)
	}
	screenshots := os.Getenv("TALLY_SCREENSHOTS") != ""
	for _, width := range []int64{1280, 390} {
		w := fmt.Sprint(width)
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, 900)); err != nil {
			t.Fatal(err)
		}
		if width == 1280 {
			signIn(t, ctx, d.srv, "/", d.srv.AdminToken)
		} else {
			if err := chromedp.Do(ctx, chromedp.Navigate(d.srv.QueryURL+"/?period=30d")); err != nil {
				t.Fatal(err)
			}
		}
		g := ready(t, ctx, "")
		if width == 1280 {
			// The first load's requests (docs/dashboard.md#first-load).
			got := mustEval[string](t, ctx, `performance.getEntriesByType("resource").filter(function (r) { return r.initiatorType === "fetch"; }).map(function (r) { return new URL(r.name).pathname; }).join(" ")`)
			// workspaces, sites, realtime, the site, 8 queries (today's date,
			// the top stats, the graph, 4 panels, the goals), the map, the
			// property names, the goal list, the saved funnels
			if n := len(strings.Fields(got)); n > 16 || strings.Count(got, "/query") > 8 {
				t.Errorf("first load: got %d requests, want at most 16 and 8 queries: %s", n, got)
			}
		}

		// The graph: visitors by day with the previous period, a line each.
		if got, want := text(t, ctx, "#card-visitors .card-value"), fmt.Sprint(d.visitors+d.realtime); got != want {
			t.Errorf("%s: visitors: got %s, want %s", w, got, want)
		}
		if got, want := mustEval[string](t, ctx, `document.querySelector("#chart svg").getAttribute("aria-label") + " " + document.querySelectorAll("#chart rect").length + " " + document.querySelectorAll("#chart path.line").length + " " + document.querySelectorAll("#chart path.line.prev").length`),
			"Unique visitors by day 30 2 1"; got != want {
			t.Errorf("%s: graph: got %q, want %q (30 days, this period's line and the previous period's)", w, got, want)
		}
		if screenshots {
			shot(t, ctx, "comparison-"+w, "#cards", "#chart-box")
		}
		// A top stat graphs its metric; an interval button its buckets.
		click(t, ctx, "#card-pageviews")
		waitFor(t, ctx, `document.querySelector("#chart svg") && document.querySelector("#chart svg").getAttribute("aria-label") === "Total pageviews by day"`, "the pageviews graph")
		if got := mustEval[string](t, ctx, `location.search`); !strings.Contains(got, "metric=pageviews") {
			t.Errorf("%s: URL %s, want metric=pageviews", w, got)
		}
		if got := mustEval[string](t, ctx, `document.querySelector("#card-pageviews").getAttribute("aria-pressed") + document.querySelector("#card-visitors").getAttribute("aria-pressed")`); got != "truefalse" {
			t.Errorf("%s: pressed cards: got %s, want pageviews only", w, got)
		}
		click(t, ctx, `#intervals button[data-interval="week"]`)
		waitFor(t, ctx, `document.querySelector("#chart svg") && document.querySelector("#chart svg").getAttribute("aria-label") === "Total pageviews by week"`, "the graph by week")
		if n := mustEval[int](t, ctx, `document.querySelectorAll("#chart rect").length`); n < 5 || n > 6 {
			t.Errorf("%s: weeks: got %d buckets, want 5 or 6 for 30 days", w, n)
		}
		if width == 1280 {
			// The graph's CSV: its metric by its interval.
			csv := downloadCSV(t, ctx, `button.csv[data-panel="chart"]`)
			if !strings.HasPrefix(csv, "time:week,pageviews\n") || strings.Count(csv, "\n") < 6 {
				t.Errorf("graph CSV: got %q, want pageviews by week", csv)
			}
		}
		click(t, ctx, "#card-visitors")
		click(t, ctx, `#intervals button[data-interval="day"]`)
		waitFor(t, ctx, `document.querySelector("#chart svg") && document.querySelector("#chart svg").getAttribute("aria-label") === "Unique visitors by day"`, "the graph by day again")

		// The map: a shaded country per country with visitors.
		waitFor(t, ctx, `document.querySelectorAll("#map-locations path.seen").length > 0`, "the map")
		if got, want := mustEval[int](t, ctx, `document.querySelectorAll("#map-locations path.seen").length`), 8; got != want {
			t.Errorf("%s: shaded countries: got %d, want %d", w, got, want)
		}
		de := d.countries["DE"] + 2 // r0 and r2 (and the realtime view's visitor of the pass before)
		if got, want := mustEval[string](t, ctx, `document.querySelector('#map-locations path[data-country="DE"] title').textContent`), fmt.Sprintf("Germany: %d visitors", de); got != want {
			t.Errorf("%s: Germany on the map: got %q, want %q", w, got, want)
		}
		if screenshots {
			shot(t, ctx, "map-"+w, "#panel-locations")
		}
		click(t, ctx, `#panel-locations .tabs button:nth-child(2)`)
		waitFor(t, ctx, `!document.querySelector("#t-locations").hidden && document.querySelector("#t-locations").getAttribute("data-loaded") !== null`, "the countries tab")
		if got := table(t, ctx, "t-locations"); !strings.HasPrefix(got, fmt.Sprintf("Germany|%d|", de)) {
			t.Errorf("%s: countries: got %q, want Germany first with %d", w, got, de)
		}
		click(t, ctx, `#panel-locations .tabs button:nth-child(4)`)
		waitFor(t, ctx, `document.querySelector("#t-locations").getAttribute("data-loaded") !== null && !document.querySelector("#t-locations").classList.contains("loading")`, "the cities tab")
		if got := table(t, ctx, "t-locations"); !strings.Contains(got, "Berlin|") && !strings.HasPrefix(got, "No data") {
			t.Errorf("%s: cities: got %q, want Berlin among them, or no data", w, got)
		}
		click(t, ctx, `#panel-locations .tabs button:nth-child(1)`)

		// No word broken in any table, the audit log's included.
		click(t, ctx, "#tools summary")
		waitFor(t, ctx, `document.querySelectorAll("#audit tr").length > 1`, "the audit log")
		if got := mustEval[string](t, ctx, brokenWords); got != "" {
			t.Errorf("%s px: words broken mid-word: %s", w, got)
		}
		click(t, ctx, "#tools summary")

		// A goal filter: conversions as top stats, as Plausible shows them.
		click(t, ctx, `#goals tr[data-value="Signup"]`)
		g = ready(t, ctx, g)
		labels := mustEval[string](t, ctx, `Array.from(document.querySelectorAll("#cards .card-label")).map(function (e) { return e.textContent; }).join("|")`)
		if want := "Unique visitors|Unique conversions|Total conversions|Conversion rate"; labels != want {
			t.Errorf("%s: goal top stats: got %s, want %s", w, labels, want)
		}
		all := d.visitors + d.realtime
		conv := mustEval[string](t, ctx, `Array.from(document.querySelectorAll("#cards .card-value")).map(function (e) { return e.textContent; }).join("|")`)
		if want := fmt.Sprintf("%d|%d|%d|", all, d.signups, d.signups); !strings.HasPrefix(conv, want) || !strings.HasSuffix(conv, "%") {
			t.Errorf("%s: goal top stats: got %s, want %s and a rate", w, conv, want)
		}
		click(t, ctx, "#card-conversions")
		waitFor(t, ctx, `document.querySelector("#chart svg") && document.querySelector("#chart svg").getAttribute("aria-label") === "Unique conversions by day"`, "the conversions graph")
		if screenshots {
			shot(t, ctx, "goal-"+w, "#filters", "#cards", "#chart-box")
		}
		click(t, ctx, "#filters .chip-x")
		g = ready(t, ctx, g)

		// Realtime: the last 30 minutes, asked again without a reload.
		mustEval[bool](t, ctx, `(function (s) { s.value = "realtime"; return s.dispatchEvent(new Event("change")); })(document.getElementById("period"))`)
		g = ready(t, ctx, g)
		waitFor(t, ctx, `(document.querySelector("#card-current .card-value") || {}).textContent === "`+fmt.Sprint(d.realtime)+`"`, "the current visitors")
		if got, want := text(t, ctx, "#card-visitors .card-value"), fmt.Sprint(d.realtime); got != want {
			t.Errorf("%s: realtime visitors: got %s, want %s", w, got, want)
		}
		if got, want := table(t, ctx, "t-pages"), "/live|4|4"; !strings.HasPrefix(got, want) {
			t.Errorf("%s: realtime pages: got %q, want %q first", w, got, want)
		}
		if got := mustEval[string](t, ctx, `document.querySelector("#chart svg").getAttribute("aria-label") + " " + document.querySelectorAll("#chart rect").length`); got != "Unique visitors by minute 31" && got != "Unique visitors by minute 30" {
			t.Errorf("%s: realtime graph: got %q, want by minute, 30 or 31 buckets", w, got)
		}
		if screenshots {
			shot(t, ctx, "realtime-"+w, "#cards", "#chart-box", "#panel-sources", "#panel-pages")
		}
		page := fmt.Sprintf("/now-%d", width)
		d.send(t, "DE", "Berlin", d.event("r9-"+w, "pageview", page, "", d.now.Add(-time.Minute)))
		d.realtime++
		d.countries["DE"]++
		waitFor(t, ctx, `Array.from(document.querySelectorAll("#t-pages tr.row")).some(function (r) { return r.getAttribute("data-value") === `+jsString(page)+`; })`, "the new page, without a reload")
		if got := mustEval[string](t, ctx, `performance.getEntriesByType("navigation").length + ""`); got != "1" {
			t.Errorf("%s: navigations: got %s, want 1 (no reload)", w, got)
		}
		mustEval[bool](t, ctx, `(function (s) { s.value = "30d"; return s.dispatchEvent(new Event("change")); })(document.getElementById("period"))`)
		ready(t, ctx, g)
	}
	// Today by minute: the day's 1,440 minutes (the site's zone is UTC).
	if err := chromedp.Do(ctx, chromedp.Navigate(d.srv.QueryURL+"/?period=day&interval=minute")); err != nil {
		t.Fatal(err)
	}
	ready(t, ctx, "")
	if got, want := mustEval[string](t, ctx, `document.querySelector("#chart svg").getAttribute("aria-label") + " " + document.querySelectorAll("#chart rect").length + " " + document.querySelector("#intervals .on").textContent`), "Unique visitors by minute 1440 Minutes"; got != want {
		t.Errorf("today by minute: got %q, want %q", got, want)
	}
}

type shotBox struct{ X, Y, W, H float64 }

// shot writes the part of the page that holds the elements to
// docs/dashboard-NAME.png.
func shot(t *testing.T, ctx context.Context, name string, css ...string) {
	t.Helper()
	sel, _ := json.Marshal(css)
	box := mustEval[shotBox](t, ctx, `(function () {
		var r = null;
		`+string(sel)+`.forEach(function (s) {
			var b = document.querySelector(s).getBoundingClientRect();
			if (!b.width) return;
			var x = b.left + scrollX, y = b.top + scrollY;
			if (!r) { r = { l: x, t: y, r: x + b.width, b: y + b.height }; return; }
			r = { l: Math.min(r.l, x), t: Math.min(r.t, y), r: Math.max(r.r, x + b.width), b: Math.max(r.b, y + b.height) };
		});
		return { X: Math.max(r.l - 8, 0), Y: Math.max(r.t - 8, 0), W: Math.min(r.r - r.l + 16, document.documentElement.clientWidth), H: r.b - r.t + 16 };
	})()`)
	var png []byte
	if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		r, err := chromedp.Call(ctx, page.CaptureScreenshot, page.CaptureScreenshotParams{CaptureBeyondViewport: ptr(true),
			Clip: &page.Viewport{X: box.X, Y: box.Y, Width: box.W, Height: box.H, Scale: 1}})
		png = r.Data
		return err
	})); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("..", "docs", "dashboard-"+name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}
