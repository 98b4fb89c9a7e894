package server

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// PATCH /sites/:siteId sets retention_days (null, 0 or days) and the name,
// answers the site, refuses bad values with a 400 and changes nothing
// then, and audits each change as site.update with the previous value.
func TestPatchSiteRetention(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	other := h.setupTenant("other", "elsewhere")
	tests := []struct {
		name   string
		token  string
		body   any
		status int
		code   string
		want   string // retention_days in the answer, as JSON
	}{
		{"days", testAdminToken, `{"retention_days":30}`, 200, "", "30"},
		{"same again", testAdminToken, `{"retention_days":30}`, 200, "", "30"},
		{"keep everything", tn.adminKey, `{"retention_days":0}`, 200, "", "0"},
		{"follow the server", testAdminToken, `{"retention_days":null}`, 200, "", "null"},
		{"name only", testAdminToken, `{"name":"Web site"}`, 200, "", "null"},
		{"negative", testAdminToken, `{"retention_days":-1}`, 400, "invalid_retention_days", ""},
		{"fraction", testAdminToken, `{"retention_days":1.5}`, 400, "invalid_retention_days", ""},
		{"string", testAdminToken, `{"retention_days":"30"}`, 400, "invalid_retention_days", ""},
		{"boolean", testAdminToken, `{"retention_days":true}`, 400, "invalid_retention_days", ""},
		{"past a century", testAdminToken, `{"retention_days":36501}`, 400, "invalid_retention_days", ""},
		{"huge", testAdminToken, `{"retention_days":1e400}`, 400, "invalid_retention_days", ""},
		{"empty name", testAdminToken, `{"name":" ","retention_days":5}`, 400, "invalid_name", ""},
		{"not an object", testAdminToken, `[1]`, 400, "invalid_json", ""},
		{"read key", tn.readKey, `{"retention_days":1}`, 403, "forbidden", ""},
		{"foreign admin key", other.adminKey, `{"retention_days":1}`, 404, "not_found", ""},
		{"no credential", "", `{"retention_days":1}`, 401, "unauthorized", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.q("PATCH", "/v1/sites/web", tt.token, tt.body)
			mustStatus(t, r, tt.status, tt.code)
			if tt.status != 200 {
				return
			}
			var site map[string]json.RawMessage
			json.Unmarshal(r.body, &site)
			if got := string(site["retention_days"]); got != tt.want {
				t.Errorf("got retention_days %s, want %s", got, tt.want)
			}
		})
	}
	var list struct{ Sites []map[string]any }
	json.Unmarshal(h.q("GET", "/v1/workspaces/acme/sites", testAdminToken, nil).body, &list)
	if len(list.Sites) != 1 || list.Sites[0]["name"] != "Web site" || list.Sites[0]["retention_days"] != nil {
		t.Errorf("got sites %v, want web named \"Web site\" with retention_days null", list.Sites)
	}
	var entries []string
	for _, e := range h.q("GET", "/v1/workspaces/acme/audit", testAdminToken, nil).json(t)["entries"].([]any) {
		e := e.(map[string]any)
		if e["action"] == "site.update" {
			meta, _ := json.Marshal(e["metadata"])
			entries = append(entries, string(meta))
		}
	}
	want := []string{ // newest first; "same again" changed nothing
		`{"name":"Web site","previous_name":"web"}`,
		`{"previous_retention_days":0,"retention_days":null}`,
		`{"previous_retention_days":30,"retention_days":0}`,
		`{"previous_retention_days":null,"retention_days":30}`,
	}
	if fmt.Sprint(entries) != fmt.Sprint(want) {
		t.Errorf("got site.update audit rows %v, want %v", entries, want)
	}
}

