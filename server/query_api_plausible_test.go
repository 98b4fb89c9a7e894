package server

import (
	"fmt"
	"strings"
	"testing"
)

// TestQuerySiteNamed: POST /api/v2/query takes as site_id the site's id,
// its domain (an alias) or any other alias, in any case; an unknown site
// and a foreign tenant's are the same 404, naming the site asked for.
func TestQuerySiteNamed(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.setupTenant("acme", "web")
	b := h.setupTenant("bravo", "other")
	mustStatus(t, h.q("PATCH", "/v1/sites/web", testAdminToken, map[string]any{"aliases": list("shop.test", "www.shop.test")}), 200, "")
	mustStatus(t, h.q("PATCH", "/v1/sites/other", testAdminToken, map[string]any{"aliases": list("bravo.test")}), 200, "")
	body := func(site string) map[string]any {
		return map[string]any{"site_id": site, "metrics": list("visitors"), "date_range": "7d"}
	}
	tests := []struct {
		name, token, site string
		status            int
		msg               string
	}{
		{"id", a.readKey, "web", 200, ""},
		{"domain", a.readKey, "shop.test", 200, ""},
		{"another alias", a.readKey, "www.shop.test", 200, ""},
		{"alias in upper case", a.readKey, "Shop.Test", 200, ""},
		{"admin token, alias", testAdminToken, "bravo.test", 200, ""},
		{"unknown", a.readKey, "dummy.site", 404, `site "dummy.site" not found`},
		{"foreign alias", a.readKey, "bravo.test", 404, `site "bravo.test" not found`},
		{"foreign id", a.readKey, "other", 404, `site "other" not found`},
		{"foreign key, own alias", b.readKey, "bravo.test", 200, ""},
		{"no credential, unknown site", "", "dummy.site", 401, ""},
		{"empty", a.readKey, "", 400, "Missing site ID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.q("POST", "/api/v2/query", tt.token, body(tt.site))
			mustPlausibleStatus(t, r, tt.status, tt.msg)
			if tt.status == 200 && !strings.Contains(string(r.body), `"site_id":"`+siteIDOf(tt.site)+`"`) {
				t.Errorf("got %s, want the query's site_id to be the site's id", r.body)
			}
		})
	}
	// Tally's own route names the site in its path; the body's site_id is
	// not read (docs/query-api.md#plausible-compatibility).
	mustStatus(t, h.q("POST", "/v1/sites/web/query", a.readKey, body("dummy.site")), 200, "")
}

// siteIDOf is the site id a name of TestQuerySiteNamed stands for.
func siteIDOf(name string) string {
	switch strings.ToLower(name) {
	case "shop.test", "www.shop.test":
		return "web"
	case "bravo.test":
		return "other"
	}
	return name
}

// TestQueryPropertyNegations: contains_not and matches_not on a custom
// property pass only events that have it; is_not passes those without it
// too; case_sensitive: false is taken on is_not and contains_not (as
// Plausible's query tests have it).
func TestQueryPropertyNegations(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	props := []map[string]any{
		{"tier": "small-1", "value": "bx"},
		{"tier": "small-1", "value": "ax"},
		{"tier": "small-2", "value": "bx"},
		{"tier": "small-2", "value": "cx"},
		{"tier": "small-3"},
		{"value": "ax"},
		nil,
	}
	for i, p := range props {
		h.sendQ("web", i+1, qev{anon: fmt.Sprintf("v%d", i), typ: "pageview", url: "https://x.test/Home", ts: utc(1, 20, 10, i), props: p})
	}
	folded := map[string]any{"case_sensitive": false}
	tests := []struct {
		name    string
		dims    []string
		filters []any
		want    string
	}{
		{"contains and contains_not", nil, []any{[]any{"contains", "event:props:tier", list("small")}, []any{"contains_not", "event:props:value", list("b", "c")}}, "1"},
		{"matches_not", nil, []any{[]any{"matches_not", "event:props:value", list("^b")}}, "3"},
		{"is_not keeps events without it", nil, []any{[]any{"is_not", "event:props:value", list("bx")}}, "5"},
		{"contains_not case-insensitive", nil, []any{[]any{"contains_not", "event:props:value", list("B"), folded}}, "3"},
		{"is_not case-insensitive", nil, []any{[]any{"is_not", "event:props:tier", list("SMALL-1"), folded}}, "5"},
		{"is_not case-insensitive on a page", nil, []any{[]any{"is_not", "event:page", list("/home"), folded}}, "0"},
		{"by the property", list("event:props:value"), []any{[]any{"contains_not", "event:props:value", list("b")}}, "ax: 2; cx: 1"},
		{"not contains_not", nil, []any{[]any{"not", []any{"contains_not", "event:props:value", list("b")}}}, "4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{"/v1/sites/web/query", "/api/v2/query"} {
				r := h.q("POST", path, tn.readKey, q(list("visitors"), tt.dims, tt.filters...))
				mustStatus(t, r, 200, "")
				if got := renderRows(t, r.body); got != tt.want {
					t.Errorf("%s: got %s, want %s", path, got, tt.want)
				}
			}
		})
	}
	// matches stays case-sensitive only: (?i) says otherwise.
	r := h.q("POST", "/api/v2/query", tn.readKey, q(list("visitors"), nil, []any{"matches_not", "event:props:value", list("^B"), folded}))
	mustPlausibleStatus(t, r, 400, "(?i)")
}
