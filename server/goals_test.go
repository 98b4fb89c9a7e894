package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tally-analytics/tally/storage"
)

// goalDataSet is the data whose goal and funnel figures the tests below
// compute by hand. All January 2026, UTC; each visitor's events are a
// minute apart (one visit) unless said.
//
//	v1 DE  Jan 12: /pricing, signup, purchase {plan pro, revenue 49, EUR}, /blog/2026/post
//	v2 DE  Jan 13: signup, /pricing, purchase {plan pro, revenue 99, EUR}      (steps out of order)
//	v3 FR  Jan 14: /pricing, purchase {plan pro, revenue "29.4", eur}          (skips signup)
//	v4 FR  Jan 15: /pricing, signup; Jan 16 (a second visit): purchase {plan pro, revenue {amount 10, currency EUR}}
//	v5 US  Jan 17: /pricing, signup, purchase {plan basic, revenue 19, USD}   (not the pro property)
//	v6 US  Jan 18: /docs/intro, /docs/a/b
var goalDataSet = []qev{
	{anon: "v1", typ: "pageview", url: "https://shop.test/pricing", ts: utc(1, 12, 10, 0), country: "DE"},
	{anon: "v1", typ: "signup", url: "https://shop.test/signup", ts: utc(1, 12, 10, 1), country: "DE"},
	{anon: "v1", typ: "purchase", url: "https://shop.test/checkout", ts: utc(1, 12, 10, 2), country: "DE",
		props: map[string]any{"plan": "pro", "revenue": 49, "currency": "EUR"}},
	{anon: "v1", typ: "pageview", url: "https://shop.test/blog/2026/post", ts: utc(1, 12, 10, 3), country: "DE"},

	{anon: "v2", typ: "signup", url: "https://shop.test/signup", ts: utc(1, 13, 10, 0), country: "DE"},
	{anon: "v2", typ: "pageview", url: "https://shop.test/pricing", ts: utc(1, 13, 10, 1), country: "DE"},
	{anon: "v2", typ: "purchase", url: "https://shop.test/checkout", ts: utc(1, 13, 10, 2), country: "DE",
		props: map[string]any{"plan": "pro", "revenue": 99, "currency": "EUR"}},

	{anon: "v3", typ: "pageview", url: "https://shop.test/pricing", ts: utc(1, 14, 10, 0), country: "FR"},
	{anon: "v3", typ: "purchase", url: "https://shop.test/checkout", ts: utc(1, 14, 10, 1), country: "FR",
		props: map[string]any{"plan": "pro", "revenue": "29.4", "currency": "eur"}},

	{anon: "v4", typ: "pageview", url: "https://shop.test/pricing", ts: utc(1, 15, 10, 0), country: "FR"},
	{anon: "v4", typ: "signup", url: "https://shop.test/signup", ts: utc(1, 15, 10, 1), country: "FR"},
	{anon: "v4", typ: "purchase", url: "https://shop.test/checkout", ts: utc(1, 16, 10, 0), country: "FR",
		props: map[string]any{"plan": "pro", "revenue": map[string]any{"amount": 10, "currency": "EUR"}}},

	{anon: "v5", typ: "pageview", url: "https://shop.test/pricing", ts: utc(1, 17, 10, 0), country: "US"},
	{anon: "v5", typ: "signup", url: "https://shop.test/signup", ts: utc(1, 17, 10, 1), country: "US"},
	{anon: "v5", typ: "purchase", url: "https://shop.test/checkout", ts: utc(1, 17, 10, 2), country: "US",
		props: map[string]any{"plan": "basic", "revenue": 19, "currency": "USD"}},

	{anon: "v6", typ: "pageview", url: "https://shop.test/docs/intro", ts: utc(1, 18, 10, 0), country: "US"},
	{anon: "v6", typ: "pageview", url: "https://shop.test/docs/a/b", ts: utc(1, 18, 10, 1), country: "US"},
}

// goalSet are the goals of the data set.
var goalSet = []map[string]any{
	{"name": "Visit pricing", "page_path": "/pricing"},
	{"name": "Signup", "event_name": "signup"},
	{"name": "Purchase", "event_name": "purchase", "currency": "EUR"},
	{"name": "Pro purchase", "event_name": "purchase", "property": map[string]any{"name": "plan", "value": "pro"}, "currency": "EUR"},
	{"name": "Docs", "page_path": "/docs/*"},
	{"name": "Blog", "page_path": "/blog/**"},
}

