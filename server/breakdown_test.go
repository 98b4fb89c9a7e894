package server

import (
	"fmt"
	"testing"

	"github.com/tally-analytics/tally/privacy"
)

func TestBreakdown(t *testing.T) {
	t.Parallel()
	loc, err := privacy.NewLocator("../testdata/geoip-test.mmdb", false)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *Config) { c.Locator = loc })
	tn := h.setupTenant("acme", "web")
	iphone := "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1"
	send := func(n int, anon, url, ref, ua string, typ string) {
		fields := map[string]any{"anon_id": anon, "type": typ, "url": url, "ts": day(2, 10, n).Format("2006-01-02T15:04:05Z")}
		if ref != "" {
			fields["referrer"] = ref
		}
		intake(t, h.c("POST", "/v1/events", "web", ev("web", n, fields), "User-Agent", ua))
	}
	send(1, "a", "https://shop.test/pricing?utm=x", "https://www.news.test/item?id=1", chromeUA, "pageview")
	send(2, "b", "https://shop.test/pricing#plans", "https://news.test/", iphone, "pageview")
	send(3, "c", "https://shop.test/", "", iphone, "pageview")
	send(4, "c", "https://shop.test/", "", chromeUA, "click") // not a pageview: not counted
	q := "&from=2026-01-01&to=2026-01-31"
	get := func(dim string) string {
		t.Helper()
		r := h.q("GET", "/v1/sites/web/breakdown?dimension="+dim+q, tn.readKey, nil)
		mustStatus(t, r, 200, "")
		body := r.json(t)
		if body["dimension"] != dim {
			t.Fatalf("got dimension %v", body["dimension"])
		}
		return fmt.Sprint(body["rows"])
	}
	want := map[string]string{
		"url":         "[map[count:2 value:https://shop.test/pricing] map[count:1 value:https://shop.test/]]",
		"referrer":    "[map[count:2 value:news.test] map[count:1 value:<nil>]]",
		"country":     "[map[count:3 value:NL]]",
		"browser":     "[map[count:2 value:Mobile Safari] map[count:1 value:Chrome]]",
		"os":          "[map[count:2 value:iOS] map[count:1 value:Windows]]",
		"device_type": "[map[count:2 value:mobile] map[count:1 value:desktop]]",
	}
	for dim, w := range want {
		if got := get(dim); got != w {
			t.Errorf("%s: got %s, want %s", dim, got, w)
		}
	}
	r := h.q("GET", "/v1/sites/web/breakdown?dimension=url&limit=1"+q, tn.readKey, nil)
	if got := fmt.Sprint(r.json(t)["rows"]); got != "[map[count:2 value:https://shop.test/pricing]]" {
		t.Errorf("limit 1: got %s", got)
	}
	mustStatus(t, h.q("GET", "/v1/sites/web/breakdown?dimension=color"+q, tn.readKey, nil), 400, "invalid_dimension")
	mustStatus(t, h.q("GET", "/v1/sites/web/breakdown?"+q[1:], tn.readKey, nil), 400, "invalid_dimension")
	mustStatus(t, h.q("GET", "/v1/sites/web/breakdown?dimension=url", tn.readKey, nil), 400, "invalid_date_param")
	mustStatus(t, h.q("GET", "/v1/sites/web/breakdown?dimension=url"+q, tn.ingestKey, nil), 403, "forbidden")
	mustStatus(t, h.q("GET", "/sites/web/breakdown?dimension=url"+q, tn.readKey, nil), 404, "not_found") // v1 only
	// Erasure takes the subject's pageviews out of the breakdown too.
	mustStatus(t, gdpr(h, "delete", testAdminToken, map[string]any{"subject": map[string]any{"anon_id": "b"}}), 200, "")
	if got := get("browser"); got != "[map[count:1 value:Chrome] map[count:1 value:Mobile Safari]]" {
		t.Errorf("after erasure: got %s", got)
	}
}
