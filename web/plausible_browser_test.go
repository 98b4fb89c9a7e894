package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Plausible's published snippets, verbatim (plausible.io/docs: the
// legacy snippet, its script extensions, the queue for custom events).
const (
	plausibleQueue = `<script>window.plausible = window.plausible || function() { (window.plausible.q = window.plausible.q || []).push(arguments) }</script>`
	plausibleHead  = `<!doctype html><html><head><title>Shop</title>`
)

// plausiblePage is a page whose head holds head and whose body holds body.
func plausiblePage(head, body string) string {
	return plausibleHead + head + `</head><body style="margin:0"><h1>Shop</h1>` + body + `</body></html>`
}

// TestPlausibleLegacySnippetInABrowser loads pages holding Plausible's
// published legacy snippet and its extension variants verbatim, with
// plausible.io and yourdomain.com mapped to Tally and the test's pages
// (docs/intake.md#plausibles-snippet), and reads back what they sent
// through the v2 query API.
func TestPlausibleLegacySnippetInABrowser(t *testing.T) {
	exclusions := plausiblePage(`<script defer data-domain="yourdomain.com" data-exclude="/admin/**, /secret" src="https://plausible.io/js/script.exclusions.js"></script>`, ``)
	w := newSnippetWorld(t, map[string]string{
		"/": plausiblePage(`<script defer data-domain="yourdomain.com" src="https://plausible.io/js/script.js"></script>`, ``),
		"/links.html": plausiblePage(`<script defer data-domain="yourdomain.com" src="https://plausible.io/js/script.file-downloads.outbound-links.js"></script>`,
			`<a id="out" href="https://example.org/partner">Partner</a> <a id="pdf" href="/files/report.pdf">Report</a>`),
		"/tagged.html": plausiblePage(`<script defer data-domain="yourdomain.com" src="https://plausible.io/js/script.tagged-events.revenue.js"></script>`+plausibleQueue,
			`<button id="signup" class="plausible-event-name=Signup plausible-event-plan=Pro+plan">Sign up</button>
<button id="buy" class="plausible-event-name=Purchase plausible-revenue-amount=10.29 plausible-revenue-currency=EUR"><span id="buy-label">Buy</span></button>`),
		"/props.html": plausiblePage(`<script defer data-domain="yourdomain.com" src="https://plausible.io/js/script.pageview-props.js" event-author="John Doe"></script>`, ``),
		"/hash.html":  plausiblePage(`<script defer data-domain="yourdomain.com" src="https://plausible.io/js/script.hash.js"></script>`, ``),
		"/manual.html": plausiblePage(`<script defer data-domain="yourdomain.com" src="https://plausible.io/js/script.manual.js"></script>`+plausibleQueue+
			`<script>plausible('pageview', { u: "http://yourdomain.com/manual/custom" + window.location.search })</script>`, ``),
		"/admin/users": exclusions, "/secret": exclusions, "/kept": exclusions,
		// data-api through the site's own proxy path, and two domains.
		"/local-plain": plausiblePage(`<script defer data-domain="yourdomain.com" src="https://plausible.io/js/script.js"></script>`, ``),
		"/local":       plausiblePage(`<script defer data-domain="yourdomain.com" src="https://plausible.io/js/script.local.js"></script>`, ``),
		"/proxied":     plausiblePage(`<script defer data-domain="yourdomain.com,rollup.example" data-api="/stats/api/event" src="https://plausible.io/js/script.js"></script>`, ``),
	})

	// The plain script: a pageview on load, another on an SPA navigation.
	w.open("/")
	w.wait(1)
	w.run(`history.pushState({}, "", "/about")`)
	w.wait(2)
	// File downloads and outbound links: the page is left, the event kept.
	w.open("/links.html")
	w.wait(3)
	if err := chromedp.Do(w.ctx, chromedp.Click(chromedp.CSS("#pdf"))); err != nil {
		t.Fatal(err)
	}
	w.wait(4)
	w.waitPath("/files/report.pdf")
	w.open("/links.html")
	w.wait(5)
	if err := chromedp.Do(w.ctx, chromedp.Click(chromedp.CSS("#out"))); err != nil {
		t.Fatal(err)
	}
	w.wait(6)
	// Tagged events and revenue, a click on an element inside the tagged
	// one included.
	w.open("/tagged.html")
	w.wait(7)
	if err := chromedp.Do(w.ctx, chromedp.Click(chromedp.CSS("#signup"))); err != nil {
		t.Fatal(err)
	}
	w.wait(8)
	if err := chromedp.Do(w.ctx, chromedp.Click(chromedp.CSS("#buy-label"))); err != nil {
		t.Fatal(err)
	}
	w.wait(9)
	w.run(`plausible("Purchase", {revenue: {amount: 15.99, currency: "EUR"}, props: {plan: "Team"}})`)
	w.wait(10)
	// pageview-props, hash routing, a manual pageview.
	w.open("/props.html")
	w.wait(11)
	w.open("/hash.html")
	w.wait(12)
	w.run(`location.hash = "#/pricing"`)
	w.wait(13)
	w.open("/manual.html?plan=x")
	w.wait(14)
	// Exclusions: the excluded pages send nothing, the next one is counted.
	w.open("/admin/users")
	w.open("/secret")
	w.open("/kept")
	w.wait(15)
	w.open("/proxied")
	w.wait(16)
	// From localhost only the local variant sends.
	for _, p := range []string{"/local-plain", "/local"} {
		if err := chromedp.Do(w.ctx, chromedp.Navigate(w.pages.URL+p)); err != nil {
			t.Fatal(err)
		}
	}
	events := w.wait(17)
	if len(events) != 17 {
		for _, e := range events {
			t.Logf("%s %s %s", e.Type, deref(e.URL), e.Raw)
		}
		t.Fatalf("got %d events, want 17", len(events))
	}

	w.check("pages", w.query([]string{"visitors", "pageviews"}, []string{"event:page"}), map[string]string{
		"/": "[1,1]", "/about": "[1,1]", "/hash.html": "[1,1]", "/hash.html#/pricing": "[1,1]", "/kept": "[1,1]",
		"/links.html": "[1,2]", "/local": "[1,1]", "/manual/custom": "[1,1]", "/props.html": "[1,1]", "/proxied": "[1,1]", "/tagged.html": "[1,1]",
	})
	w.check("event names", w.query([]string{"events"}, []string{"event:name"}), map[string]string{
		"pageview": "[12]", "File Download": "[1]", "Outbound Link: Click": "[1]", "Signup": "[1]", "Purchase": "[2]",
	})
	w.check("link urls", w.query([]string{"events"}, []string{"event:name", "event:props:url"}, []any{"is_not", "event:props:url", []string{"(none)"}}), map[string]string{
		"File Download|http://yourdomain.com/files/report.pdf": "[1]", "Outbound Link: Click|https://example.org/partner": "[1]",
	})
	w.check("tagged props", w.query([]string{"events"}, []string{"event:props:plan"}), map[string]string{
		"(none)": "[15]", "Pro plan": "[1]", "Team": "[1]",
	})
	w.check("pageview props", w.query([]string{"pageviews"}, []string{"event:props:author"}, []any{"is", "event:page", []string{"/props.html"}}), map[string]string{
		"John Doe": "[1]",
	})
	w.call(http.MethodPost, "/v1/sites/"+w.srv.SiteID+"/goals", map[string]any{"name": "Purchase", "event_name": "Purchase", "currency": "EUR"}, nil)
	// The revenue of both purchases (the tagged button's and the API call's),
	// as a number or as Plausible's {currency, long, short, value}.
	if got := w.query([]string{"events", "total_revenue"}, nil, []any{"is", "event:goal", []string{"Purchase"}}); !strings.HasPrefix(got[""], "[2,") || !strings.Contains(got[""], "26.28") {
		t.Errorf("revenue: got %v, want 2 events and 26.28", got)
	}
}