// newGoalHarness loads goalDataSet and goalSet into site web of acme;
// wide: reads use the wide events rows, not event_pages.
func newGoalHarness(t *testing.T, wide bool) (*harness, tenant) {
	t.Helper()
	h := newHarness(t, withProxyGeo)
	h.db.ReadWideEvents(wide)
	tn := h.setupTenant("acme", "web")
	for i, e := range goalDataSet {
		h.sendQ("web", i+1, e)
	}
	for _, g := range goalSet {
		mustStatus(t, h.q("POST", "/v1/sites/web/goals", tn.adminKey, g), 201, "")
	}
	return h, tn
}

// TestGoalsCreateListDelete checks the goal resource: 201 with the goal,
// the list by name, 409 for a taken name, 204 then 404 on delete, and an
// audit row for each change.
func TestGoalsCreateListDelete(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	r := h.q("POST", "/v1/sites/web/goals", tn.adminKey, map[string]any{"name": " Pro purchase ", "event_name": "purchase",
		"property": map[string]any{"name": "plan", "value": "pro"}})
	mustStatus(t, r, 201, "")
	created := r.json(t)
	if created["name"] != "Pro purchase" || created["event_name"] != "purchase" || created["page_path"] != nil ||
		fmt.Sprint(created["property"]) != "map[name:plan value:pro]" || created["site_id"] != "web" || created["id"] == nil {
		t.Errorf("got %s, want the goal with its id, name trimmed", r.body)
	}
	mustStatus(t, h.q("POST", "/v1/sites/web/goals", testAdminToken, map[string]any{"name": "Docs", "page_path": "/docs/*"}), 201, "")
	r = h.q("POST", "/v1/sites/web/goals", tn.adminKey, map[string]any{"name": "Docs", "event_name": "x"})
	mustStatus(t, r, 409, "goal_name_taken")
	if !strings.Contains(string(r.body), `\"Docs\"`) {
		t.Errorf("got %s, want the message to name the goal", r.body)
	}

	r = h.q("GET", "/v1/sites/web/goals", tn.readKey, nil)
	mustStatus(t, r, 200, "")
	var list struct {
		Goals []struct {
			ID       int64   `json:"id"`
			Name     string  `json:"name"`
			PagePath *string `json:"page_path"`
		} `json:"goals"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Goals) != 2 || list.Goals[0].Name != "Docs" || *list.Goals[0].PagePath != "/docs/*" || list.Goals[1].Name != "Pro purchase" {
		t.Fatalf("got %s, want Docs then Pro purchase", r.body)
	}
	id := fmt.Sprint(list.Goals[0].ID)
	mustStatus(t, h.q("DELETE", "/v1/sites/web/goals/"+id, tn.adminKey, nil), 204, "")
	mustStatus(t, h.q("DELETE", "/v1/sites/web/goals/"+id, tn.adminKey, nil), 404, "not_found")
	mustStatus(t, h.q("DELETE", "/v1/sites/web/goals/nope", tn.adminKey, nil), 404, "not_found")
	// The name is free again.
	mustStatus(t, h.q("POST", "/v1/sites/web/goals", tn.adminKey, map[string]any{"name": "Docs", "page_path": "/docs"}), 201, "")

	rows, err := h.sqlDB().Query(`SELECT action, target, metadata FROM audit_log WHERE action LIKE 'goal.%' ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var action, target, meta string
		if err := rows.Scan(&action, &target, &meta); err != nil {
			t.Fatal(err)
		}
		got = append(got, action+" "+target+" "+meta)
	}
	want := []string{
		`goal.create web {"event_name":"purchase","goal_id":1,"name":"Pro purchase","property_name":"plan"}`,
		`goal.create web {"goal_id":2,"name":"Docs","page_path":"/docs/*"}`,
		`goal.delete web {"goal_id":2,"name":"Docs","page_path":"/docs/*"}`,
		`goal.create web {"goal_id":3,"name":"Docs","page_path":"/docs"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got audit rows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestGoalBadInput checks that every malformed goal is a 400 naming the
// field, and that nothing is stored.
func TestGoalBadInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	long := strings.Repeat("x", 121)
	for _, c := range []struct {
		name string
		body any
		code string
		want string // in the message
	}{
		{"not an object", `[1]`, "invalid_json", "JSON object"},
		{"not JSON", `{"name":`, "invalid_json", "JSON object"},
		{"no name", map[string]any{"event_name": "a"}, "invalid_goal", "name"},
		{"name not a string", map[string]any{"name": 3, "event_name": "a"}, "invalid_goal", "name"},
		{"blank name", map[string]any{"name": "  ", "event_name": "a"}, "invalid_goal", "name"},
		{"long name", map[string]any{"name": long, "event_name": "a"}, "invalid_goal", "name"},
		{"neither", map[string]any{"name": "a"}, "invalid_goal", "event_name and page_path"},
		{"both", map[string]any{"name": "a", "event_name": "a", "page_path": "/a"}, "invalid_goal", "event_name and page_path"},
		{"event_name a number", map[string]any{"name": "a", "event_name": 1}, "invalid_goal", "event_name"},
		{"event_name empty", map[string]any{"name": "a", "event_name": ""}, "invalid_goal", "event_name"},
		{"event_name null", map[string]any{"name": "a", "event_name": nil}, "invalid_goal", "event_name"},
		{"page_path relative", map[string]any{"name": "a", "page_path": "pricing"}, "invalid_goal", "page_path"},
		{"page_path an array", map[string]any{"name": "a", "page_path": []string{"/a"}}, "invalid_goal", "page_path"},
		{"page_path too long", map[string]any{"name": "a", "page_path": "/" + strings.Repeat("a", 200)}, "invalid_goal", "page_path"},
		{"pattern too long", map[string]any{"name": "a", "page_path": "/" + strings.Repeat("*.", 60)}, "invalid_goal", "page_path"},
		{"property a string", map[string]any{"name": "a", "event_name": "a", "property": "plan"}, "invalid_goal", "property"},
		{"property without value", map[string]any{"name": "a", "event_name": "a", "property": map[string]any{"name": "plan"}}, "invalid_goal", "property.value"},
		{"property value a number", map[string]any{"name": "a", "event_name": "a", "property": map[string]any{"name": "plan", "value": 1}}, "invalid_goal", "property.value"},
		{"property empty name", map[string]any{"name": "a", "event_name": "a", "property": map[string]any{"name": "", "value": "x"}}, "invalid_goal", "property.name"},
		{"currency a number", map[string]any{"name": "a", "event_name": "a", "currency": 978}, "invalid_goal", "currency must be a string"},
		{"currency empty", map[string]any{"name": "a", "event_name": "a", "currency": ""}, "invalid_goal", "ISO 4217"},
		{"currency not a code", map[string]any{"name": "a", "event_name": "a", "currency": "dollars"}, "invalid_goal", `\"dollars\" is not one`},
		{"currency of two letters", map[string]any{"name": "a", "event_name": "a", "currency": "US"}, "invalid_goal", "ISO 4217"},
		{"currency no longer in use", map[string]any{"name": "a", "event_name": "a", "currency": "DEM"}, "invalid_goal", "ISO 4217"},
		{"currency a fund code", map[string]any{"name": "a", "event_name": "a", "currency": "XXX"}, "invalid_goal", "ISO 4217"},
		{"currency on a pageview goal", map[string]any{"name": "a", "page_path": "/buy", "currency": "USD"}, "invalid_goal", "custom event goal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := h.q("POST", "/v1/sites/web/goals", tn.adminKey, c.body)
			mustStatus(t, r, 400, c.code)
			if !strings.Contains(string(r.body), c.want) {
				t.Errorf("got %s, want the message to name %q", r.body, c.want)
			}
		})
	}
	if n := h.count(`SELECT COUNT(*) FROM goals`); n != 0 {
		t.Errorf("got %d goals stored, want 0", n)
	}
}

