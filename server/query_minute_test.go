package server

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestQueryByMinute: time:minute buckets a range of a day or less by the
// minute, with every minute's label, and compares with the previous
// period, every minute of it, zeros included, as a compared series is
// (the dashboard's realtime graph, docs/query-api.md); a longer
// range is 400. queryDataSet's a: pageviews at 10:00 and 10:05 UTC on
// January 10, a signup at 10:06; the site's zone is UTC.
func TestQueryByMinute(t *testing.T) {
	t.Parallel()
	h, tn := newQueryHarness(t)
	body := q(list("pageviews", "events"), list("time:minute"))
	body["date_range"] = list("2026-01-10T09:59:00Z", "2026-01-10T10:06:59Z")
	body["include"] = map[string]any{"time_labels": true, "comparisons": map[string]any{"mode": "previous_period"}}
	for _, path := range []string{"/v1/sites/web/query", "/api/v2/query"} {
		r := h.q("POST", path, tn.readKey, body)
		mustStatus(t, r, 200, "")
		if got, want := renderRows(t, r.body), strings.Join([]string{
			"2026-01-10 09:59:00: 0 0 vs 2026-01-10 09:51:00: 0 0 (0 0)",
			"2026-01-10 10:00:00: 1 1 vs 2026-01-10 09:52:00: 0 0 (100 100)",
			"2026-01-10 10:01:00: 0 0 vs 2026-01-10 09:53:00: 0 0 (0 0)",
			"2026-01-10 10:02:00: 0 0 vs 2026-01-10 09:54:00: 0 0 (0 0)",
			"2026-01-10 10:03:00: 0 0 vs 2026-01-10 09:55:00: 0 0 (0 0)",
			"2026-01-10 10:04:00: 0 0 vs 2026-01-10 09:56:00: 0 0 (0 0)",
			"2026-01-10 10:05:00: 1 1 vs 2026-01-10 09:57:00: 0 0 (100 100)",
			"2026-01-10 10:06:00: 0 1 vs 2026-01-10 09:58:00: 0 0 (0 100)"}, "; "); got != want {
			t.Errorf("%s: got  %s\nwant %s", path, got, want)
		}
		var a struct {
			Meta struct {
				TimeLabels []string `json:"time_labels"`
			} `json:"meta"`
		}
		if err := json.Unmarshal(r.body, &a); err != nil {
			t.Fatal(err)
		}
		if n := len(a.Meta.TimeLabels); n != 8 || a.Meta.TimeLabels[0] != "2026-01-10 09:59:00" || a.Meta.TimeLabels[7] != "2026-01-10 10:06:00" {
			t.Errorf("%s: time labels: got %d %v, want the 8 minutes 09:59 to 10:06", path, n, a.Meta.TimeLabels)
		}
	}
	long := q(list("visitors"), list("time:minute"))
	mustStatus(t, h.q("POST", "/v1/sites/web/query", tn.readKey, long), 400, "invalid_query")
	long["date_range"] = "all"
	mustStatus(t, h.q("POST", "/v1/sites/web/query", tn.readKey, long), 400, "invalid_query")
	day := q(list("visitors"), list("time:minute"))
	day["date_range"] = list("2026-01-10", "2026-01-10")
	mustStatus(t, h.q("POST", "/v1/sites/web/query", tn.readKey, day), 200, "")
}