// plausibleWebSnippet is Plausible's published 2025 snippet verbatim, for
// the script of id, with init's options (the published text has none).
func plausibleWebSnippet(id, options string) string {
	return `<!-- Privacy-friendly analytics by Plausible -->
<script async src="https://plausible.io/js/pa-` + id + `.js"></script>
<script>
  window.plausible=window.plausible||function(){(plausible.q=plausible.q||[]).push(arguments)},plausible.init=plausible.init||function(i){plausible.o=i||{}};
  plausible.init(` + options + `)
</script>`
}

// TestPlausibleWebSnippetInABrowser loads pages holding Plausible's
// published 2025 snippet (a per-site /js/pa-<id>.js, the id the site's id
// or alias, and plausible.init) with its documented options, and reads
// back what they sent (docs/intake.md#plausibles-snippet).
func TestPlausibleWebSnippetInABrowser(t *testing.T) {
	links := `<a id="out" href="https://example.org/partner">Partner</a> <a id="pdf" href="/files/report.pdf">Report</a>
<button id="signup" class="plausible-event-name=Signup">Sign up</button>
<form id="f" onsubmit="event.preventDefault()"><input name="q"><button>Go</button></form>`
	var w *snippetWorld
	pages := map[string]string{}
	w = newSnippetWorld(t, pages)
	pages["/app"] = plausiblePage(plausibleWebSnippet(w.srv.SiteID, ``), links)
	pages["/opts"] = plausiblePage(plausibleWebSnippet(snippetDomain, `{ endpoint: "http://yourdomain.com/stats/api/event", customProperties: { section: "docs" }, hashBasedRouting: true, fileDownloads: false }`), links)
	pages["/manual"] = plausiblePage(plausibleWebSnippet(snippetDomain, `{ autoCapturePageviews: false }`)+
		`<script>plausible("pageview", { url: "http://yourdomain.com/virtual" }); plausible("Queued", { props: { step: "1" } })</script>`, ``)
	pages["/local"] = plausiblePage(plausibleWebSnippet(snippetDomain, ``), ``)
	pages["/local-on"] = plausiblePage(plausibleWebSnippet(snippetDomain, `{ captureOnLocalhost: true }`), ``)
	pages["/long"] = `<!doctype html><html><head>` + plausibleWebSnippet(snippetDomain, ``) + `</head><body style="margin:0"><div style="height:2000px"></div></body></html>`

	// The defaults: pageviews, form submissions, tagged elements and
	// outbound links.
	w.open("/app")
	w.wait(1)
	w.run(`document.getElementById("f").requestSubmit()`)
	w.wait(2)
	if err := chromedp.Do(w.ctx, chromedp.Click(chromedp.CSS("#signup"))); err != nil {
		t.Fatal(err)
	}
	w.wait(3)
	if err := chromedp.Do(w.ctx, chromedp.Click(chromedp.CSS("#out"))); err != nil {
		t.Fatal(err)
	}
	w.wait(4)
	// init's options: an endpoint through the site's proxy, custom
	// properties on every event, hash routing, file downloads off.
	w.open("/opts")
	w.wait(5)
	w.run(`location.hash = "#/guide"`)
	w.wait(6)
	if err := chromedp.Do(w.ctx, chromedp.Click(chromedp.CSS("#pdf"))); err != nil {
		t.Fatal(err)
	}
	w.waitPath("/files/report.pdf")
	// No automatic pageview; the page's own, and a call queued before the
	// script loaded.
	w.open("/manual")
	w.wait(8)
	// Nothing from localhost unless captureOnLocalhost.
	for _, p := range []string{"/local", "/local-on"} {
		if err := chromedp.Do(w.ctx, chromedp.Navigate(w.pages.URL+p)); err != nil {
			t.Fatal(err)
		}
	}
	if events := w.wait(9); len(events) != 9 {
		for _, e := range events {
			t.Logf("%s %s %s", e.Type, deref(e.URL), e.Raw)
		}
		t.Fatalf("got %d events, want 9", len(events))
	}
	w.check("event names", w.query([]string{"events"}, []string{"event:name"}), map[string]string{
		"pageview": "[5]", "Form: Submission": "[1]", "Signup": "[1]", "Outbound Link: Click": "[1]", "Queued": "[1]",
	})
	w.check("pages", w.query([]string{"pageviews"}, []string{"event:page"}), map[string]string{
		"/app": "[1]", "/manual": "[0]", "/opts": "[1]", "/opts#/guide": "[1]", "/virtual": "[1]", "/local-on": "[1]",
	})
	// Engagement: a page of 2000 px in a window of 500, scrolled to 1000 px,
	// then left by an SPA navigation, which sends the engagement first.
	if err := chromedp.Do(w.ctx, chromedp.EmulateViewport(1000, 500)); err != nil {
		t.Fatal(err)
	}
	w.open("/long")
	w.wait(10)
	w.run(`window.scrollTo(0, 500); document.dispatchEvent(new Event("scroll")); history.pushState({}, "", "/long/next")`)
	w.wait(11)
	var depth map[string]string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		// The engagement is stored when its request is, after the next
		// pageview's perhaps: wait for it.
		if depth = w.query([]string{"scroll_depth"}, []string{"event:page"}, []any{"is", "event:page", []string{"/long", "/long/next"}}); depth["/long"] != "[0]" && depth["/long"] != "[null]" {
			break
		}
	}
	w.check("scroll depth", depth, map[string]string{"/long": "[50]", "/long/next": "[null]"})
	w.check("custom properties", w.query([]string{"events"}, []string{"event:page", "event:props:section"}, []any{"is", "event:props:section", []string{"docs"}}), map[string]string{
		"/opts|docs": "[1]", "/opts#/guide|docs": "[1]",
	})
}

