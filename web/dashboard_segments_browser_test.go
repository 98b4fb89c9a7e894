package web_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardSegments drives the dashboard's saved segments
// (docs/dashboard.md#segments) over dashServer's visits: the filters of a
// view saved as a segment (the API stores them, the view then applies the
// segment, its chip named), the segment removed, then applied again from
// the picker, and a shared link holding it shown with its name; a first
// load without a segment asks for no segment list.
func TestDashboardSegments(t *testing.T) {
	srv := dashServer(t)
	ctx, cancel := browser(t)
	defer cancel()
	signIn(t, ctx, srv, "/?period=7d&f=visit:source,google.test", srv.AdminToken)
	g := ready(t, ctx, "")
	if got := text(t, ctx, "#card-visitors .card-value"); got != "2" {
		t.Fatalf("filtered visitors: got %s, want 2", got)
	}
	segmentsAsked := `performance.getEntriesByType("resource").some(function (r) { return new URL(r.name).pathname.endsWith("/segments"); })`
	if mustEval[bool](t, ctx, segmentsAsked) {
		t.Errorf("first load: the segment list was asked for, want it asked when the picker opens")
	}

	// Save the view's filters as a segment.
	click(t, ctx, "#segments summary")
	waitFor(t, ctx, `!document.querySelector("#segment-save").hidden`, "the save form")
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("segment-name"), "From Google")); err != nil {
		t.Fatal(err)
	}
	click(t, ctx, "#segment-save button")
	g = ready(t, ctx, g)
	waitFor(t, ctx, `document.querySelector("#filters").textContent.indexOf("Segment From Google") === 0`, "the segment's chip")
	if got := mustEval[int](t, ctx, `document.querySelectorAll("#filters .chip").length`); got != 1 {
		t.Errorf("chips: got %d, want the segment's alone", got)
	}
	if got := text(t, ctx, "#card-visitors .card-value"); got != "2" {
		t.Errorf("visitors in the segment: got %s, want 2", got)
	}
	if got := mustEval[string](t, ctx, `location.search`); !strings.Contains(got, "f=segment%2C") {
		t.Errorf("URL %s, want the segment filter", got)
	}
	req, _ := http.NewRequest("GET", srv.QueryURL+"/v1/sites/"+srv.SiteID+"/segments", nil)
	req.Header.Set("Authorization", "Bearer "+srv.AdminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var list struct {
		Segments []struct {
			Name        string          `json:"name"`
			Type        string          `json:"type"`
			SegmentData json.RawMessage `json:"segment_data"`
		} `json:"segments"`
	}
	if err := json.Unmarshal(body, &list); err != nil || len(list.Segments) != 1 || list.Segments[0].Name != "From Google" ||
		list.Segments[0].Type != "site" || string(list.Segments[0].SegmentData) != `{"filters":[["is","visit:source",["google.test"]]]}` {
		t.Fatalf("got segments %s, want From Google of the source filter", body)
	}

	// Removed, then applied from the picker.
	click(t, ctx, "#filters .chip-x")
	g = ready(t, ctx, g)
	if got := text(t, ctx, "#card-visitors .card-value"); got != "4" {
		t.Errorf("unfiltered visitors: got %s, want 4", got)
	}
	mustEval[bool](t, ctx, `(function (s) { s.value = s.options[1].value; return s.dispatchEvent(new Event("change")); })(document.getElementById("segment-select"))`)
	g = ready(t, ctx, g)
	if got := text(t, ctx, "#card-visitors .card-value"); got != "2" {
		t.Errorf("visitors with the segment applied: got %s, want 2", got)
	}
	if got := table(t, ctx, "t-pages"); !strings.HasPrefix(got, "/home|1|") || !strings.Contains(got, "/pricing|1|") {
		t.Errorf("pages in the segment: got %q, want /home 1 and /pricing 1", got)
	}

	// The view's link, opened again: the chip is named.
	view := mustEval[string](t, ctx, `location.pathname + location.search`)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.QueryURL+view)); err != nil {
		t.Fatal(err)
	}
	ready(t, ctx, "")
	waitFor(t, ctx, `document.querySelector("#filters").textContent.indexOf("Segment From Google") === 0`, "the chip named after a reload")
	if got := text(t, ctx, "#card-visitors .card-value"); got != "2" {
		t.Errorf("visitors after a reload: got %s, want 2", got)
	}
}
