package server

import (
	"encoding/json"
	"testing"
)

// TestQueryCountryName: visit:country_name answers the English name of
// the stored code and filters by names, on both query routes, as the
// same query on visit:country does by codes (docs/query-api.md#locations).
// queryDataSet's visitors: a and d in DE, b in US, e in FR, c nowhere.
func TestQueryCountryName(t *testing.T) {
	t.Parallel()
	h, tn := newQueryHarness(t)
	byName := func(f ...any) map[string]any { return q(list("visitors"), nil, f...) }
	tests := []struct {
		name string
		body map[string]any
		// same is the query on visit:country that must answer alike
		// (nil: none).
		same map[string]any
		want string
	}{
		{"dimension", q(list("visitors", "visits"), list("visit:country_name")), nil,
			"Germany: 2 3; (not set): 1 1; France: 1 1; United States: 1 1"},
		{"with the code", q(list("visitors"), list("visit:country", "visit:country_name")), nil,
			"DE Germany: 2; (not set) (not set): 1; FR France: 1; US United States: 1"},
		{"ordered by name", mergeBody(q(list("visitors"), list("visit:country_name")), "order_by", [][]string{{"visit:country_name", "desc"}}), nil,
			"United States: 1; Germany: 2; France: 1; (not set): 1"},
		{"is", byName([]any{"is", "visit:country_name", list("Germany")}), byName([]any{"is", "visit:country", list("DE")}), "2"},
		{"is of two", byName([]any{"is", "visit:country_name", list("Germany", "France")}), byName([]any{"is", "visit:country", list("DE", "FR")}), "3"},
		{"is_not", byName([]any{"is_not", "visit:country_name", list("Germany")}), byName([]any{"is_not", "visit:country", list("DE")}), ""},
		{"is is case-sensitive", byName([]any{"is", "visit:country_name", list("germany")}), nil, "0"},
		{"is, case-insensitive", byName([]any{"is", "visit:country_name", list("germany"), map[string]any{"case_sensitive": false}}), nil, "2"},
		{"a code is not a name", byName([]any{"is", "visit:country_name", list("DE")}), nil, "0"},
		{"an unknown name", byName([]any{"is", "visit:country_name", list("Atlantis")}), nil, "0"},
		{"no values", byName([]any{"is", "visit:country_name", []string{}}), nil, "0"},
		{"(not set), as answered", byName([]any{"is", "visit:country_name", list("(not set)")}), nil, "1"},
		{"contains", byName([]any{"contains", "visit:country_name", list("United")}), byName([]any{"is", "visit:country", list("US")}), "1"},
		{"contains, case-insensitive", byName([]any{"contains", "visit:country_name", list("many"), map[string]any{"case_sensitive": false}}), nil, "2"},
		{"contains_not", byName([]any{"contains_not", "visit:country_name", list("United")}), byName([]any{"is_not", "visit:country", list("US")}), ""},
		{"matches", byName([]any{"matches", "visit:country_name", list("^(France|Germany)$")}), nil, "3"},
		{"matches_not", byName([]any{"matches_not", "visit:country_name", list("^G")}), byName([]any{"is_not", "visit:country", list("DE", "GB", "GR", "GH", "GE")}), ""},
		{"not of is", byName([]any{"not", []any{"is", "visit:country_name", list("Germany")}}), byName([]any{"not", []any{"is", "visit:country", list("DE")}}), ""},
		{"and a dimension", q(list("visitors"), list("visit:country_name"), []any{"is_not", "visit:country_name", list("United States")}), nil,
			"Germany: 2; (not set): 1; France: 1"},
		{"compared with the previous period", mergeBody(q(list("visitors"), list("visit:country_name"), []any{"is", "visit:country_name", list("Germany")}),
			"include", map[string]any{"comparisons": map[string]any{"mode": "previous_period"}}), nil,
			"Germany: 2 vs Germany: 1 (100)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{"/v1/sites/web/query", "/api/v2/query"} {
				r := h.q("POST", path, tn.readKey, tt.body)
				mustStatus(t, r, 200, "")
				got := renderRows(t, r.body)
				want := tt.want
				if tt.same != nil {
					same := queryRows(t, h, tn.readKey, "web", tt.same)
					if want != "" && same != want {
						t.Fatalf("%s: the visit:country query: got %s, want %s", path, same, want)
					}
					want = same
				}
				if got != want {
					t.Errorf("%s: got  %s\nwant %s", path, got, want)
				}
			}
		})
	}
}

// TestQueryCountryNameEcho: the answer's query echoes the names as asked,
// not the codes they were turned into.
func TestQueryCountryNameEcho(t *testing.T) {
	t.Parallel()
	h, tn := newQueryHarness(t)
	r := h.q("POST", "/api/v2/query", tn.readKey, q(list("visitors"), list("visit:country_name"), []any{"contains", "visit:country_name", list("Ger")}))
	mustStatus(t, r, 200, "")
	var a struct {
		Query struct {
			Dimensions []string `json:"dimensions"`
			Filters    any      `json:"filters"`
		} `json:"query"`
	}
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatal(err)
	}
	filters, _ := json.Marshal(a.Query.Filters)
	if got, want := string(filters), `[["contains","visit:country_name",["Ger"]]]`; got != want {
		t.Errorf("filters: got %s, want %s", got, want)
	}
	if got, want := a.Query.Dimensions, list("visit:country_name"); len(got) != 1 || got[0] != want[0] {
		t.Errorf("dimensions: got %v, want %v", got, want)
	}
}

// TestQueryLocationRefusals: bad filters on names are 400s.
func TestQueryLocationRefusals(t *testing.T) {
	t.Parallel()
	h, tn := newQueryHarness(t)
	tests := []struct {
		name string
		body map[string]any
		code string
	}{
		{"values not strings", q(list("visitors"), nil, []any{"is", "visit:country_name", []any{1}}), "invalid_query"},
		{"bad pattern", q(list("visitors"), nil, []any{"matches", "visit:country_name", list("(")}), "invalid_query"},
		{"region name values not strings", q(list("visitors"), nil, []any{"is", "visit:region_name", []any{true}}), "invalid_query"},
		{"bad pattern on region name", q(list("visitors"), nil, []any{"matches_not", "visit:region_name", list("[")}), "invalid_query"},
		{"case_sensitive on matches of a region name", q(list("visitors"), nil, []any{"matches", "visit:region_name", list("x"), map[string]any{"case_sensitive": false}}), "invalid_query"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mustStatus(t, h.q("POST", "/v1/sites/web/query", tn.readKey, tt.body), 400, tt.code)
		})
	}
}

// mergeBody sets key to v in body.
func mergeBody(body map[string]any, key string, v any) map[string]any {
	body[key] = v
	return body
}