// oldBrowser makes the page's browser one without document.currentScript
// and, with noFetch, without fetch: what Plausible's compat script is for.
func oldBrowser(noFetch bool) string {
	js := `Object.defineProperty(Document.prototype, "currentScript", { get: function () { return null } });`
	if noFetch {
		js += ` window.fetch = undefined;`
	}
	return `<script>` + js + `</script>`
}

// TestPlausibleCompatSnippetInABrowser loads Plausible's published
// script.compat.js snippet verbatim (the tag found by id="plausible") in a
// browser made one without document.currentScript, where the plain
// script sends nothing, and a dotted combination with compat, and reads
// back what they sent (docs/intake.md#plausibles-snippet).
func TestPlausibleCompatSnippetInABrowser(t *testing.T) {
	w := newSnippetWorld(t, map[string]string{
		"/old":    plausiblePage(oldBrowser(false)+`<script defer data-domain="yourdomain.com" src="https://plausible.io/js/script.js"></script>`, ``),
		"/compat": plausiblePage(oldBrowser(true)+`<script id="plausible" defer data-domain="yourdomain.com" src="https://plausible.io/js/script.compat.js"></script>`, ``),
		"/compat-dl": plausiblePage(oldBrowser(false)+`<script id="plausible" defer data-domain="yourdomain.com" src="https://plausible.io/js/script.compat.file-downloads.js"></script>`,
			`<a id="csv" href="/files/data.csv" onclick="event.preventDefault()">Data</a>`),
	})
	w.open("/old")
	// Without fetch the compat script posts with XMLHttpRequest.
	w.open("/compat")
	w.wait(1)
	w.open("/compat-dl")
	w.wait(2)
	if err := chromedp.Do(w.ctx, chromedp.Click(chromedp.CSS("#csv"))); err != nil {
		t.Fatal(err)
	}
	if events := w.wait(3); len(events) != 3 {
		for _, e := range events {
			t.Logf("%s %s %s", e.Type, deref(e.URL), e.Raw)
		}
		t.Fatalf("got %d events, want 3", len(events))
	}
	w.check("pages", w.query([]string{"pageviews"}, []string{"event:page"}), map[string]string{"/compat": "[1]", "/compat-dl": "[1]"})
	w.check("event names", w.query([]string{"events"}, []string{"event:name", "event:props:url"}), map[string]string{
		"pageview|(none)": "[2]", "File Download|http://yourdomain.com/files/data.csv": "[1]",
	})
}

