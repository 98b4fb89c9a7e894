package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/tally-analytics/tally/storage"
)

// TestQueryEstimateIsFlagged: an unfiltered report of a range with more
// than 10,000 visitors says in meta.metric_warnings that its visitors and
// percentage are estimates, and they are within 3%, as does one filtered
// on one dimension; one filtered on two dimensions is exact and says
// nothing (docs/query-api.md#how-reports-stay-fast).
func TestQueryEstimateIsFlagged(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	// 12,000 visitors over ten January days, stored through the storage
	// layer (HTTP intake of as many would only make the test slow).
	var events []storage.IngestEvent
	for v := range 12000 {
		url := fmt.Sprintf("https://shop.test/p%d", v%3)
		events = append(events, storage.IngestEvent{ID: fmt.Sprint("e", v), SiteID: "web", Type: "pageview",
			AnonID: fmt.Sprint("visitor-", v), TS: time.Date(2026, 1, 1+v%10, 12, 0, v%60, 0, time.UTC),
			URL: &url, Raw: []byte(`{}`)})
	}
	for len(events) > 0 {
		n := min(len(events), 2000)
		if _, err := h.db.Ingest(context.Background(), events[:n], nil, nil); err != nil {
			t.Fatal(err)
		}
		events = events[n:]
	}
	type answer struct {
		Results []struct {
			Metrics []float64 `json:"metrics"`
		} `json:"results"`
		Meta struct {
			MetricWarnings map[string]struct{ Code, Warning string } `json:"metric_warnings"`
		} `json:"meta"`
	}
	for _, c := range []struct {
		name      string
		body      map[string]any
		estimated bool
	}{
		{"unfiltered", q(list("visitors", "pageviews"), nil), true},
		{"by page", q(list("visitors", "percentage"), list("event:page")), true},
		// A filter on one dimension reads its day partials (estimated); one
		// on two is the scan's, exact.
		{"filtered on one dimension", q(list("visitors", "pageviews"), nil, []any{"is_not", "event:page", []string{"/nowhere"}}), true},
		{"filtered on two", q(list("visitors", "pageviews"), nil, []any{"is_not", "event:page", []string{"/nowhere"}},
			[]any{"is_not", "visit:country", []string{"XX"}}), false},
	} {
		r := h.q("POST", "/v1/sites/web/query", tn.readKey, c.body)
		mustStatus(t, r, 200, "")
		var a answer
		if err := json.Unmarshal(r.body, &a); err != nil {
			t.Fatal(err)
		}
		w, flagged := a.Meta.MetricWarnings["visitors"]
		if flagged != c.estimated || (flagged && w.Code != "estimated") {
			t.Errorf("%s: got metric_warnings %v, want visitors flagged %v", c.name, a.Meta.MetricWarnings, c.estimated)
		}
		if _, p := a.Meta.MetricWarnings["percentage"]; p != (c.name == "by page") {
			t.Errorf("%s: got metric_warnings %v, want percentage flagged only by page", c.name, a.Meta.MetricWarnings)
		}
		total := 0.0
		for _, res := range a.Results {
			total += res.Metrics[0]
		}
		if c.estimated && math.Abs(total-12000) > 0.03*12000 || !c.estimated && total != 12000 {
			t.Errorf("%s: got %v visitors, want 12000 (within 3%% when estimated: %v)", c.name, total, c.estimated)
		}
	}
}