// A purge removes raw rows older than the site's retention (its own or
// RETENTION_DAYS) and keeps the rollups: the counts read the same, the
// timeline loses the old events and says from which day it is whole, the
// site says so too, and the inspection feed forgets the old decisions.
func TestPurgeKeepsCountsAndTellsPurgedDays(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.RetentionDays = 10; c.DebugFeedSize = 100 })
	tn := h.setupTenant("acme", "web")
	h.setupTenant("other", "forever")
	mustStatus(t, h.q("PATCH", "/v1/sites/forever", testAdminToken, `{"retention_days":0}`), 200, "")
	// Two visitors of u1 and one stranger, on days 1 to 20 of January,
	// each arriving on its day.
	h.clock.Advance(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC).Sub(h.clock.Now()))
	n := 0
	for d := 1; d <= 20; d++ {
		for _, site := range []string{"web", "forever"} {
			n++
			h.sendAt(site, n, "phone", "pageview", day(d, 10, 0), map[string]any{"user_id": "u1", "url": "https://a.test/x"})
			n++
			h.sendAt(site, n, "stranger", "click", day(d, 11, 0), nil)
		}
		h.clock.Advance(24 * time.Hour)
	}
	h.clock.Advance(time.Date(2026, 1, 20, 15, 0, 0, 0, time.UTC).Sub(h.clock.Now()))
	reads := func(site string) string {
		var out string
		for _, path := range []string{"pageviews", "events", "sessions", "breakdown?dimension=url&"} {
			sep := "?"
			if path[len(path)-1] == '&' {
				sep = ""
			}
			r := h.q("GET", "/v1/sites/"+site+"/"+path+sep+"from=2026-01-01&to=2026-01-31", testAdminToken, nil)
			mustStatus(t, r, 200, "")
			out += string(r.body)
		}
		return out
	}
	before := map[string]string{"web": reads("web"), "forever": reads("forever")}

	if err := h.srv.purge(context.Background()); err != nil {
		t.Fatal(err)
	}
	for site, want := range before {
		if got := reads(site); got != want {
			t.Errorf("got reads of %s %s after the purge, want them unchanged: %s", site, got, want)
		}
	}
	timeline := func(site string) (days []string, purgedBefore *string) {
		var body struct {
			Events       []struct{ TS string }
			PurgedBefore *string `json:"purged_before"`
		}
		r := h.q("GET", "/v1/sites/"+site+"/users/u1/timeline?limit=1000", tn.readKey, nil)
		if site == "forever" {
			r = h.q("GET", "/v1/sites/"+site+"/users/u1/timeline?limit=1000", testAdminToken, nil)
		}
		mustStatus(t, r, 200, "")
		json.Unmarshal(r.body, &body)
		for _, e := range body.Events {
			days = append(days, e.TS[:10])
		}
		return days, body.PurgedBefore
	}
	days, cut := timeline("web")
	if cut == nil || *cut != "2026-01-11" {
		t.Errorf("got purged_before %v in the timeline, want 2026-01-11", cut)
	}
	if len(days) != 10 || days[len(days)-1] != "2026-01-11" {
		t.Errorf("got timeline days %v, want 2026-01-20 down to 2026-01-11", days)
	}
	if days, cut := timeline("forever"); cut != nil || len(days) != 20 {
		t.Errorf("got %d days and purged_before %v for the site keeping everything, want 20 and null", len(days), cut)
	}
	site := h.q("GET", "/v1/workspaces/acme/sites", testAdminToken, nil).json(t)["sites"].([]any)[0].(map[string]any)
	if site["purged_before"] != "2026-01-11" {
		t.Errorf("got the site's purged_before %v, want 2026-01-11", site["purged_before"])
	}
	var oldDecisions, kept int
	for _, d := range h.srv.feed.list(DebugFilter{}) {
		switch {
		case d.SiteID == "web" && d.Time < "2026-01-11":
			oldDecisions++
		case d.SiteID == "forever":
			kept++
		}
	}
	if oldDecisions != 0 || kept != 40 {
		t.Errorf("got %d decisions of web before the cut and %d of forever, want 0 and 40", oldDecisions, kept)
	}
	if n := h.count(`SELECT COUNT(*) FROM events WHERE site_id = 'web' AND ts < '2026-01-11'`); n != 0 {
		t.Errorf("got %d events of web before the cut, want none", n)
	}
}

// The server's loop runs a purge as soon as it starts when today's has not
// run (a server down at midnight), and another when a site's retention
// changes, without waiting for the next day.
func TestRetentionLoopPurgesAtStartAndOnChange(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.RetentionDays = 10 })
	h.setupTenant("acme", "web")
	h.setupTenant("other", "later")
	mustStatus(t, h.q("PATCH", "/v1/sites/later", testAdminToken, `{"retention_days":0}`), 200, "")
	for d := 1; d <= 20; d++ {
		h.sendAt("web", d, "v", "pageview", day(d, 10, 0), nil)
		h.sendAt("later", 100+d, "v", "pageview", day(d, 10, 0), nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.srv.retentionLoop(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	// The harness clock says 2026-01-31: ten days kept are the 22nd on.
	eventually(t, "web's old events purged at start", func() bool {
		return h.count(`SELECT COUNT(*) FROM events WHERE site_id = 'web'`) == 0
	})
	if n := h.count(`SELECT COUNT(*) FROM events WHERE site_id = 'later'`); n != 20 {
		t.Fatalf("got %d events of the site keeping everything, want 20", n)
	}
	mustStatus(t, h.q("PATCH", "/v1/sites/later", testAdminToken, `{"retention_days":20}`), 200, "")
	eventually(t, "later's events before the 12th purged after the change", func() bool {
		return h.count(`SELECT COUNT(*) FROM events WHERE site_id = 'later'`) == 9
	})
}
