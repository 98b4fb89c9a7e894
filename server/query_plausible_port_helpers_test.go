package server

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"

	"github.com/tally-analytics/tally/privacy"
)

// The machinery of the port of Plausible's v2 query tests
// (query_plausible_port_test.go, docs/query-api.md#plausible-test-port):
// a Plausible fixture event (its build(:pageview, ...) or build(:event,
// ...)) becomes a POST /api/event of Plausible's tracker at the harness
// clock set to the event's timestamp, from an address standing for its
// user_id and a User-Agent that Tally's parser reads as its browser, OS
// and device; then the case's query goes to POST /api/v2/query.

// pev is one event of a Plausible fixture.
type pev struct {
	name          string // "" is a pageview
	user          int    // user_id; 0 is a visitor of its own, as the factory's random id
	at            string // timestamp "2021-01-01 00:25:00"; "" is portDefaultTime
	path          string // pathname; "" is "/"
	host          string // hostname; "" is portDefaultHost
	referrer      string
	utm           string // the landing URL's query: "utm_medium=social"
	browser       string // browser family (with browserV its version)
	browserV      string
	os            string // operating_system
	device        string // screen_size
	country       string
	region        string
	cityID        uint32   // city_geoname_id: an address the port's City database places there
	props         []string // meta.key / meta.value pairs
	revenue       []string // amount, currency
	scrollDepth   int      // of an engagement event
	engagementSet bool
}

// popt sets one attribute of a fixture event.
type popt func(*pev)

// pv is build(:pageview, ...).
func pv(opts ...popt) pev { return ce("", opts...) }

// ce is build(:event, name: name, ...).
func ce(name string, opts ...popt) pev {
	e := pev{name: name}
	for _, o := range opts {
		o(&e)
	}
	return e
}

// engagement is build(:engagement, ...): Plausible's tracker's
// engagement event, with its scroll depth.
func engagement(depth int, opts ...popt) pev {
	e := ce("engagement", opts...)
	e.scrollDepth, e.engagementSet = depth, true
	return e
}

func u(id int) popt          { return func(e *pev) { e.user = id } }
func at(ts string) popt      { return func(e *pev) { e.at = ts } }
func page(p string) popt     { return func(e *pev) { e.path = p } }
func host(h string) popt     { return func(e *pev) { e.host = h } }
func ref(r string) popt      { return func(e *pev) { e.referrer = r } }
func utm(q string) popt      { return func(e *pev) { e.utm = q } }
func browser(b string) popt  { return func(e *pev) { e.browser = b } }
func browserV(v string) popt { return func(e *pev) { e.browserV = v } }
func osys(o string) popt     { return func(e *pev) { e.os = o } }
func device(d string) popt   { return func(e *pev) { e.device = d } }
func cc(code string) popt    { return func(e *pev) { e.country = code } }

// region is subdivision1_code ("DE-BE"): a CDN's region header
// (CF-Region-Code BE) beside the country's.
func region(code string) popt { return func(e *pev) { e.region = code } }

// city is city_geoname_id: the event comes from an address that the
// port's City database (portGeo) places in that city; 0 is none.
func city(id uint32) popt { return func(e *pev) { e.cityID = id } }

// portCities are the cities of the port's City database: the GeoNames
// ids of Plausible's visit:city test, each with its country (588409 is
// Tallinn, Estonia; the other two are the test's own ids, named here
// after them).
var portCities = map[uint32]struct{ country, name string }{
	588409: {"EE", "Tallinn"},
	689123: {"UA", "City 689123"},
	10:     {"US", "City 10"},
}

// portCityAddr is the address portGeo places in the city of GeoNames id.
func portCityAddr(id uint32) string { return fmt.Sprintf("2001:db8:c1::%x:%x", id>>16, id&0xffff) }

// portGeo is the port's locator: proxy headers trusted (CF-IPCountry sets
// an event's country_code, as withProxyGeo) over a City database built
// here with mmdbwriter, which places only portCityAddr's addresses (the
// port's other addresses are nowhere in it).
func portGeo(t *testing.T) func(*Config) {
	t.Helper()
	tree, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: "GeoIP2-City", RecordSize: 24, IncludeReservedNetworks: true})
	if err != nil {
		t.Fatal(err)
	}
	for id, c := range portCities {
		_, network, err := net.ParseCIDR(portCityAddr(id) + "/128")
		if err != nil {
			t.Fatal(err)
		}
		rec := mmdbtype.Map{"country": mmdbtype.Map{"iso_code": mmdbtype.String(c.country)},
			"city": mmdbtype.Map{"geoname_id": mmdbtype.Uint32(id), "names": mmdbtype.Map{"en": mmdbtype.String(c.name)}}}
		if err := tree.Insert(network, rec); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "port-city.mmdb")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tree.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	loc, err := privacy.NewLocator(path, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { loc.Close() })
	return func(c *Config) { c.Locator = loc }
}

