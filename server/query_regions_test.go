package server

import (
	"testing"
	"time"

	"github.com/tally-analytics/tally/privacy"
)

// newRegionHarness loads visitors located by a City database (the test
// database, testdata/geoip-test.mmdb) through the browser intake:
//
//	b1, b2: 203.0.113.x, DE-BE Berlin (GeoNames 2950159)
//	p:      198.51.100.x, FR-IDF Paris (2988507)
//	u:      192.0.2.x, US without region or city
//	g:      203.0.113.x with a CDN's GB: no region, no city
//	n:      8.8.8.8, nowhere (not in the test database)
//	c:      8.8.8.8 with a CDN's US and region CA: US-CA, no city
func newRegionHarness(t *testing.T) (*harness, tenant) {
	t.Helper()
	loc, err := privacy.NewLocator("../testdata/geoip-test.mmdb", true)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *Config) { c.Locator = loc })
	tn := h.setupTenant("acme", "web")
	for i, v := range []struct{ anon, addr, country, region string }{
		{"b1", "203.0.113.1", "", ""}, {"b2", "203.0.113.2", "", ""}, {"p", "198.51.100.7", "", ""},
		{"u", "192.0.2.1", "", ""}, {"g", "203.0.113.3", "GB", ""}, {"n", "8.8.8.8", "", ""},
		{"c", "8.8.8.8", "US", "CA"},
	} {
		fields := map[string]any{"anon_id": v.anon, "ts": utc(1, 10, 10, i).Format(time.RFC3339)}
		headers := []string{"X-Forwarded-For", v.addr}
		if v.country != "" {
			headers = append(headers, "CF-IPCountry", v.country)
		}
		if v.region != "" {
			headers = append(headers, "CF-Region-Code", v.region)
		}
		intake(t, h.c("POST", "/v1/events", "web", ev("web", i+1, fields), headers...))
	}
	return h, tn
}

// TestQueryRegionsAndCities: visit:region (ISO 3166-2), visit:region_name
// (its name), visit:city (GeoNames id) and visit:city_name as Plausible
// defines them, as dimensions and in filters, on both query routes
// (docs/query-api.md#locations).
func TestQueryRegionsAndCities(t *testing.T) {
	t.Parallel()
	h, tn := newRegionHarness(t)
	tests := []struct {
		name string
		body map[string]any
		want string
	}{
		{"region", q(list("visitors"), list("visit:region")), "(not set): 3; DE-BE: 2; FR-IDF: 1; US-CA: 1"},
		{"region name", q(list("visitors"), list("visit:region_name")), "(not set): 3; Berlin: 2; California: 1; Île-de-France: 1"},
		{"region with its country", q(list("visitors"), list("visit:country", "visit:region_name")),
			"DE Berlin: 2; (not set) (not set): 1; FR Île-de-France: 1; GB (not set): 1; US (not set): 1; US California: 1"},
		{"city", q(list("visitors"), list("visit:city")), "(not set): 4; 2950159: 2; 2988507: 1"},
		{"city name", q(list("visitors"), list("visit:city_name")), "(not set): 4; Berlin: 2; Paris: 1"},
		{"city with its name", q(list("visitors"), list("visit:city", "visit:city_name")), "(not set) (not set): 4; 2950159 Berlin: 2; 2988507 Paris: 1"},
		{"is on region", q(list("visitors"), nil, []any{"is", "visit:region", list("DE-BE")}), "2"},
		{"is on region name", q(list("visitors"), nil, []any{"is", "visit:region_name", list("Île-de-France", "Berlin")}), "3"},
		{"region name, case-insensitive", q(list("visitors"), nil, []any{"contains", "visit:region_name", list("île"), map[string]any{"case_sensitive": false}}), "1"},
		{"is_not on region name", q(list("visitors"), nil, []any{"is_not", "visit:region_name", list("Berlin")}), "5"},
		{"region name matches", q(list("visitors"), nil, []any{"matches", "visit:region_name", list("^Ber")}), "2"},
		{"a code is not a region name", q(list("visitors"), nil, []any{"is", "visit:region_name", list("DE-BE")}), "0"},
		{"a region from a CDN's header", q(list("visitors"), nil, []any{"is", "visit:region_name", list("California")}), "1"},
		{"is on city id", q(list("visitors"), nil, []any{"is", "visit:city", list("2988507")}), "1"},
		{"is on city name", q(list("visitors"), nil, []any{"is", "visit:city_name", list("Berlin")}), "2"},
		{"contains on city name", q(list("visitors"), nil, []any{"contains", "visit:city_name", list("ari")}), "1"},
		{"region name by city", q(list("visitors"), list("visit:city_name"), []any{"is", "visit:region_name", list("Berlin")}), "Berlin: 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{"/v1/sites/web/query", "/api/v2/query"} {
				r := h.q("POST", path, tn.readKey, tt.body)
				mustStatus(t, r, 200, "")
				if got := renderRows(t, r.body); got != tt.want {
					t.Errorf("%s: got  %s\nwant %s", path, got, tt.want)
				}
			}
		})
	}
}
