package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestGoalCurrency checks a goal's currency: an ISO 4217 code of a
// currency in use, in any case, stored and answered in upper case; null
// or absent for a goal without revenue.
func TestGoalCurrency(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	for _, c := range []struct {
		name string
		body map[string]any
		want any
	}{
		{"upper case", map[string]any{"name": "a", "event_name": "a", "currency": "EUR"}, "EUR"},
		{"folded", map[string]any{"name": "b", "event_name": "b", "currency": " brl "}, "BRL"},
		{"three decimals", map[string]any{"name": "c", "event_name": "c", "currency": "BHD"}, "BHD"},
		{"null", map[string]any{"name": "d", "event_name": "d", "currency": nil}, nil},
		{"absent", map[string]any{"name": "e", "page_path": "/e"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := h.q("POST", "/v1/sites/web/goals", tn.adminKey, c.body)
			mustStatus(t, r, 201, "")
			if got := r.json(t)["currency"]; got != c.want {
				t.Errorf("got currency %v, want %v", got, c.want)
			}
		})
	}
	r := h.q("GET", "/v1/sites/web/goals", tn.readKey, nil)
	mustStatus(t, r, 200, "")
	if !strings.Contains(string(r.body), `"name":"b","event_name":"b","page_path":null,"property":null,"currency":"BRL"`) {
		t.Errorf("got %s, want goal b listed with currency BRL", r.body)
	}
}

// TestQueryRevenueCurrencies checks where the revenue metrics' currency
// comes from, as Plausible has it: the revenue goals the query matches
// (its top-level event:goal filters', all goals without them), one for
// every row, each goal's in a breakdown by goal, else null with a
// warning on each revenue metric.
func TestQueryRevenueCurrencies(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	for _, g := range []map[string]any{{"name": "Order", "event_name": "order", "currency": "USD"},
		{"name": "Donation", "event_name": "donation", "currency": "EUR"}, {"name": "Signup", "event_name": "signup"},
		{"name": "Trial", "event_name": "trial", "currency": "USD"}} {
		mustStatus(t, h.q("POST", "/v1/sites/web/goals", testAdminToken, g), 201, "")
	}
	h.sendQ("web", 1, qev{anon: "a", typ: "order", url: "https://x.test/", ts: utc(1, 20, 10, 0), props: map[string]any{"revenue": 10, "currency": "USD"}})
	h.sendQ("web", 2, qev{anon: "b", typ: "order", url: "https://x.test/", ts: utc(1, 20, 11, 0), props: map[string]any{"revenue": "20.5", "currency": "USD"}})
	// Not in its goal's currency: left out (Tally has no exchange rates).
	h.sendQ("web", 3, qev{anon: "c", typ: "order", url: "https://x.test/", ts: utc(1, 20, 12, 0), props: map[string]any{"revenue": 99, "currency": "GBP"}})
	h.sendQ("web", 4, qev{anon: "d", typ: "donation", url: "https://x.test/", ts: utc(1, 20, 13, 0), props: map[string]any{"revenue": map[string]any{"amount": 5, "currency": "EUR"}}})
	h.sendQ("web", 5, qev{anon: "e", typ: "signup", url: "https://x.test/", ts: utc(1, 20, 14, 0)})
	// No revenue goal of this name: its amount counts nowhere.
	h.sendQ("web", 6, qev{anon: "f", typ: "tip", url: "https://x.test/", ts: utc(1, 20, 15, 0), props: map[string]any{"revenue": 7, "currency": "USD"}})
	h.sendQ("web", 7, qev{anon: "g", typ: "trial", url: "https://x.test/", ts: utc(1, 20, 16, 0)})

	goals := func(names ...string) []any { return []any{"is", "event:goal", names} }
	const (
		none = `{"code":"no_revenue_goals_matching","warning":"Revenue metrics are null as there are no matching revenue goals."}`
		many = `{"code":"no_single_revenue_currency","warning":"Revenue metrics are null as there are multiple currencies for the selected event:goals."}`
	)
	for _, c := range []struct {
		name     string
		body     map[string]any
		results  string
		warnings string // meta.metric_warnings, "" for none
	}{
		{"one currency", q(list("total_revenue", "average_revenue"), nil, goals("Order")),
			`[{"dimensions":[],"metrics":[{"currency":"USD","long":"$30.50","short":"$30.5","value":30.5},{"currency":"USD","long":"$15.25","short":"$15.2","value":15.25}]}]`, ""},
		{"one currency over two goals", q(list("total_revenue"), nil, goals("Order", "Trial", "Signup")),
			`[{"dimensions":[],"metrics":[{"currency":"USD","long":"$30.50","short":"$30.5","value":30.5}]}]`, ""},
		{"a revenue goal without amounts", q(list("total_revenue", "average_revenue"), nil, goals("Trial")),
			`[{"dimensions":[],"metrics":[{"currency":"USD","long":"$0.00","short":"$0.0","value":0},{"currency":"USD","long":"$0.00","short":"$0.0","value":0}]}]`, ""},
		{"two currencies", q(list("total_revenue", "events"), nil, goals("Order", "Donation")),
			`[{"dimensions":[],"metrics":[null,4]}]`, `{"total_revenue":` + many + `}`},
		{"no revenue goal matched", q(list("average_revenue", "total_revenue"), nil, goals("Signup")),
			`[{"dimensions":[],"metrics":[null,null]}]`, `{"average_revenue":` + none + `,"total_revenue":` + none + `}`},
		{"no goal filter: every goal, two currencies", q(list("total_revenue"), list("visit:country")),
			`[{"dimensions":["(not set)"],"metrics":[null]}]`, `{"total_revenue":` + many + `}`},
		{"by goal: each its currency", q(list("total_revenue", "visitors"), list("event:goal")),
			`[{"dimensions":["Order"],"metrics":[{"currency":"USD","long":"$30.50","short":"$30.5","value":30.5},3]},` +
				`{"dimensions":["Donation"],"metrics":[{"currency":"EUR","long":"€5.00","short":"€5.0","value":5},1]},` +
				`{"dimensions":["Trial"],"metrics":[{"currency":"USD","long":"$0.00","short":"$0.0","value":0},1]},` +
				`{"dimensions":["Signup"],"metrics":[null,1]}]`, ""},
		{"by goal without a revenue goal", q(list("total_revenue"), list("event:goal"), goals("Signup")),
			`[{"dimensions":["Signup"],"metrics":[null]}]`, `{"total_revenue":` + none + `}`},
		{"not asked: no warning", q(list("events"), nil, goals("Signup")), `[{"dimensions":[],"metrics":[1]}]`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := h.q("POST", "/v1/sites/web/query", tn.readKey, c.body)
			mustStatus(t, r, 200, "")
			var a struct {
				Results json.RawMessage `json:"results"`
				Meta    struct {
					MetricWarnings json.RawMessage `json:"metric_warnings"`
				} `json:"meta"`
			}
			if err := json.Unmarshal(r.body, &a); err != nil {
				t.Fatal(err)
			}
			if got := string(a.Results); got != c.results {
				t.Errorf("results: got %s, want %s", got, c.results)
			}
			if got := string(a.Meta.MetricWarnings); got != c.warnings {
				t.Errorf("meta.metric_warnings: got %s, want %s", got, c.warnings)
			}
		})
	}
}