// TestGoalAccess checks who may do what: an admin key or the admin token
// change goals, a read key lists them (403 on change), and a key of
// another workspace gets the ordinary 404 for the site and its goals.
func TestGoalAccess(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	other := h.setupTenant("other", "shop")
	r := h.q("POST", "/v1/sites/web/goals", tn.adminKey, map[string]any{"name": "Signup", "event_name": "signup"})
	mustStatus(t, r, 201, "")
	id := fmt.Sprint(r.json(t)["id"])
	goal := map[string]any{"name": "x", "event_name": "x"}
	for _, c := range []struct {
		name, method, path, token string
		body                      any
		status                    int
		code                      string
	}{
		{"read key lists", "GET", "/v1/sites/web/goals", tn.readKey, nil, 200, ""},
		{"read key cannot create", "POST", "/v1/sites/web/goals", tn.readKey, goal, 403, "forbidden"},
		{"read key cannot delete", "DELETE", "/v1/sites/web/goals/" + id, tn.readKey, nil, 403, "forbidden"},
		{"ingest key cannot list", "GET", "/v1/sites/web/goals", tn.ingestKey, nil, 403, "forbidden"},
		{"no credential", "GET", "/v1/sites/web/goals", "", nil, 401, "unauthorized"},
		{"foreign key lists", "GET", "/v1/sites/web/goals", other.adminKey, nil, 404, "not_found"},
		{"foreign key creates", "POST", "/v1/sites/web/goals", other.adminKey, goal, 404, "not_found"},
		{"foreign key deletes", "DELETE", "/v1/sites/web/goals/" + id, other.adminKey, nil, 404, "not_found"},
		{"a goal through another site", "DELETE", "/v1/sites/shop/goals/" + id, other.adminKey, nil, 404, "not_found"},
		{"foreign funnel", "POST", "/v1/sites/web/funnel", other.readKey,
			map[string]any{"steps": []string{"Signup", "Signup"}, "date_range": "30d"}, 404, "not_found"},
		{"unknown site", "GET", "/v1/sites/nope/goals", testAdminToken, nil, 404, "not_found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mustStatus(t, h.q(c.method, c.path, c.token, c.body), c.status, c.code)
		})
	}
	if n := h.count(`SELECT COUNT(*) FROM goals WHERE site_id = 'web'`); n != 1 {
		t.Errorf("got %d goals of web, want 1", n)
	}
}

