package servertest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tally-analytics/tally/server/servertest"
)

func id(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }

func event(site string, n int, extra map[string]any) map[string]any {
	e := map[string]any{"id": id(n), "site_id": site, "anon_id": "a", "type": "pageview"}
	for k, v := range extra {
		e[k] = v
	}
	return e
}

func TestParallelInstancesAreIsolated(t *testing.T) {
	for i := range 4 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			srv := servertest.New(t)
			var batch []any
			for n := range i + 1 {
				batch = append(batch, event(srv.SiteID, n, nil))
			}
			a, err := srv.Send(batch...)
			if err != nil {
				t.Fatal(err)
			}
			if a.Accepted != i+1 {
				t.Fatalf("got %+v, want %d accepted", a, i+1)
			}
			events, err := srv.Events()
			if err != nil {
				t.Fatal(err)
			}
			if len(events) != i+1 {
				t.Fatalf("got %d events, want %d: instances share data", len(events), i+1)
			}
			if d := srv.Decisions(servertest.Filter{}); len(d) != i+1 {
				t.Fatalf("got %d decisions, want %d", len(d), i+1)
			}
		})
	}
}

func TestDecisionsExplainWhatHappened(t *testing.T) {
	t.Parallel()
	srv := servertest.New(t, servertest.WithPlan(`{"mode":"quarantine","events":{"purchase":{"type":"object","required":["properties"]},"*":{"type":"object"}}}`))
	post := func(body string, headers ...string) int {
		req, _ := http.NewRequest("POST", srv.CollectorURL+"/v1/events", stringsReader(body))
		req.Header.Set("Authorization", "Bearer "+srv.SiteID)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	ev := func(n int, extra map[string]any) string {
		b, _ := json.Marshal(event(srv.SiteID, n, extra))
		return string(b)
	}
	post(ev(1, nil))
	post(ev(1, nil))                                                          // duplicate
	post(ev(2, nil), "User-Agent", "Mozilla/5.0 (compatible; Googlebot/2.1)") // bot, kept (BOT_FILTER=off)
	post(ev(3, map[string]any{"type": "purchase"}))                           // quarantined
	post(`[` + ev(4, nil) + `,{"id":"nope"}]`)                                // rejected batch
	post(ev(5, map[string]any{"consent": "denied", "url": "https://x.test/?a=1"}), "User-Agent",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1")

	all := srv.Decisions(servertest.Filter{})
	var got []string
	for i := len(all) - 1; i >= 0; i-- {
		got = append(got, all[i].Outcome+"/"+all[i].Reason)
	}
	// A batch refused for a broken envelope is one decision: its events were never read.
	want := "[accepted/accepted duplicate/ accepted/accepted quarantined/schema_invalid rejected/invalid_event accepted/accepted_consent]"
	if fmt.Sprint(got) != want {
		t.Fatalf("got %v, want %v", got, want)
	}
	if b := all[len(all)-3]; !b.Bot || all[len(all)-1].Bot {
		t.Fatalf("got bot marks %v (the bot's) and %v (the first event's), want true and false", b.Bot, all[len(all)-1].Bot)
	}
	q := srv.Decisions(servertest.Filter{Outcome: "quarantined"})
	if len(q) != 1 || q[0].EventID != id(3) || len(q[0].Details) != 1 || q[0].Details[0].Path != "/properties" {
		t.Fatalf("quarantined: got %+v", q)
	}
	rejected := srv.Decisions(servertest.Filter{Outcome: "rejected"})
	if len(rejected) != 1 || rejected[0].Status != 400 || len(rejected[0].Details) == 0 || rejected[0].Details[0].Path != "/1/id" {
		t.Fatalf("rejected: got %+v", rejected)
	}
	consent := srv.Decisions(servertest.Filter{Type: "pageview", Outcome: "accepted"})[0]
	if e := consent.Enrichment; e == nil || !e.Cookieless || e.Browser != "Mobile Safari" || e.DeviceType != "mobile" || e.AnonID == "a" {
		t.Fatalf("enrichment: got %+v", consent.Enrichment)
	}
	if len(srv.Decisions(servertest.Filter{AnonID: consent.Enrichment.AnonID})) != 1 {
		t.Fatal("filter by the stored (cookieless) anon id found nothing")
	}
	if err := srv.Reset(); err != nil {
		t.Fatal(err)
	}
	if events, _ := srv.Events(); len(events) != 0 || len(srv.Decisions(servertest.Filter{})) != 0 {
		t.Fatalf("after reset: %d events, %d decisions", len(events), len(srv.Decisions(servertest.Filter{})))
	}
	if a, err := srv.Send(event(srv.SiteID, 1, nil)); err != nil || a.Accepted != 1 {
		t.Fatalf("after reset the same id is accepted again: got %+v %v", a, err)
	}
}

func TestClockDrivesSessions(t *testing.T) {
	t.Parallel()
	clock := servertest.NewClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	srv := servertest.New(t, servertest.WithClock(clock.Now))
	send := func(n int) {
		if _, err := srv.Send(event(srv.SiteID, n, nil)); err != nil { // no ts: the event takes the clock's time
			t.Fatal(err)
		}
	}
	send(1)
	clock.Advance(29 * time.Minute)
	send(2)
	clock.Advance(31 * time.Minute)
	send(3)
	req, _ := http.NewRequest("GET", srv.QueryURL+"/v1/sites/"+srv.SiteID+"/sessions?from=2026-05-01&to=2026-05-01", nil)
	req.Header.Set("Authorization", "Bearer "+srv.Keys.Query)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var stats struct {
		Count        int     `json:"count"`
		AvgDurationS float64 `json:"avg_duration_s"`
	}
	json.NewDecoder(res.Body).Decode(&stats)
	if stats.Count != 2 || stats.AvgDurationS != 29*60/2 {
		t.Fatalf("got %+v, want 2 sessions (29 min and a bounce)", stats)
	}
	events, _ := srv.Events()
	if events[2].TS != "2026-05-01T13:00:00.000Z" {
		t.Fatalf("got ts %s, want the test clock's time", events[2].TS)
	}
}

func TestOptions(t *testing.T) {
	t.Parallel()
	srv := servertest.New(t, servertest.WithRequireAPIKey("require"))
	if _, err := srv.Send(event(srv.SiteID, 1, nil)); err == nil {
		t.Fatal("require mode accepted the site bearer")
	}
	if len(srv.Keys.Ingest) < 10 || srv.AdminToken == "" || srv.QueryURL == "" {
		t.Fatalf("got setup %+v", srv.DevSetup)
	}
	filtered := servertest.New(t, servertest.WithBotFilter("on"))
	req, _ := http.NewRequest("POST", filtered.CollectorURL+"/v1/events", stringsReader(mustJSON(event(filtered.SiteID, 1, nil))))
	req.Header.Set("Authorization", "Bearer "+filtered.SiteID)
	req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/120.0.0.0 Safari/537.36")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if events, _ := filtered.Events(); len(events) != 0 {
		t.Fatalf("WithBotFilter(on): got %d events of a headless browser stored, want 0", len(events))
	}
	if _, err := servertest.Start(servertest.WithPlan(`{"mode":"sometimes","events":{}}`)); err == nil {
		t.Fatal("a broken plan started")
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// A test suite sharing one server takes a site of its own, makes the
// backend fail for that site only, and removes the site at the end.
func TestFaultsAndThrowAwaySites(t *testing.T) {
	t.Parallel()
	srv := servertest.New(t)
	site, err := srv.NewSite("")
	if err != nil {
		t.Fatal(err)
	}
	if site.ID == "" || site.Keys.Ingest == "" || site.Keys.Query == "" {
		t.Fatalf("got %+v, want an id and both keys", site)
	}
	post := func(siteID string, n int) *http.Response {
		b, _ := json.Marshal(event(siteID, n, nil))
		req, _ := http.NewRequest("POST", srv.CollectorURL+"/v1/events", stringsReader(string(b)))
		req.Header.Set("Authorization", "Bearer "+siteID)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	if err := srv.InjectFault(servertest.Fault{Status: 503, Count: 2, SiteID: site.ID}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if res := post(site.ID, 1); res.StatusCode != 503 || res.Header.Get("Retry-After") != "1" {
			t.Fatalf("request %d: got %d, Retry-After %q, want 503 with 1", i+1, res.StatusCode, res.Header.Get("Retry-After"))
		}
	}
	if res := post(srv.SiteID, 1); res.StatusCode != 202 {
		t.Fatalf("got %d for the seeded site, want 202: the fault is the other site's", res.StatusCode)
	}
	if res := post(site.ID, 1); res.StatusCode != 202 {
		t.Fatalf("got %d after the fault, want 202", res.StatusCode)
	}
	if err := srv.InjectFault(servertest.Fault{Delay: 5 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if res := post(site.ID, 2); res.StatusCode != 202 {
		t.Fatalf("got %d after a stall, want 202", res.StatusCode)
	}
	if d := srv.Decisions(servertest.Filter{SiteID: site.ID, Limit: 1}); len(d) != 1 || d[0].InjectedDelayMS != 5 {
		t.Fatalf("got %+v, want the stalled request's decision to say 5 ms", d)
	}
	if err := srv.InjectFault(servertest.Fault{Status: 418}); err == nil {
		t.Fatal("got no error for status 418, want the server's 400")
	}
	if err := srv.InjectFault(servertest.Fault{Status: 500, Count: 10}); err != nil {
		t.Fatal(err)
	}
	if err := srv.ClearFaults(); err != nil {
		t.Fatal(err)
	}
	if err := srv.DeleteSite(site.ID); err != nil {
		t.Fatal(err)
	}
	if res := post(site.ID, 3); res.StatusCode != 401 {
		t.Fatalf("got %d for the deleted site, want 401", res.StatusCode)
	}
	if err := srv.DeleteSite(srv.SiteID); err == nil {
		t.Fatal("got no error deleting the seeded site, want 404: only throw-away sites go")
	}
}

// WaitEvents answers once the events are stored, and says how many
// arrived when they do not in time.
func TestWaitEvents(t *testing.T) {
	t.Parallel()
	srv := servertest.New(t)
	go srv.Send(event(srv.SiteID, 1, nil))
	events, err := srv.WaitEvents(1, 10*time.Second)
	if err != nil || len(events) != 1 {
		t.Fatalf("got %d events, %v, want 1", len(events), err)
	}
	if _, err := srv.WaitEvents(2, 50*time.Millisecond); err == nil || !strings.Contains(err.Error(), "1 events stored") {
		t.Fatalf("got %v waiting for an event never sent, want an error saying 1 arrived", err)
	}
}