// TestQueryExitRateRules checks where exit_rate is refused, with
// Plausible's messages, and that a visit filter is allowed.
func TestQueryExitRateRules(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withProxyGeo)
	tn := h.setupTenant("acme", "web")
	mustStatus(t, h.q("POST", "/v1/sites/web/goals", testAdminToken, map[string]any{"name": "Order", "event_name": "order"}), 201, "")
	// Exits: a on /two, b on /one, c on /two; pageviews: /one 2, /two 3.
	for i, e := range []qev{
		{anon: "a", typ: "pageview", url: "https://x.test/one", ts: utc(1, 20, 10, 0), country: "DE"},
		{anon: "a", typ: "pageview", url: "https://x.test/two", ts: utc(1, 20, 10, 1), country: "DE"},
		{anon: "b", typ: "pageview", url: "https://x.test/two", ts: utc(1, 20, 11, 0), country: "FR"},
		{anon: "b", typ: "pageview", url: "https://x.test/one", ts: utc(1, 20, 11, 1), country: "FR"},
		{anon: "c", typ: "pageview", url: "https://x.test/two", ts: utc(1, 20, 12, 0), country: "FR"},
	} {
		h.sendQ("web", i+1, e)
	}
	exits := list("visit:exit_page")
	for _, c := range []struct {
		name string
		body map[string]any
		code string // the error's, "" for a 200
		want string // the message, or the rows
	}{
		{"no dimension", q(list("exit_rate"), nil), "invalid_query", "Metric `exit_rate` requires a `\\\"visit:exit_page\\\"` dimension. No other dimensions are allowed."},
		{"another dimension", q(list("exit_rate"), list("event:page")), "invalid_query", "requires a `\\\"visit:exit_page\\\"` dimension"},
		{"a second dimension", q(list("exit_rate"), list("visit:exit_page", "visit:country")), "invalid_query", "No other dimensions are allowed"},
		{"an event filter", q(list("exit_rate"), exits, []any{"is", "event:page", list("/two")}), "invalid_query", "Metric `exit_rate` cannot be queried when filtering on event dimensions."},
		{"a nested event filter", q(list("exit_rate"), exits, []any{"not", []any{"is", "event:name", list("order")}}), "invalid_query", "filtering on event dimensions"},
		{"a goal filter", q(list("exit_rate"), exits, []any{"is", "event:goal", list("Order")}), "invalid_query", "filtering on event dimensions"},
		{"with a revenue metric", q(list("exit_rate", "total_revenue"), exits), "unsupported_query", "total_revenue"},
		{"alone", q(list("exit_rate"), exits), "", "/two: 66.7; /one: 50"},
		{"with visits", q(list("visits", "exit_rate"), exits), "", "/two: 2 66.7; /one: 1 50"},
		{"under a visit filter", q(list("exit_rate"), exits, []any{"is", "visit:country", list("DE")}), "", "/two: 100"},
		// The page's views are all its views, not only the exiting visits'.
		{"under an exit page filter", q(list("exit_rate"), exits, []any{"is", "visit:exit_page", list("/one")}), "", "/one: 50"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := h.q("POST", "/v1/sites/web/query", tn.readKey, c.body)
			if c.code == "" {
				mustStatus(t, r, 200, "")
				if got := renderRows(t, r.body); got != c.want {
					t.Errorf("got %s, want %s", got, c.want)
				}
				return
			}
			mustStatus(t, r, 400, c.code)
			if !strings.Contains(string(r.body), c.want) {
				t.Errorf("got %s, want the message to hold %q", r.body, c.want)
			}
		})
	}
}