// TestGoalLimit checks the bound on a site's goals: the next one is 409,
// and a deletion makes room.
func TestGoalLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	var first string
	for i := range storage.MaxGoalsPerSite {
		r := h.q("POST", "/v1/sites/web/goals", tn.adminKey, map[string]any{"name": fmt.Sprintf("g%03d", i), "event_name": "e"})
		mustStatus(t, r, 201, "")
		if i == 0 {
			first = fmt.Sprint(r.json(t)["id"])
		}
	}
	r := h.q("POST", "/v1/sites/web/goals", tn.adminKey, map[string]any{"name": "one more", "event_name": "e"})
	mustStatus(t, r, 409, "goal_limit_reached")
	if !strings.Contains(string(r.body), "100") {
		t.Errorf("got %s, want the message to give the bound", r.body)
	}
	mustStatus(t, h.q("DELETE", "/v1/sites/web/goals/"+first, tn.adminKey, nil), 204, "")
	mustStatus(t, h.q("POST", "/v1/sites/web/goals", tn.adminKey, map[string]any{"name": "one more", "event_name": "e"}), 201, "")
}

// TestGoalsGoWithTheirSite checks that deleting a site deletes its goals
// and counts them in the site.delete audit row.
func TestGoalsGoWithTheirSite(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	mustStatus(t, h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": "keep", "name": "keep"}), 201, "")
	for _, site := range []string{"web", "keep"} {
		mustStatus(t, h.q("POST", "/v1/sites/"+site+"/goals", tn.adminKey, map[string]any{"name": "Signup", "event_name": "signup"}), 201, "")
	}
	mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/sites/web", testAdminToken, nil), 204, "")
	if n := h.count(`SELECT COUNT(*) FROM goals WHERE site_id = 'web'`); n != 0 {
		t.Errorf("got %d goals of the deleted site, want 0", n)
	}
	if n := h.count(`SELECT COUNT(*) FROM goals WHERE site_id = 'keep'`); n != 1 {
		t.Errorf("got %d goals of the other site, want 1", n)
	}
	// The metadata is read in Go: json_extract is SQLite's.
	var meta string
	if err := h.sqlDB().QueryRow(`SELECT metadata FROM audit_log WHERE action = 'site.delete'`).Scan(&meta); err != nil {
		t.Fatal(err)
	}
	var m struct {
		DeletedRows map[string]int `json:"deleted_rows"`
	}
	if err := json.Unmarshal([]byte(meta), &m); err != nil || m.DeletedRows["goals"] != 1 {
		t.Errorf("got the site.delete metadata %s, want it to count 1 goal", meta)
	}
	// A site created again with the id starts without goals.
	mustStatus(t, h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": "web", "name": "web"}), 201, "")
	r := h.q("GET", "/v1/sites/web/goals", testAdminToken, nil)
	mustStatus(t, r, 200, "")
	if got := strings.TrimSpace(string(r.body)); got != `{"goals":[]}` {
		t.Errorf("got %s, want no goals", got)
	}
}

// TestQueryGoals checks the query API's event:goal dimension and filter,
// conversion rates and revenue against goalDataSet's hand-computed
// figures (6 visitors in all).
func TestQueryGoals(t *testing.T) { bothReads(t, testQueryGoals) }

func testQueryGoals(t *testing.T, wide bool) {
	h, tn := newGoalHarness(t, wide)
	goal := func(op string, names ...string) []any { return []any{op, "event:goal", names} }
	for _, c := range []struct {
		name string
		body map[string]any
		want string
	}{
		// Page patterns: /docs/* is one segment (not /docs/a/b), /blog/**
		// any number; a goal with a property counts only its value's events.
		{"by goal", q(list("visitors", "events", "conversion_rate"), list("event:goal")),
			"Purchase: 5 5 83.33; Visit pricing: 5 5 83.33; Pro purchase: 4 4 66.67; Signup: 4 4 66.67; Blog: 1 1 16.67; Docs: 1 1 16.67"},
		{"one goal", q(list("visitors", "events", "conversion_rate"), nil, goal("is", "Signup")), "4 4 66.67"},
		{"two goals", q(list("visitors", "conversion_rate"), nil, goal("is", "Docs", "Blog")), "2 33.33"},
		{"case-insensitive", q(list("visitors"), nil, []any{"is", "event:goal", list("signup"), map[string]any{"case_sensitive": false}}), "4"},
		{"contains", q(list("visitors"), nil, goal("contains", "urchase")), "5"},
		{"matches", q(list("visitors"), nil, goal("matches", "^Pro")), "4"},
		{"matches nothing", q(list("visitors"), nil, goal("matches", "^Nothing")), "0"},
		{"is_not", q(list("visitors", "events"), nil, goal("is_not", "Visit pricing", "Purchase", "Signup")), "2 3"},
		{"by country", q(list("visitors", "conversion_rate", "group_conversion_rate"), list("visit:country"), goal("is", "Signup")),
			"DE: 2 33.33 100; FR: 1 16.67 50; US: 1 16.67 50"},
		{"by goal and country", q(list("visitors", "group_conversion_rate"), list("event:goal", "visit:country"), goal("is", "Pro purchase")),
			"Pro purchase DE: 2 100; Pro purchase FR: 2 100"},
		{"with another filter", q(list("visitors", "conversion_rate"), nil, goal("is", "Signup"), []any{"is", "visit:country", list("DE", "FR")}),
			"3 75"},
		{"revenue", q(list("total_revenue", "average_revenue", "events"), nil, goal("is", "Pro purchase")), "187.4 46.85 4"},
		{"revenue by goal", q(list("total_revenue"), list("event:goal"), goal("is", "Pro purchase")), "Pro purchase: 187.4"},
		{"revenue in one currency", q(list("total_revenue", "average_revenue"), nil, goal("is", "Purchase"), []any{"is_not", "event:props:currency", list("USD")}),
			"187.4 46.85"},
		// v5's 19 USD is not in its goal's currency: left out, not converted.
		{"an amount in another currency", q(list("total_revenue", "events"), list("event:goal"), goal("is", "Purchase")), "Purchase: 187.4 5"},
		{"revenue without a goal filter", q(list("total_revenue"), list("visit:country")), "DE: 148; FR: 39.4; US: 0"},
		{"revenue of a goal without a currency", q(list("total_revenue", "events"), list("event:goal"), goal("is", "Signup", "Purchase")), "Purchase: 187.4 5; Signup: null 4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := queryRows(t, h, tn.readKey, "web", c.body); got != c.want {
				t.Errorf("got %s, want %s", got, c.want)
			}
		})
	}
	r := h.q("POST", "/v1/sites/web/query", tn.readKey, q(list("total_revenue"), nil, goal("is", "Pro purchase")))
	if !strings.Contains(string(r.body), `"revenue_currency":"EUR"`) {
		t.Errorf("got %s, want meta.revenue_currency EUR", r.body)
	}
}