// props is "meta.key" and "meta.value" as pairs: props("author", "Uku").
func props(kv ...string) popt { return func(e *pev) { e.props = kv } }

// revenue is revenue_reporting_amount and _currency.
func revenue(amount, currency string) popt {
	return func(e *pev) { e.revenue = []string{amount, currency} }
}

// src is referrer_source: a referrer URL whose host is that source's.
func src(name string) popt {
	hosts := map[string]string{"Google": "https://www.google.com/", "Twitter": "https://twitter.com/",
		"Facebook": "https://www.facebook.com/", "Bing": "https://www.bing.com/"}
	r, ok := hosts[name]
	if !ok {
		panic("no referrer for source " + name)
	}
	return ref(r)
}

// The fixture's defaults: the factory's timestamp is the test's now; its
// hostname a sequence (example-N.com) that matches no case's filter.
const (
	portDefaultTime = "2021-01-20 10:00:00"
	portDefaultHost = "example-0.test"
	portQueryNow    = "2023-01-01 12:00:00"
)

// User-Agents that privacy.ParseAgent reads as the fixture's families.
const (
	portChromeWin  = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/%s.0.0.0 Safari/537.36"
	portChromeMac  = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/118.0.0.0 Safari/537.36"
	portFirefoxWin = "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:121.0) Gecko/20100101 Firefox/121.0"
	portSafariMac  = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1.15"
	portEdgeWin    = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/118.0.0.0 Safari/537.36 Edg/118.0.2088.46"
	portIEWin      = "Mozilla/5.0 (Windows NT 10.0; WOW64; Trident/7.0; rv:11.0) like Gecko"
	portMacOSOld   = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_5_8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/49.0.0.0 Safari/537.36"
)

// agent is the User-Agent of a fixture event's browser, OS and device (""
// when it names none: no User-Agent, which Tally keeps as unknown).
func (e pev) agent() string {
	switch {
	case e.device == "Mobile":
		return iphoneUA
	case e.device == "Desktop":
		return fmt.Sprintf(portChromeWin, "118")
	case e.browser == "Chrome" && e.os == "Mac":
		return portChromeMac
	case e.browser == "Chrome":
		v := e.browserV
		if v == "" {
			v = "118"
		}
		return fmt.Sprintf(portChromeWin, v)
	case e.browser == "Firefox" && e.os == "Linux":
		return firefoxLinuxUA
	case e.browser == "Firefox":
		return portFirefoxWin
	case e.browser == "Safari":
		return portSafariMac
	case e.browser == "Edge":
		return portEdgeWin
	case e.browser == "IE":
		return portIEWin
	case e.os == "Mac":
		return portSafariMac
	case e.os == "Windows":
		return fmt.Sprintf(portChromeWin, "118")
	case e.os == "Linux":
		return firefoxLinuxUA
	case e.os == "macOS 10.5":
		return portMacOSOld
	case e.browser != "" || e.os != "" || e.device != "":
		panic(fmt.Sprintf("no User-Agent for %q/%q/%q", e.browser, e.os, e.device))
	}
	return ""
}

// portTime parses a fixture timestamp (UTC).
func portTime(ts string) time.Time {
	t, err := time.Parse("2006-01-02 15:04:05", ts)
	if err != nil {
		panic(err)
	}
	return t
}

// set sets the harness clock to t.
func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// pimport is one imported report's CSV of a case: build(:imported_*).
type pimport struct {
	file, header string
	rows         []string
}

// pgoal is insert(:goal, ...): a custom event goal (event) or a
// pageview goal (page, named "Visit " + page), with Plausible's
// display_name (name), a custom property (prop: name, value) and a
// revenue goal's currency.
type pgoal struct {
	event, page, name string
	prop              []string
	currency          string
}

// portCase is one Plausible test (or one query of it).
type portCase struct {
	from  string // the Plausible test file, without _test.exs
	name  string // the Plausible test's name
	tz    string // the site's timezone
	goals []pgoal
	// segments are saved segments of the site (type site), by name; the
	// query names one as "$seg:NAME", replaced by its id.
	segments []pseg
	imports  []pimport
	events   []pev
	now      string // the query's today; "" is portQueryNow
	query    string // the body, without site_id
	status   int    // 0 is 200
	want     string // results, as Plausible answers them (JSON)
	meta     string // keys of meta, as Plausible answers them (JSON object); null values must be absent
	gap      string // why Tally answers otherwise today; the test asserts it still does
	// stableIDs sends the events of the fixture's users through Tally's
	// own envelope (POST /v1/events) with anon_id user-N, as a client that
	// keeps an id does: one user over several days is one visitor, as
	// Plausible's fixture, which sets user_id directly, has it (through
	// Plausible's tracker the cookieless id changes every day).
	stableIDs bool
	again     bool // the answer's query is posted again and must answer the same results
}