// warnings records the page's console.warn calls in window.warned.
const warnings = `<script>window.warned = []; console.warn = function (m) { warned.push(m) }</script>`

// TestPlausibleWebOptionsInABrowser loads the 2025 snippet with the rest
// of plausible.init's documented options (customProperties as a function,
// fileDownloads with fileExtensions, outboundLinks and formSubmissions
// off, transformRequest, logging, bindToWindow, lib) and calls plausible()
// with each of its options (props, revenue, interactive, callback), and
// reads back what was sent (docs/intake.md#plausibles-snippet).
func TestPlausibleWebOptionsInABrowser(t *testing.T) {
	links := `<a id="pdf" href="/files/report.pdf" onclick="event.preventDefault()">Report</a>
<a id="csv" href="/files/data.csv" onclick="event.preventDefault()">Data</a>
<a id="out" href="https://example.org/partner" onclick="event.preventDefault()">Partner</a>
<form id="f" onsubmit="event.preventDefault()"><input name="q"><button>Go</button></form>`
	w := newSnippetWorld(t, map[string]string{
		"/opts/secret": plausiblePage(warnings+plausibleWebSnippet(snippetDomain, `{
    customProperties: function (name) { return { kind: name == "pageview" ? "page" : "event" } },
    fileDownloads: { fileExtensions: ["csv"] }, outboundLinks: false, formSubmissions: false,
    transformRequest: function (p) { if (p.n == "Drop") return null; p.u = p.u.replace("secret", "redacted"); return p },
    logging: false, bindToWindow: false, lib: "tally-test" }`), links),
		"/warn": plausiblePage(warnings+plausibleWebSnippet(snippetDomain, `{ transformRequest: function (p) { return p.n == "Drop" ? null : p } }`), ``),
	})
	eval := func(js string) string {
		t.Helper()
		got, err := chromedp.Run(w.ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return got
	}

	w.open("/opts/secret")
	w.wait(1)
	// Off, or not among fileExtensions: nothing sent.
	for _, sel := range []string{"#pdf", "#out"} {
		if err := chromedp.Do(w.ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
			t.Fatal(err)
		}
	}
	w.run(`document.getElementById("f").requestSubmit()`)
	// Dropped by transformRequest: the callback is called with nothing, and
	// logging: false says nothing. bindToWindow: false still leaves
	// plausible() to the page, as Plausible's script does (the option is
	// its npm package's).
	w.run(`plausible("Drop", { callback: function (r) { window.dropped = [r] } })`)
	if err := chromedp.Do(w.ctx, chromedp.Click(chromedp.CSS("#csv"))); err != nil {
		t.Fatal(err)
	}
	w.wait(2)
	w.run(`plausible("Signup", { props: { plan: "Pro" }, revenue: { amount: 12.5, currency: "EUR" }, interactive: false, callback: function (r) { window.sent = r } })`)
	w.wait(3)
	var status string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && status == ""; time.Sleep(50 * time.Millisecond) {
		status = eval(`window.sent ? String(window.sent.status) : ""`)
	}
	if status != "202" {
		t.Errorf("the callback of a sent event: got status %q, want 202", status)
	}
	if got := eval(`JSON.stringify([window.dropped.length, window.dropped[0] === undefined, warned])`); got != `[1,true,[]]` {
		t.Errorf("a dropped event with logging off: got %s, want the callback called once with nothing and no warning", got)
	}
	// Logging on (the default): Plausible's warning for each ignored event.
	w.open("/warn")
	w.wait(4)
	w.run(`plausible("Drop")`)
	if got := eval(`JSON.stringify(warned)`); got != `["Ignoring Event: transformRequest"]` {
		t.Errorf("warnings: got %s", got)
	}
	if err := chromedp.Do(w.ctx, chromedp.Navigate(w.pages.URL+"/warn")); err != nil {
		t.Fatal(err)
	}
	if got := eval(`JSON.stringify(warned)`); got != `["Ignoring Event: localhost"]` {
		t.Errorf("warnings on localhost: got %s", got)
	}

	events := w.wait(4)
	if len(events) != 4 {
		for _, e := range events {
			t.Logf("%s %s %s", e.Type, deref(e.URL), e.Raw)
		}
		t.Fatalf("got %d events, want 4", len(events))
	}
	for _, e := range events {
		if e.Type == "Signup" && !strings.Contains(string(e.Raw), `"i":false`) {
			t.Errorf("interactive: false: got %s, want i false in the body", e.Raw)
		}
	}
	w.check("event names", w.query([]string{"events"}, []string{"event:name"}), map[string]string{
		"pageview": "[2]", "File Download": "[1]", "Signup": "[1]",
	})
	w.check("pages", w.query([]string{"events"}, []string{"event:page"}), map[string]string{"/opts/redacted": "[3]", "/warn": "[1]"})
	w.check("custom properties", w.query([]string{"events"}, []string{"event:name", "event:props:kind"}), map[string]string{
		"pageview|page": "[1]", "pageview|(none)": "[1]", "File Download|event": "[1]", "Signup|event": "[1]",
	})
	w.check("props", w.query([]string{"events"}, []string{"event:props:plan"}, []any{"is", "event:name", []string{"Signup"}}), map[string]string{"Pro": "[1]"})
	w.call(http.MethodPost, "/v1/sites/"+w.srv.SiteID+"/goals", map[string]any{"name": "Signup", "event_name": "Signup", "currency": "EUR"}, nil)
	if got := w.query([]string{"total_revenue"}, nil, []any{"is", "event:goal", []string{"Signup"}}); !strings.Contains(got[""], "12.5") {
		t.Errorf("revenue: got %v, want 12.5", got)
	}
}