// TestQueryGoalErrors checks the goal queries Tally refuses, each a 400
// naming the problem.
func TestQueryGoalErrors(t *testing.T) { bothReads(t, testQueryGoalErrors) }

func testQueryGoalErrors(t *testing.T, wide bool) {
	h, tn := newGoalHarness(t, wide)
	goal := func(op string, names ...string) []any { return []any{op, "event:goal", names} }
	for _, c := range []struct {
		name string
		body map[string]any
		code string
		want string
	}{
		{"unknown goal", q(list("visitors"), nil, goal("is", "Nope")), "invalid_query", `goal \"Nope\" is not configured`},
		{"unknown goal in is_not", q(list("visitors"), nil, goal("is_not", "Nope")), "invalid_query", `\"Nope\"`},
		{"conversion_rate without a goal", q(list("conversion_rate"), nil), "invalid_query", "event:goal"},
		{"group_conversion_rate without dimensions", q(list("group_conversion_rate"), nil, goal("is", "Signup")), "invalid_query", "dimensions"},
		{"goal nested with a rate", q(list("conversion_rate"), nil, []any{"or", []any{goal("is", "Signup"), goal("is", "Docs")}}),
			"unsupported_query", "top level"},
		{"percentage by goal", q(list("visitors", "percentage"), list("event:goal")), "unsupported_query", "percentage"},
		{"session metric by goal", q(list("bounce_rate"), list("event:goal")), "unsupported_query", "bounce_rate"},
		{"bad pattern", q(list("visitors"), nil, goal("matches", "(")), "invalid_query", "RE2"},
		{"exit_rate without visit:exit_page", q(list("exit_rate"), nil), "invalid_query", "visit:exit_page"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := h.q("POST", "/v1/sites/web/query", tn.readKey, c.body)
			mustStatus(t, r, 400, c.code)
			if !strings.Contains(string(r.body), c.want) {
				t.Errorf("got %s, want the message to hold %q", r.body, c.want)
			}
		})
	}
}