// pseg is a saved segment of a case's site: its name and segment_data.
type pseg struct{ name, data string }

// portData is what a case loads into its site: cases of the same data
// share one.
func (c portCase) portData() string {
	return fmt.Sprintf("%q %#v %#v %#v %#v %v", c.tz, c.goals, c.segments, c.imports, c.events, c.stableIDs)
}

// portRun runs c's query on site, first loading c's data into it unless
// loaded; it returns what differs from Plausible's answer ("" when
// nothing does).
func portRun(t *testing.T, h *harness, tn tenant, site string, loaded bool, c portCase) string {
	t.Helper()
	if !loaded {
		portLoad(t, h, tn, site, c)
	}
	return portQuery(t, h, tn, site, c)
}

// portLoad creates site and loads c's goals, imports and events.
func portLoad(t *testing.T, h *harness, tn tenant, site string, c portCase) {
	t.Helper()
	mustStatus(t, h.q("POST", "/v1/workspaces/"+tn.slug+"/sites", testAdminToken, map[string]any{"id": site, "name": site}), 201, "")
	if c.tz != "" {
		mustStatus(t, h.q("PATCH", "/v1/sites/"+site, testAdminToken, map[string]any{"time_zone": c.tz}), 200, "")
	}
	for _, g := range c.goals {
		body := map[string]any{"name": g.event, "event_name": g.event}
		if g.page != "" {
			body = map[string]any{"name": "Visit " + g.page, "page_path": g.page}
		}
		if g.name != "" {
			body["name"] = g.name
		}
		if g.prop != nil {
			body["property"] = map[string]string{"name": g.prop[0], "value": g.prop[1]}
		}
		if g.currency != "" {
			body["currency"] = g.currency
		}
		mustStatus(t, h.q("POST", "/v1/sites/"+site+"/goals", testAdminToken, body), 201, "")
	}
	for _, sg := range c.segments {
		body := map[string]any{"name": sg.name, "type": "site", "segment_data": json.RawMessage(sg.data)}
		mustStatus(t, h.q("POST", "/v1/sites/"+site+"/segments", testAdminToken, body), 201, "")
	}
	if len(c.imports) > 0 {
		mustStatus(t, h.q("POST", "/v1/sites/"+site+"/imports/plausible", testAdminToken, portZip(t, c.imports)), 200, "")
	}
	// A user's events share the address and the User-Agent of its first
	// event that names one, as Plausible's user_id stands for both.
	agents := map[int]string{}
	for _, e := range c.events {
		if a := e.agent(); e.user != 0 && a != "" && agents[e.user] == "" {
			agents[e.user] = a
		}
	}
	for i, e := range c.events {
		ts := e.at
		if ts == "" {
			ts = portDefaultTime
		}
		// i milliseconds keep the fixture's order among events of one second.
		h.clock.set(portTime(ts).Add(time.Duration(i) * time.Millisecond))
		ua, addr := e.agent(), fmt.Sprintf("2001:db8::2:%x", i+1)
		if e.user != 0 {
			ua, addr = agents[e.user], fmt.Sprintf("2001:db8::1:%x", e.user)
		}
		if e.cityID != 0 {
			if _, ok := portCities[e.cityID]; !ok {
				t.Fatalf("event %d: city %d is not in the port's City database", i, e.cityID)
			}
			addr = portCityAddr(e.cityID)
		}
		hst, path := e.host, e.path
		if hst == "" {
			hst = portDefaultHost
		}
		if path == "" {
			path = "/"
		}
		url := "https://" + hst + path
		if e.utm != "" {
			url += "?" + e.utm
		}
		name := e.name
		if name == "" {
			name = "pageview"
		}
		body := map[string]any{"n": name, "u": url, "d": site}
		if e.referrer != "" {
			body["r"] = e.referrer
		}
		if len(e.props) > 0 {
			p := map[string]string{}
			for j := 0; j+1 < len(e.props); j += 2 {
				p[e.props[j]] = e.props[j+1]
			}
			body["p"] = p
		}
		if e.revenue != nil {
			body["$"] = map[string]string{"amount": e.revenue[0], "currency": e.revenue[1]}
		}
		if e.engagementSet {
			body["sd"] = e.scrollDepth
		}
		if c.stableIDs && e.user != 0 {
			env := map[string]any{"id": fmt.Sprintf("00000000-0000-4000-8000-%012x", i+1), "site_id": site,
				"anon_id": fmt.Sprintf("user-%d", e.user), "type": name, "url": url,
				"ts": portTime(ts).Add(time.Duration(i) * time.Millisecond).Format("2006-01-02T15:04:05.000Z")}
			if e.referrer != "" {
				env["referrer"] = e.referrer
			}
			if e.name != "" && body["p"] != nil {
				env["properties"] = body["p"]
			}
			if r := h.c("POST", "/v1/events", site, env, "User-Agent", ua, "X-Forwarded-For", addr); r.status != 202 {
				t.Fatalf("event %d: got %d %s, want 202", i, r.status, r.body)
			}
			continue
		}
		headers := []string{"User-Agent", ua, "X-Forwarded-For", addr, "Content-Type", "text/plain"}
		if e.country != "" {
			headers = append(headers, "CF-IPCountry", e.country)
		}
		if _, sub, ok := strings.Cut(e.region, "-"); ok {
			headers = append(headers, "CF-Region-Code", sub)
		}
		if r := h.c("POST", "/api/event", "", body, headers...); r.status != 202 {
			t.Fatalf("event %d: got %d %s, want 202", i, r.status, r.body)
		}
	}
}

