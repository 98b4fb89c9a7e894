package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/tally-analytics/tally/schema"
)

// FuzzTrackerIntake posts arbitrary bodies to Plausible's and Umami's
// intake of the real collector: every answer is a 2xx or a 4xx, never a
// 5xx or a panic.
func FuzzTrackerIntake(f *testing.F) {
	for _, seed := range []string{
		`{"n":"pageview","u":"https://web/?utm_source=x","d":"web","r":null,"p":{"a":1},"$":{"amount":"1.5","currency":"usd"},"i":false,"h":1,"v":36}`,
		`{"n":"engagement","sd":10,"e":100,"d":"web","u":"https://web/"}`,
		`{"name":123,"url":"%zz","domain":"web,,web"}`,
		`{"type":"event","payload":{"website":"web","hostname":"web","url":"/a?b#c","referrer":"x:y","name":"n","data":{"a":[1]},"ip":"::1"}}`,
		`{"type":"IDENTIFY","payload":{"website":"web","data":{}}}`,
		`[1]`, `{`, ``, `null`, `{"type":"event","payload":null}`,
	} {
		f.Add([]byte(seed))
	}
	hostileSeeds(f,
		`{"n":V,"u":"https://web/a","d":"web","r":V,"p":{"a":V,K:1},"$":{"amount":V,"currency":V}}`,
		`{"n":"pageview","u":V,"d":V}`,
		`{"type":"event","payload":{"website":"web","hostname":"web","url":V,"referrer":V,"name":V,"title":V,"language":V,"screen":V,"data":{"a":V,K:1}}}`,
		`{"type":"identify","payload":{"website":V,"data":{K:V}}}`)
	h := fuzzCollector(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range []string{"/api/event", "/api/send"} {
			req := httptest.NewRequest("POST", path, bytes.NewReader(body))
			req.Header.Set("User-Agent", chromeUA)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code >= 500 || rec.Code < 200 || (rec.Code >= 300 && rec.Code < 400) {
				t.Fatalf("%s: got %d %s for body %q", path, rec.Code, rec.Body, body)
			}
		}
	})
}

// TestTrackerDomainList: of a comma-separated domain, the first name that
// names a site gets the event, once.
func TestTrackerDomainList(t *testing.T) {
	t.Parallel()
	h := trackerHarness(t)
	mustStatusText(t, h.c("POST", "/api/event", "", `{"n":"pageview","u":"https://example.com/","d":"nobody.org, shop ,example.com"}`, "User-Agent", chromeUA), 202)
	if web, shop := h.count(`SELECT COUNT(*) FROM events WHERE site_id = 'web'`), h.count(`SELECT COUNT(*) FROM events WHERE site_id = 'shop'`); web != 0 || shop != 1 {
		t.Fatalf("got %d events of web and %d of shop, want 0 and 1", web, shop)
	}
	// Without a domain, the url's host names the site; aliases are
	// compared without regard to case.
	mustStatusText(t, h.c("POST", "/api/event", "", `{"n":"pageview","u":"https://www.example.com/"}`, "User-Agent", chromeUA), 202)
	mustStatusText(t, h.c("POST", "/api/send", "", `{"type":"EVENT","payload":{"website":"`+strings.ToUpper(umamiWebsite)+`"}}`, "User-Agent", chromeUA), 200)
	if n := h.count(`SELECT COUNT(*) FROM events WHERE site_id = 'web'`); n != 2 {
		t.Fatalf("domain from the url, upper-case website: got %d events of web, want 2", n)
	}
	// No site can be created later with an alias's name (any case), so
	// the alias keeps its traffic.
	mustStatus(t, h.q("PATCH", "/v1/sites/web", testAdminToken, map[string]any{"aliases": []string{"example.com", umamiWebsite, "later"}}), 200, "")
	mustStatus(t, h.q("POST", "/v1/workspaces/other/sites", testAdminToken, map[string]any{"id": "Later", "name": "Later"}), 409, "site_id_taken")
	mustStatusText(t, h.c("POST", "/api/event", "", `{"n":"pageview","u":"https://x.test/","d":"later"}`, "User-Agent", chromeUA), 202)
	if web := h.count(`SELECT COUNT(*) FROM events WHERE site_id = 'web'`); web != 3 {
		t.Fatalf("an alias no site may take: got %d events of web, want 3", web)
	}
}