// funnelRows posts a funnel and renders its steps as "goal visitors
// rate dropoff" joined by "; ".
func funnelRows(t *testing.T, h *harness, token string, body map[string]any) (string, funnelAnswer) {
	t.Helper()
	r := h.q("POST", "/v1/sites/web/funnel", token, body)
	mustStatus(t, r, 200, "")
	var a funnelAnswer
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range a.Steps {
		out = append(out, fmt.Sprintf("%s %d %v %d", s.Goal, s.Visitors, s.ConversionRate, s.Dropoff))
	}
	return strings.Join(out, "; "), a
}

// TestFunnel checks funnels against goalDataSet's hand-computed figures:
// v2 does the steps out of order, v3 skips one, v4 completes the last in
// a second visit, v5 buys the basic plan; each counts up to the step it
// reached in order within one visit.
func TestFunnel(t *testing.T) { bothReads(t, testFunnel) }

func testFunnel(t *testing.T, wide bool) {
	h, tn := newGoalHarness(t, wide)
	steps := list("Visit pricing", "Signup", "Pro purchase")
	for _, c := range []struct {
		name string
		body map[string]any
		want string
	}{
		{"three steps", map[string]any{"steps": steps, "date_range": january},
			"Visit pricing 5 100 0; Signup 3 60 2; Pro purchase 1 20 2"},
		{"another order", map[string]any{"steps": list("Signup", "Visit pricing", "Pro purchase"), "date_range": january},
			"Signup 4 100 0; Visit pricing 1 25 3; Pro purchase 1 25 0"},
		{"a step twice", map[string]any{"steps": list("Visit pricing", "Purchase", "Visit pricing"), "date_range": january},
			"Visit pricing 5 100 0; Purchase 4 80 1; Visit pricing 0 0 4"},
		{"page patterns", map[string]any{"steps": list("Docs", "Docs"), "date_range": january},
			"Docs 1 100 0; Docs 0 0 1"},
		{"visit filter", map[string]any{"steps": steps, "date_range": january, "filters": []any{[]any{"is", "visit:country", list("FR")}}},
			"Visit pricing 2 100 0; Signup 1 50 1; Pro purchase 0 0 1"},
		{"a range without v1 and v2", map[string]any{"steps": steps, "date_range": list("2026-01-14", "2026-01-31")},
			"Visit pricing 3 100 0; Signup 2 66.67 1; Pro purchase 0 0 2"},
		{"nothing", map[string]any{"steps": steps, "date_range": list("2026-01-01", "2026-01-02")},
			"Visit pricing 0 0 0; Signup 0 0 0; Pro purchase 0 0 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, a := funnelRows(t, h, tn.readKey, c.body)
			if got != c.want {
				t.Errorf("got %s, want %s", got, c.want)
			}
			if a.PurgedRange != nil {
				t.Errorf("got purged_range %v, want null", a.PurgedRange)
			}
		})
	}

	// An erased subject is in no figure: v1 was the one full conversion.
	mustStatus(t, h.q("POST", "/v1/sites/web/gdpr/delete", tn.adminKey, map[string]any{"subject": map[string]any{"anon_id": "v1"}},
		"Content-Type", "application/json"), 200, "")
	if got, _ := funnelRows(t, h, tn.readKey, map[string]any{"steps": steps, "date_range": january}); got != "Visit pricing 4 100 0; Signup 2 50 2; Pro purchase 0 0 2" {
		t.Errorf("got %s after erasing v1, want Visit pricing 4 100 0; Signup 2 50 2; Pro purchase 0 0 2", got)
	}
	for _, c := range []struct {
		body map[string]any
		want string
	}{
		{q(list("visitors", "events", "conversion_rate"), list("event:goal")),
			"Purchase: 4 4 80; Visit pricing: 4 4 80; Pro purchase: 3 3 60; Signup: 3 3 60; Docs: 1 1 20"},
		{q(list("total_revenue", "average_revenue"), nil, []any{"is", "event:goal", list("Pro purchase")}), "138.4 46.133"},
	} {
		if got := queryRows(t, h, tn.readKey, "web", c.body); got != c.want {
			t.Errorf("got %s after erasing v1, want %s", got, c.want)
		}
	}
}