// portQuery sends c's query about site at the case's today.
func portQuery(t *testing.T, h *harness, tn tenant, site string, c portCase) string {
	t.Helper()
	now := c.now
	if now == "" {
		now = portQueryNow
	}
	h.clock.set(portTime(now))

	query := c.query
	if strings.Contains(query, `"$seg:`) {
		r := h.q("GET", "/v1/sites/"+site+"/segments", testAdminToken, nil)
		var l struct {
			Segments []struct {
				ID   int64
				Name string
			}
		}
		if err := json.Unmarshal(r.body, &l); err != nil {
			t.Fatalf("the site's segments: %v", err)
		}
		for _, sg := range l.Segments {
			query = strings.ReplaceAll(query, `"$seg:`+sg.Name+`"`, fmt.Sprint(sg.ID))
		}
	}
	var q map[string]any
	if err := json.Unmarshal([]byte(query), &q); err != nil {
		t.Fatalf("the case's query: %v", err)
	}
	q["site_id"] = site
	r := h.q("POST", "/api/v2/query", tn.readKey, q)
	status := c.status
	if status == 0 {
		status = 200
	}
	if r.status != status {
		return fmt.Sprintf("got %d %s, want %d", r.status, r.body, status)
	}
	var got map[string]any
	if err := json.Unmarshal(r.body, &got); err != nil {
		return fmt.Sprintf("got body %s, not JSON: %v", r.body, err)
	}
	if status != 200 {
		// Plausible's error body: {"error": "<message>"} (the text need not match).
		if msg, ok := got["error"].(string); len(got) != 1 || !ok || msg == "" {
			return fmt.Sprintf("got body %s, want {\"error\": \"<message>\"}", r.body)
		}
		return ""
	}
	var diffs []string
	if c.want != "" {
		var want any
		if err := json.Unmarshal([]byte(c.want), &want); err != nil {
			t.Fatalf("the case's want: %v", err)
		}
		if !reflect.DeepEqual(got["results"], want) {
			diffs = append(diffs, fmt.Sprintf("results: got %s, want %s", jsonText(got["results"]), jsonText(want)))
		}
	}
	if c.meta != "" {
		var want map[string]any
		if err := json.Unmarshal([]byte(c.meta), &want); err != nil {
			t.Fatalf("the case's meta: %v", err)
		}
		meta, _ := got["meta"].(map[string]any)
		for k, w := range want {
			g, ok := meta[k]
			if w == nil && ok {
				diffs = append(diffs, fmt.Sprintf("meta.%s: got %s, want none", k, jsonText(g)))
			} else if w != nil && !reflect.DeepEqual(g, w) {
				diffs = append(diffs, fmt.Sprintf("meta.%s: got %s, want %s", k, jsonText(g), jsonText(w)))
			}
		}
	}
	if c.again {
		q2, ok := got["query"].(map[string]any)
		if !ok {
			diffs = append(diffs, fmt.Sprintf("got no query object in %s", r.body))
		} else if r2 := h.q("POST", "/api/v2/query", tn.readKey, q2); r2.status != 200 {
			diffs = append(diffs, fmt.Sprintf("the answer's query posted again: got %d %s, want 200", r2.status, r2.body))
		} else if res := r2.json(t)["results"]; !reflect.DeepEqual(res, got["results"]) {
			diffs = append(diffs, fmt.Sprintf("the answer's query posted again: got %s, want %s", jsonText(res), jsonText(got["results"])))
		}
	}
	return strings.Join(diffs, "; ")
}

// jsonText is v as compact JSON.
func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// portZip is a Plausible export holding the case's imported reports.
func portZip(t *testing.T, files []pimport) string {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		w, err := zw.Create(f.file)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(w, f.header)
		for _, r := range f.rows {
			fmt.Fprintln(w, r)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}