// TestGoalCurrencyUpdate checks PATCH /v1/sites/:siteId/goals/:goalId:
// the currency is set, changed and removed (null), audited, and read by
// the next query, over the events before it too; nothing else changes,
// and bad input is a 400 naming the field.
func TestGoalCurrencyUpdate(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	h.sendQ("web", 1, qev{anon: "a", typ: "order", url: "https://x.test/", ts: utc(1, 20, 10, 0), props: map[string]any{"revenue": 12, "currency": "EUR"}})
	r := h.q("POST", "/v1/sites/web/goals", tn.adminKey, map[string]any{"name": "Order", "event_name": "order"})
	mustStatus(t, r, 201, "")
	id := fmt.Sprint(r.json(t)["id"])
	r = h.q("POST", "/v1/sites/web/goals", tn.adminKey, map[string]any{"name": "Home", "page_path": "/"})
	mustStatus(t, r, 201, "")
	home := fmt.Sprint(r.json(t)["id"])
	revenue := func() string {
		return queryRows(t, h, tn.readKey, "web", q(list("total_revenue"), nil, []any{"is", "event:goal", list("Order")}))
	}
	if got := revenue(); got != "null" {
		t.Errorf("without a currency: got %s, want null", got)
	}
	for _, c := range []struct {
		name     string
		currency any
		want     any    // the answer's currency
		revenue  string // total_revenue after
	}{
		{"set", "eur", "EUR", "12"},
		{"changed: the EUR amount is left out", "USD", "USD", "0"},
		{"removed", nil, nil, "null"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := h.q("PATCH", "/v1/sites/web/goals/"+id, tn.adminKey, map[string]any{"currency": c.currency})
			mustStatus(t, r, 200, "")
			if got := r.json(t); got["currency"] != c.want || got["name"] != "Order" || got["event_name"] != "order" {
				t.Errorf("got %s, want Order with currency %v", r.body, c.want)
			}
			if got := revenue(); got != c.revenue {
				t.Errorf("total_revenue: got %s, want %s", got, c.revenue)
			}
		})
	}
	for _, c := range []struct {
		name, path string
		body       any
		status     int
		code, want string
	}{
		{"a bad code", id, map[string]any{"currency": "EURO"}, 400, "invalid_goal", "ISO 4217"},
		{"a number", id, map[string]any{"currency": 978}, 400, "invalid_goal", "currency must be a string"},
		{"no currency", id, map[string]any{}, 400, "invalid_goal", "currency is required"},
		{"the name", id, map[string]any{"name": "Orders", "currency": "USD"}, 400, "invalid_goal", "name cannot change"},
		{"a pageview goal", home, map[string]any{"currency": "USD"}, 400, "invalid_goal", "custom event goal"},
		{"no such goal", "999", map[string]any{"currency": "USD"}, 404, "not_found", "no goal"},
		{"not an id", "x", map[string]any{"currency": "USD"}, 404, "not_found", "no goal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := h.q("PATCH", "/v1/sites/web/goals/"+c.path, tn.adminKey, c.body)
			mustStatus(t, r, c.status, c.code)
			if !strings.Contains(string(r.body), c.want) {
				t.Errorf("got %s, want the message to hold %q", r.body, c.want)
			}
		})
	}
	mustStatus(t, h.q("PATCH", "/v1/sites/web/goals/"+id, tn.readKey, map[string]any{"currency": "USD"}), 403, "forbidden")
	if got := h.count(`SELECT COUNT(*) FROM audit_log WHERE action = 'goal.update'`); got != 3 {
		t.Errorf("got %d goal.update audit rows, want 3", got)
	}
	var meta string
	if err := h.sqlDB().QueryRow(`SELECT metadata FROM audit_log WHERE action = 'goal.update' ORDER BY seq LIMIT 1`).Scan(&meta); err != nil ||
		meta != `{"currency":"EUR","event_name":"order","goal_id":`+id+`,"name":"Order","previous_currency":null}` {
		t.Errorf("got audit metadata %s (%v)", meta, err)
	}
}