// TestFunnelErrors checks that every malformed funnel is a 400 naming the
// problem.
func TestFunnelErrors(t *testing.T) { bothReads(t, testFunnelErrors) }

func testFunnelErrors(t *testing.T, wide bool) {
	h, tn := newGoalHarness(t, wide)
	two := list("Signup", "Purchase")
	for _, c := range []struct {
		name string
		body any
		code string
		want string
	}{
		{"not an object", `[]`, "invalid_json", "JSON object"},
		{"no steps", map[string]any{"date_range": "30d"}, "invalid_query", "steps"},
		{"one step", map[string]any{"steps": list("Signup"), "date_range": "30d"}, "invalid_query", "2 to 8"},
		{"nine steps", map[string]any{"steps": list("Signup", "Signup", "Signup", "Signup", "Signup", "Signup", "Signup", "Signup", "Signup"), "date_range": "30d"},
			"invalid_query", "2 to 8"},
		{"steps not strings", map[string]any{"steps": []any{1, 2}, "date_range": "30d"}, "invalid_query", "steps"},
		{"unknown goal", map[string]any{"steps": list("Signup", "Nope"), "date_range": "30d"}, "invalid_query", `\"Nope\"`},
		{"no date_range", map[string]any{"steps": two}, "invalid_query", "date_range"},
		{"bad date_range", map[string]any{"steps": two, "date_range": "fortnight"}, "invalid_query", "fortnight"},
		{"unknown date_range", map[string]any{"steps": two, "date_range": "fortnight"}, "invalid_query", "fortnight"},
		{"bad filter", map[string]any{"steps": two, "date_range": "30d", "filters": []any{[]any{"is", "visit:planet", list("x")}}}, "invalid_query", "visit:planet"},
		{"unknown goal in a filter", map[string]any{"steps": two, "date_range": "30d", "filters": []any{[]any{"is", "event:goal", list("Nope")}}},
			"invalid_query", `\"Nope\"`},
		{"unknown field", map[string]any{"steps": two, "date_range": "30d", "metrics": list("visitors")}, "invalid_query", "metrics"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := h.q("POST", "/v1/sites/web/funnel", tn.readKey, c.body)
			mustStatus(t, r, 400, c.code)
			if !strings.Contains(string(r.body), c.want) {
				t.Errorf("got %s, want the message to hold %q", r.body, c.want)
			}
		})
	}
}

// TestFunnelSaysWhatRetentionPurged checks purged_range: the part of the
// range before the site's kept raw events.
func TestFunnelSaysWhatRetentionPurged(t *testing.T) { bothReads(t, testFunnelSaysWhatRetentionPurged) }

