package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// createGoalNamed creates an event goal of site and returns its id.
func createGoalNamed(t *testing.T, h *harness, site, name string) int64 {
	t.Helper()
	r := h.q("POST", "/v1/sites/"+site+"/goals", testAdminToken, map[string]any{"name": name, "event_name": name})
	mustStatus(t, r, 201, "")
	return int64(r.json(t)["id"].(float64))
}

// funnelSteps is the "steps" of a funnel answer as "id:name" words.
func funnelSteps(t *testing.T, r response) string {
	t.Helper()
	var f struct {
		Steps []struct {
			GoalID int64  `json:"goal_id"`
			Name   string `json:"name"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(r.body, &f); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range f.Steps {
		out = append(out, fmt.Sprintf("%d:%s", s.GoalID, s.Name))
	}
	return strings.Join(out, " ")
}

// TestSavedFunnels checks the saved funnel resource: steps by goal id or
// name (stored by id, answered with both), the list by name, PATCH, 204
// then 404 on delete, a goal that is a step refused deletion, and an audit
// row for each change.
func TestSavedFunnels(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	h.setupTenant("other", "elsewhere")
	visit := createGoalNamed(t, h, "web", "Visit")
	signup := createGoalNamed(t, h, "web", "Signup")
	buy := createGoalNamed(t, h, "web", "Buy")
	foreign := createGoalNamed(t, h, "elsewhere", "Foreign")

	r := h.q("POST", "/v1/sites/web/funnels", tn.adminKey, map[string]any{"name": " Signup flow ", "steps": []any{visit, "Signup"}})
	mustStatus(t, r, 201, "")
	created := r.json(t)
	if created["name"] != "Signup flow" || created["site_id"] != "web" || created["created_at"] != created["updated_at"] {
		t.Errorf("got %s, want the funnel, its name trimmed", r.body)
	}
	if got, want := funnelSteps(t, r), fmt.Sprintf("%d:Visit %d:Signup", visit, signup); got != want {
		t.Errorf("got steps %s, want %s", got, want)
	}
	id := fmt.Sprint(created["id"])
	mustStatus(t, h.q("POST", "/v1/sites/web/funnels", testAdminToken, map[string]any{"name": "All", "steps": []any{"Visit", "Signup", "Buy"}}), 201, "")

	for _, c := range []struct {
		name string
		body any
		code string
		path string // the detail's path
	}{
		{"no name", map[string]any{"steps": []any{visit, signup}}, "invalid_funnel", "/name"},
		{"empty name", map[string]any{"name": " ", "steps": []any{visit, signup}}, "invalid_funnel", "/name"},
		{"long name", map[string]any{"name": strings.Repeat("x", 121), "steps": []any{visit, signup}}, "invalid_funnel", "/name"},
		{"no steps", map[string]any{"name": "x"}, "invalid_funnel", "/steps"},
		{"one step", map[string]any{"name": "x", "steps": []any{visit}}, "invalid_funnel", "/steps"},
		{"nine steps", map[string]any{"name": "x", "steps": []any{visit, visit, visit, visit, visit, visit, visit, visit, visit}}, "invalid_funnel", "/steps"},
		{"steps not an array", map[string]any{"name": "x", "steps": "Visit"}, "invalid_funnel", "/steps"},
		{"a step neither id nor name", map[string]any{"name": "x", "steps": []any{visit, true}}, "invalid_funnel", "/steps/1"},
		{"an unknown goal name", map[string]any{"name": "x", "steps": []any{visit, "Nope"}}, "invalid_funnel", "/steps/1"},
		{"another site's goal", map[string]any{"name": "x", "steps": []any{foreign, visit}}, "invalid_funnel", "/steps/0"},
		{"an unknown field", map[string]any{"name": "x", "steps": []any{visit, signup}, "filters": []any{}}, "invalid_funnel", "/filters"},
		{"a name taken", map[string]any{"name": "Signup flow", "steps": []any{visit, buy}}, "funnel_name_taken", "/name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := h.q("POST", "/v1/sites/web/funnels", tn.adminKey, c.body)
			status := 400
			if c.code == "funnel_name_taken" {
				status = 409
			}
			mustStatus(t, r, status, c.code)
			var e struct {
				Error struct {
					Details []struct{ Path string } `json:"details"`
				} `json:"error"`
			}
			if err := json.Unmarshal(r.body, &e); err != nil || len(e.Error.Details) != 1 || e.Error.Details[0].Path != c.path {
				t.Errorf("got %s, want one detail at %s", r.body, c.path)
			}
		})
	}

	for _, c := range []struct {
		name, method, path, token string
		status                    int
	}{
		{"a read key lists them", "GET", "/v1/sites/web/funnels", tn.readKey, 200},
		{"a read key cannot create one", "POST", "/v1/sites/web/funnels", tn.readKey, 403},
		{"a read key cannot change one", "PATCH", "/v1/sites/web/funnels/" + id, tn.readKey, 403},
		{"a read key cannot delete one", "DELETE", "/v1/sites/web/funnels/" + id, tn.readKey, 403},
		{"another workspace's site is not found", "GET", "/v1/sites/elsewhere/funnels", tn.adminKey, 404},
		{"an unknown site is not found", "GET", "/v1/sites/nope/funnels", tn.adminKey, 404},
		{"a funnel of another site is not found", "PATCH", "/v1/sites/elsewhere/funnels/" + id, testAdminToken, 404},
		{"a funnel id not a number is not found", "DELETE", "/v1/sites/web/funnels/x", tn.adminKey, 404},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := h.q(c.method, c.path, c.token, map[string]any{"name": "y"})
			if r.status != c.status {
				t.Errorf("got %d %s, want %d", r.status, r.body, c.status)
			}
		})
	}

	r = h.q("GET", "/v1/sites/web/funnels", tn.readKey, nil)
	mustStatus(t, r, 200, "")
	var l struct {
		Funnels []struct{ Name string } `json:"funnels"`
	}
	if err := json.Unmarshal(r.body, &l); err != nil || len(l.Funnels) != 2 || l.Funnels[0].Name != "All" || l.Funnels[1].Name != "Signup flow" {
		t.Errorf("got %s, want All then Signup flow", r.body)
	}

	// A goal that is a step cannot go; once no funnel names it, it can.
	mustStatus(t, h.q("DELETE", fmt.Sprintf("/v1/sites/web/goals/%d", signup), tn.adminKey, nil), 409, "goal_in_funnel")
	r = h.q("PATCH", "/v1/sites/web/funnels/"+id, tn.adminKey, map[string]any{"name": "Buying", "steps": []any{"Visit", buy, "Visit"}})
	mustStatus(t, r, 200, "")
	if got, want := funnelSteps(t, r), fmt.Sprintf("%d:Visit %d:Buy %d:Visit", visit, buy, visit); got != want || r.json(t)["name"] != "Buying" {
		t.Errorf("got %s, want Buying with steps %s", r.body, want)
	}
	mustStatus(t, h.q("PATCH", "/v1/sites/web/funnels/"+id, tn.adminKey, map[string]any{"name": "All"}), 409, "funnel_name_taken")
	mustStatus(t, h.q("PATCH", "/v1/sites/web/funnels/"+id, tn.adminKey, map[string]any{}), 400, "invalid_funnel")
	mustStatus(t, h.q("DELETE", "/v1/sites/web/funnels/2", tn.adminKey, nil), 204, "")
	mustStatus(t, h.q("DELETE", fmt.Sprintf("/v1/sites/web/goals/%d", signup), tn.adminKey, nil), 204, "")
	mustStatus(t, h.q("DELETE", "/v1/sites/web/funnels/2", tn.adminKey, nil), 404, "not_found")

	// The saved steps' names run as the funnel endpoint's steps.
	mustStatus(t, h.q("POST", "/v1/sites/web/funnel", tn.readKey, map[string]any{"steps": []string{"Visit", "Buy", "Visit"}, "date_range": "day"}), 200, "")

	rows, err := h.sqlDB().Query(`SELECT action, target, metadata FROM audit_log WHERE action LIKE 'funnel.%' ORDER BY seq`)
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
		fmt.Sprintf(`funnel.create web {"funnel_id":1,"goal_ids":[%d,%d],"name":"Signup flow"}`, visit, signup),
		fmt.Sprintf(`funnel.create web {"funnel_id":2,"goal_ids":[%d,%d,%d],"name":"All"}`, visit, signup, buy),
		fmt.Sprintf(`funnel.update web {"changed":["name","steps"],"funnel_id":1,"goal_ids":[%d,%d,%d],"name":"Buying","previous_name":"Signup flow"}`, visit, buy, visit),
		fmt.Sprintf(`funnel.delete web {"funnel_id":2,"goal_ids":[%d,%d,%d],"name":"All"}`, visit, signup, buy),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got audit rows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSavedFunnelCap: a site holds at most MaxFunnelsPerSite funnels.
func TestSavedFunnelCap(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	createGoalNamed(t, h, "web", "A")
	createGoalNamed(t, h, "web", "B")
	for i := range 100 {
		mustStatus(t, h.q("POST", "/v1/sites/web/funnels", tn.adminKey, map[string]any{"name": fmt.Sprint(i), "steps": []any{"A", "B"}}), 201, "")
	}
	mustStatus(t, h.q("POST", "/v1/sites/web/funnels", tn.adminKey, map[string]any{"name": "one more", "steps": []any{"A", "B"}}), 409, "funnel_limit_reached")
}

// TestSavedFunnelsGoWithTheirSite: deleting a site deletes its funnels,
// counted in the site.delete audit row; a site created again with the id
// has none, and another site keeps its own.
func TestSavedFunnelsGoWithTheirSite(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	mustStatus(t, h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": "keep", "name": "keep"}), 201, "")
	for _, site := range []string{"web", "keep"} {
		createGoalNamed(t, h, site, "A")
		createGoalNamed(t, h, site, "B")
		mustStatus(t, h.q("POST", "/v1/sites/"+site+"/funnels", tn.adminKey, map[string]any{"name": "AB", "steps": []any{"A", "B"}}), 201, "")
	}
	mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/sites/web", testAdminToken, nil), 204, "")
	if n := h.count(`SELECT COUNT(*) FROM funnels WHERE site_id = 'web'`); n != 0 {
		t.Errorf("got %d funnels of the deleted site, want 0", n)
	}
	if n := h.count(`SELECT COUNT(*) FROM funnels WHERE site_id = 'keep'`); n != 1 {
		t.Errorf("got %d funnels of the other site, want 1", n)
	}
	var meta string
	if err := h.sqlDB().QueryRow(`SELECT metadata FROM audit_log WHERE action = 'site.delete'`).Scan(&meta); err != nil {
		t.Fatal(err)
	}
	var m struct {
		DeletedRows map[string]int `json:"deleted_rows"`
	}
	if err := json.Unmarshal([]byte(meta), &m); err != nil || m.DeletedRows["funnels"] != 1 {
		t.Errorf("got the site.delete metadata %s, want it to count 1 funnel", meta)
	}
	mustStatus(t, h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": "web", "name": "web"}), 201, "")
	r := h.q("GET", "/v1/sites/web/funnels", testAdminToken, nil)
	mustStatus(t, r, 200, "")
	if got := strings.TrimSpace(string(r.body)); got != `{"funnels":[]}` {
		t.Errorf("got %s, want no funnels", got)
	}
}
