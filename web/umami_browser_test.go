package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// umamiWebsiteID is the website id of Umami's documentation's snippet,
// kept by the test's site as an alias.
const umamiWebsiteID = "94db1cb1-74f4-4a40-ad6c-962362670409"

// TestUmamiSnippetInABrowser loads pages holding Umami's published
// snippet verbatim (cloud.umami.is mapped to Tally) and its documented
// attributes, and reads back what they sent through the v2 query API
// (docs/intake.md#umamis-snippet).
func TestUmamiSnippetInABrowser(t *testing.T) {
	snippet := `<script defer src="https://cloud.umami.is/script.js" data-website-id="94db1cb1-74f4-4a40-ad6c-962362670409"></script>`
	body := `<button id="signup" data-umami-event="Signup button" data-umami-event-plan="pro"><span id="label">Sign up</span></button>
<a id="docs" data-umami-event="Docs link" href="/u/docs">Docs</a>`
	w := newSnippetWorld(t, map[string]string{
		"/u":      plausiblePage(snippet, body),
		"/u/docs": plausiblePage(snippet, ``),
		"/host": plausiblePage(`<script defer src="https://cloud.umami.is/script.js" data-website-id="94db1cb1-74f4-4a40-ad6c-962362670409"
  data-host-url="http://yourdomain.com/stats" data-domains="yourdomain.com" data-tag="beta"></script>`, ``),
		"/other-domain": plausiblePage(`<script defer src="https://cloud.umami.is/script.js" data-website-id="94db1cb1-74f4-4a40-ad6c-962362670409" data-domains="example.org"></script>`, ``),
		"/auto-off": plausiblePage(`<script defer src="https://cloud.umami.is/script.js" data-website-id="94db1cb1-74f4-4a40-ad6c-962362670409" data-auto-track="false"></script>
<script>window.addEventListener("load", function () { umami.track("Manual", { step: "1" }) })</script>`, body),
	}, umamiWebsiteID)

	w.open("/u?utm_source=newsletter")
	w.wait(1)
	w.run(`history.pushState({}, "", "/u/pricing")`)
	w.wait(2)
	if err := chromedp.Do(w.ctx, chromedp.Click(chromedp.CSS("#label"))); err != nil {
		t.Fatal(err)
	}
	w.wait(3)
	w.run(`umami.track("Purchase", { amount: 10 }); umami.identify({ tier: "gold" })`)
	w.wait(5)
	// A tagged link: the event, then the link is followed.
	if err := chromedp.Do(w.ctx, chromedp.Click(chromedp.CSS("#docs"))); err != nil {
		t.Fatal(err)
	}
	w.waitPath("/u/docs")
	w.wait(7)
	// data-host-url (through the site's proxy), data-domains, data-tag.
	w.open("/host")
	w.wait(8)
	// Another domain sends nothing; with auto-track off only the page's own call.
	w.open("/other-domain")
	w.open("/auto-off")
	if events := w.wait(9); len(events) != 9 {
		for _, e := range events {
			t.Logf("%s %s %s", e.Type, deref(e.URL), e.Raw)
		}
		t.Fatalf("got %d events, want 9", len(events))
	}
	w.check("event names", w.query([]string{"events"}, []string{"event:name"}), map[string]string{
		"pageview": "[4]", "Signup button": "[1]", "Purchase": "[1]", "identify": "[1]", "Docs link": "[1]", "Manual": "[1]",
	})
	w.check("pages", w.query([]string{"pageviews"}, []string{"event:page"}, []any{"is", "event:name", []string{"pageview"}}), map[string]string{
		"/u": "[1]", "/u/pricing": "[1]", "/u/docs": "[1]", "/host": "[1]",
	})
	w.check("event data", w.query([]string{"events"}, []string{"event:name", "event:props:plan"}, []any{"is", "event:props:plan", []string{"pro"}}), map[string]string{
		"Signup button|pro": "[1]",
	})
	w.check("source", w.query([]string{"visitors"}, []string{"visit:utm_source"}, []any{"is", "visit:utm_source", []string{"newsletter"}}), map[string]string{
		"newsletter": "[1]",
	})
}