// TestPlausibleLimits: at most 30 props are kept, a referrer is cut at
// 2,000 bytes, as Plausible does.
func TestPlausibleLimits(t *testing.T) {
	t.Parallel()
	h := trackerHarness(t)
	props := map[string]any{}
	for i := range 40 {
		props["k"+strconv.Itoa(i)] = i
	}
	body := map[string]any{"n": "x", "u": "https://example.com/", "d": "example.com", "r": "https://news.test/" + strings.Repeat("r", 3000), "p": props}
	mustStatusText(t, h.c("POST", "/api/event", "", body, "User-Agent", chromeUA), 202)
	rows := h.trackerRows("web")
	if len(rows) != 1 || len(rows[0].ref) != 2000 {
		t.Fatalf("got %d rows, referrer of %d bytes, want 1 and 2000", len(rows), len(rows[0].ref))
	}
	var raw struct {
		Properties map[string]any `json:"properties"`
	}
	json.Unmarshal([]byte(rows[0].raw), &raw)
	if len(raw.Properties) != 30 {
		t.Fatalf("got %d properties, want 30", len(raw.Properties))
	}
}

// TestTrackerQuotaAndPlan: the quota and the tracking plan apply; a
// quarantined event is kept as Tally's own envelope, and its replay
// through /events stores it.
func TestTrackerQuotaAndPlan(t *testing.T) {
	t.Parallel()
	h := trackerHarness(t, func(c *Config) { c.Quota = 1 })
	mustStatusText(t, h.c("POST", "/api/send", "", `{"type":"event","payload":{"website":"web","url":"/"}}`, "User-Agent", chromeUA), 200)
	r := h.c("POST", "/api/event", "", `{"n":"pageview","u":"https://example.com/","d":"example.com"}`, "User-Agent", chromeUA)
	mustStatus(t, r, 429, "quota_exceeded")

	plan, err := schema.ParsePlan([]byte(`{"mode":"quarantine","events":{"Purchase":{"type":"object","required":["properties"],
		"properties":{"properties":{"type":"object","required":["order"]}}},"*":{"type":"object"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	h = trackerHarness(t, func(c *Config) { c.Plan = plan })
	mustStatusText(t, h.c("POST", "/api/event", "", `{"n":"Purchase","u":"https://example.com/buy","d":"example.com","p":{"plan":"pro"}}`, "User-Agent", chromeUA), 202)
	var id, payload, endpoint string
	if err := h.sqlDB().QueryRow(`SELECT id, payload, endpoint FROM dlq WHERE site_id = 'web'`).Scan(&id, &payload, &endpoint); err != nil {
		t.Fatalf("dlq row: %v", err)
	}
	if endpoint != "plausible" || !strings.Contains(payload, `"anon_id":"c_`) || !strings.Contains(payload, `"type":"Purchase"`) || !strings.Contains(payload, `"consent":"denied"`) {
		t.Fatalf("dlq row: got endpoint %q payload %s, want plausible and Tally's envelope of the cookieless event", endpoint, payload)
	}
	// Fix the plan, then replay.
	fixed, _ := schema.ParsePlan([]byte(`{"mode":"quarantine","events":{"*":{"type":"object"}}}`))
	h.srv.plan.Store(fixed)
	r = h.q("POST", "/v1/sites/web/dlq/"+id+"/replay", testAdminToken, nil)
	if r.status != http.StatusOK {
		t.Fatalf("replay: got %d %s, want 200", r.status, r.body)
	}
	if n := h.count(`SELECT COUNT(*) FROM events WHERE site_id = 'web' AND type = 'Purchase' AND anon_id LIKE 'c\_%' ESCAPE '\'`); n != 1 {
		t.Fatalf("after replay: got %d Purchase events, want 1", n)
	}
}