func testFunnelSaysWhatRetentionPurged(t *testing.T, wide bool) {
	h, tn := newGoalHarness(t, wide)
	// Kept: the 20 days before today (January 31).
	mustStatus(t, h.q("PATCH", "/v1/sites/web", testAdminToken, map[string]any{"retention_days": 20}), 200, "")
	if err := h.srv.purge(context.Background()); err != nil {
		t.Fatal(err)
	}
	steps := list("Visit pricing", "Signup", "Pro purchase")
	got, a := funnelRows(t, h, tn.readKey, map[string]any{"steps": steps, "date_range": january})
	if want := "2026-01-01T00:00:00+00:00 2026-01-11T23:59:59+00:00"; strings.Join(a.PurgedRange, " ") != want {
		t.Errorf("got purged_range %v, want %s", a.PurgedRange, want)
	}
	// Every event of the data set is after the cut.
	if want := "Visit pricing 5 100 0; Signup 3 60 2; Pro purchase 1 20 2"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	_, a = funnelRows(t, h, tn.readKey, map[string]any{"steps": steps, "date_range": list("2026-01-12", "2026-01-31")})
	if a.PurgedRange != nil {
		t.Errorf("got purged_range %v for a range after the cut, want null", a.PurgedRange)
	}
}

// TestFunnelOrderAndOddTexts checks that a funnel orders a visit's events
// by time, then by arrival (two steps in one millisecond), and reads types,
// urls and properties holding commas and digits.
func TestFunnelOrderAndOddTexts(t *testing.T) { bothReads(t, testFunnelOrderAndOddTexts) }

func testFunnelOrderAndOddTexts(t *testing.T, wide bool) {
	h := newHarness(t)
	h.db.ReadWideEvents(wide)
	tn := h.setupTenant("acme", "web")
	for _, g := range []map[string]any{
		{"name": "Comma page", "page_path": "/a,b/1,2"},
		{"name": "Comma event", "event_name": "x.1-y"},
		{"name": "Noted", "event_name": "x.1-y", "property": map[string]any{"name": "note", "value": "3,4-"}},
	} {
		mustStatus(t, h.q("POST", "/v1/sites/web/goals", tn.adminKey, g), 201, "")
	}
	at := utc(1, 20, 10, 0)
	// Same millisecond: the page arrives first, the event second.
	h.sendQ("web", 1, qev{anon: "w1", typ: "pageview", url: "https://shop.test/a,b/1,2?q=5,6", ts: at})
	h.sendQ("web", 2, qev{anon: "w1", typ: "x.1-y", url: "https://shop.test/-", ts: at, props: map[string]any{"note": "3,4-"}})
	for _, c := range []struct {
		steps []string
		want  string
	}{
		{list("Comma page", "Comma event"), "Comma page 1 100 0; Comma event 1 100 0"},
		{list("Comma event", "Comma page"), "Comma event 1 100 0; Comma page 0 0 1"},
		{list("Comma page", "Noted"), "Comma page 1 100 0; Noted 1 100 0"},
	} {
		if got, _ := funnelRows(t, h, tn.readKey, map[string]any{"steps": c.steps, "date_range": january}); got != c.want {
			t.Errorf("got %s, want %s", got, c.want)
		}
	}
}

// TestGoalCreateSiteDeletedMidRequest checks that a goal created while its
// site is deleted is not stored nor audited: it would outlive the site and
// count for a later site with the id.
func TestGoalCreateSiteDeletedMidRequest(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	deleted := false
	// The first clock reading of the create is storage's, for created_at,
	// just before the insert goes to the writer.
	h.clock.OnNextRead(func() {
		mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/sites/web", testAdminToken, nil), 204, "")
		deleted = true
	})
	mustStatus(t, h.q("POST", "/v1/sites/web/goals", testAdminToken, map[string]any{"name": "Signup", "event_name": "signup"}), 404, "not_found")
	if !deleted {
		t.Fatal("the site was not deleted during the request")
	}
	if n := h.count(`SELECT COUNT(*) FROM goals`); n != 0 {
		t.Errorf("got %d goals, want 0", n)
	}
	if n := h.count(`SELECT COUNT(*) FROM audit_log WHERE action = 'goal.create'`); n != 0 {
		t.Errorf("got %d goal.create audit rows, want 0", n)
	}
}

// bothReads runs test with reads through event_pages (narrow), then
// through the wide events rows, as before its backfill ends
// (docs/query-api.md#how-reports-stay-fast): the figures must not differ.
func bothReads(t *testing.T, test func(t *testing.T, wide bool)) {
	t.Run("narrow", func(t *testing.T) { test(t, false) })
	t.Run("wide", func(t *testing.T) { test(t, true) })
}
