package server

import (
	"bytes"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/tally-analytics/tally/internal/dbtest"
	"github.com/tally-analytics/tally/privacy"
	"github.com/tally-analytics/tally/schema"
)

// segmentPost sends body to a Segment path of the collector with writeKey
// as the HTTP Basic user name ("" for no Authorization header).
func (h *harness) segmentPost(path, writeKey string, body any, headers ...string) response {
	h.t.Helper()
	if writeKey != "" {
		headers = append(headers, "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(writeKey+":")))
	}
	return h.c("POST", path, "", body, headers...)
}

// segmentOKAnswer checks a 200 of the Segment intake and decodes it.
func segmentOKAnswer(t *testing.T, r response) segmentAnswer {
	t.Helper()
	mustStatus(t, r, 200, "")
	var a segmentAnswer
	if err := json.Unmarshal(r.body, &a); err != nil || !a.Success {
		t.Fatalf("got %s, want success true", r.body)
	}
	return a
}

// storedEvent is the row of one stored event.
type storedEvent struct {
	id, typ, anon, raw, ts    string
	user, url, ref, browser   sql.NullString
	country, city, credential sql.NullString
}

// segmentEvents reads every stored event of site in arrival order.
func (h *harness) segmentEvents(site string) []storedEvent {
	h.t.Helper()
	var out []storedEvent
	for _, r := range h.events(site) {
		out = append(out, storedEvent{id: r.ID, typ: r.Type, anon: r.AnonID, raw: r.Raw.String, ts: r.TS, user: r.UserID, url: r.URL,
			ref: r.Referrer, browser: r.Browser, country: r.Country, city: r.City, credential: r.Credential})
	}
	return out
}

func nullStr(s sql.NullString) string {
	if !s.Valid {
		return "<null>"
	}
	return s.String
}

func TestSegmentMapping(t *testing.T) {
	t.Parallel()
	const mid = "0f8fad5b-d9cb-469f-a165-70867728950e"
	tests := []struct {
		name, path, body string
		// want: type, anon_id, user_id, url, referrer, browser
		want [6]string
		id   string // the stored id, when it matters
	}{
		{"track: the event name verbatim, userId as anon_id", "/v1/track",
			`{"userId":"u1","event":"Order Completed","properties":{"revenue":49}}`,
			[6]string{"Order Completed", "u1", "u1", "<null>", "<null>", "<null>"}, ""},
		{"track: anonymousId wins as anon_id", "/v1/track",
			`{"userId":"u1","anonymousId":"a1","event":"Signed Up"}`,
			[6]string{"Signed Up", "a1", "u1", "<null>", "<null>", "<null>"}, ""},
		{"short path t", "/v1/t",
			`{"anonymousId":"a1","event":"Clicked"}`,
			[6]string{"Clicked", "a1", "<null>", "<null>", "<null>", "<null>"}, ""},
		{"page: pageview, url and referrer from properties", "/v1/page",
			`{"anonymousId":"a1","properties":{"url":"https://shop.test/p","referrer":"https://ref.test/"},"context":{"page":{"url":"https://ignored.test/"}}}`,
			[6]string{"pageview", "a1", "<null>", "https://shop.test/p", "https://ref.test/", "<null>"}, ""},
		{"page: url and referrer from context.page", "/v1/p",
			`{"anonymousId":"a1","context":{"page":{"url":"https://shop.test/c","referrer":"https://r.test/"}}}`,
			[6]string{"pageview", "a1", "<null>", "https://shop.test/c", "https://r.test/", "<null>"}, ""},
		{"screen", "/v1/screen", `{"userId":7,"name":"Home"}`,
			[6]string{"screen", "7", "7", "<null>", "<null>", "<null>"}, ""},
		{"identify", "/v1/i", `{"userId":"u1","anonymousId":"a1","traits":{"plan":"pro"}}`,
			[6]string{"identify", "a1", "u1", "<null>", "<null>", "<null>"}, ""},
		{"group", "/v1/group", `{"userId":"u1","groupId":"g1","traits":{"name":"Acme"}}`,
			[6]string{"group", "u1", "u1", "<null>", "<null>", "<null>"}, ""},
		{"alias: anon_id is previousId", "/v1/alias", `{"previousId":"a9","userId":"u9","anonymousId":"a1"}`,
			[6]string{"alias", "a9", "u9", "<null>", "<null>", "<null>"}, ""},
		{"User-Agent from context.userAgent, not the header", "/v1/track",
			`{"anonymousId":"a1","event":"x","context":{"userAgent":"` + chromeUA + `"}}`,
			[6]string{"x", "a1", "<null>", "<null>", "<null>", "Chrome"}, ""},
		{"a UUID messageId is the id", "/v1/track",
			`{"anonymousId":"a1","event":"x","messageId":"` + strings.ToUpper(mid) + `"}`,
			[6]string{"x", "a1", "<null>", "<null>", "<null>", "<null>"}, mid},
		{"another messageId is a name-based UUID of it", "/v1/track",
			`{"anonymousId":"a1","event":"x","messageId":"ajs-next-123"}`,
			[6]string{"x", "a1", "<null>", "<null>", "<null>", "<null>"}, uuid.NewSHA1(segmentNamespace, []byte("ajs-next-123")).String()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.setupTenant("acme", "shop")
			// The request's own User-Agent is a bot's: only context.userAgent counts.
			a := segmentOKAnswer(t, h.segmentPost(tt.path, "shop", tt.body, "User-Agent", "curl/8.0"))
			if a.Accepted != 1 {
				t.Fatalf("got %+v, want 1 accepted", a)
			}
			evs := h.segmentEvents("shop")
			if len(evs) != 1 {
				t.Fatalf("got %d events, want 1", len(evs))
			}
			e := evs[0]
			got := [6]string{e.typ, e.anon, nullStr(e.user), nullStr(e.url), nullStr(e.ref), nullStr(e.browser)}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if tt.id != "" && e.id != tt.id {
				t.Errorf("got id %s, want %s", e.id, tt.id)
			}
			if e.raw != tt.body {
				t.Errorf("got raw %s, want the message's bytes %s", e.raw, tt.body)
			}
			if e.credential.String != credentialSite {
				t.Errorf("got credential %q, want %q", e.credential.String, credentialSite)
			}
		})
	}
}

func TestSegmentRawAndBatchContext(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "shop")
	m0 := `{ "type":"track", "writeKey" : "shop" ,"anonymousId":"a1","event":"One"}`
	m1 := `{"writeKey":"shop"}`[:0] + `{"type":"page","anonymousId":"a2","context":{"userAgent":"` + chromeUA + `"},"writeKey":"shop"}`
	body := `{"batch":[` + m0 + `,` + m1 + `],"context":{"userAgent":"Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0","page":{"url":"https://shop.test/from-batch"}},"writeKey":"shop"}`
	a := segmentOKAnswer(t, h.segmentPost("/v1/b", "", body))
	if a.Accepted != 2 {
		t.Fatalf("got %+v, want 2 accepted", a)
	}
	evs := h.segmentEvents("shop")
	// raw is each message's bytes, less its writeKey member.
	if want := `{ "type":"track" ,"anonymousId":"a1","event":"One"}`; evs[0].raw != want {
		t.Errorf("got raw %s, want %s", evs[0].raw, want)
	}
	if want := `{"type":"page","anonymousId":"a2","context":{"userAgent":"` + chromeUA + `"}}`; evs[1].raw != want {
		t.Errorf("got raw %s, want %s", evs[1].raw, want)
	}
	// The batch's context applies to each message; the message's own keys win.
	if got := nullStr(evs[1].url); got != "https://shop.test/from-batch" {
		t.Errorf("got url %s, want the batch context's page url", got)
	}
	if got := nullStr(evs[1].browser); got != "Chrome" {
		t.Errorf("got browser %s, want Chrome (the message's own userAgent)", got)
	}
}

func TestSegmentWriteKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "shop")
	h.setupTenant("other", "blog")
	msg := func(key string) string {
		if key == "" {
			return `{"anonymousId":"a","event":"x"}`
		}
		return `{"anonymousId":"a","event":"x","writeKey":"` + key + `"}`
	}
	tests := []struct {
		name, basic, body string
		bearer            string
		status            int
		code, site        string
	}{
		{"Basic user name", "shop", msg(""), "", 200, "", "shop"},
		{"writeKey in the body", "", msg("shop"), "", 200, "", "shop"},
		{"Basic wins over the body", "blog", msg("shop"), "", 200, "", "blog"},
		{"a bearer as write key", "", msg(""), "shop", 200, "", "shop"},
		{"none", "", msg(""), "", 401, "unauthorized", ""},
		{"unknown Basic", "nope", msg("shop"), "", 401, "unauthorized", ""},
		{"unknown body key", "", msg("nope"), "", 401, "unauthorized", ""},
		{"empty Basic user", "", msg(""), "", 401, "unauthorized", ""},
		{"a body that is not JSON", "", `{"writeKey":`, "", 401, "unauthorized", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var headers []string
			if tt.bearer != "" {
				headers = []string{"Authorization", "Bearer " + tt.bearer}
			}
			if tt.name == "empty Basic user" {
				headers = []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte(":"))}
			}
			before := h.count(`SELECT COUNT(*) FROM events WHERE site_id = ?`, tt.site)
			r := h.segmentPost("/v1/track", tt.basic, tt.body, headers...)
			mustStatus(t, r, tt.status, tt.code)
			if tt.site != "" && h.count(`SELECT COUNT(*) FROM events WHERE site_id = ?`, tt.site) != before+1 {
				t.Errorf("got no new event on %s, want one", tt.site)
			}
		})
	}
}

func TestSegmentPartialBatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.DebugFeedSize = 100 })
	h.setupTenant("acme", "shop")
	body := `{"batch":[
		{"type":"track","anonymousId":"a1","event":"Good"},
		{"type":"track","anonymousId":"a1"},
		{"type":"bogus","anonymousId":"a1"},
		{"type":"page"},
		"not an object",
		{"type":"alias","userId":"u1"},
		{"type":"group","userId":"u1"},
		{"type":"track","anonymousId":"a1","event":"Late","timestamp":"yesterday"},
		{"type":"identify","userId":"u1","traits":[1]},
		{"type":"page","anonymousId":"a2"}
	]}`
	a := segmentOKAnswer(t, h.segmentPost("/v1/batch", "shop", body))
	if a.Accepted != 2 || a.Rejected != 8 {
		t.Fatalf("got %+v, want 2 accepted, 8 rejected", a)
	}
	if n := len(h.segmentEvents("shop")); n != 2 {
		t.Fatalf("got %d stored, want 2", n)
	}
	r := h.q("GET", "/v1/debug/decisions?outcome=rejected", "", nil)
	mustStatus(t, r, 200, "")
	var list decisionsAnswer
	json.Unmarshal(r.body, &list)
	paths := map[string]bool{}
	for _, d := range list.Decisions {
		if d.Endpoint != endpointSegment || d.Reason != "invalid_event" {
			t.Errorf("got %s %s, want segment invalid_event", d.Endpoint, d.Reason)
		}
		for _, dt := range d.Details {
			paths[dt.Path] = true
		}
	}
	for _, p := range []string{"/batch/1/event", "/batch/2/type", "/batch/3/userId", "/batch/4", "/batch/5/previousId",
		"/batch/6/groupId", "/batch/7/timestamp", "/batch/8/traits"} {
		if !paths[p] {
			t.Errorf("no refusal at %s; got %v", p, paths)
		}
	}
	// No valid message at all: the request is refused with every problem.
	r = h.segmentPost("/v1/batch", "shop", `{"batch":[{"type":"track","anonymousId":"a"},{"type":"page"}]}`)
	mustStatus(t, r, 400, "invalid_event")
	if !strings.Contains(string(r.body), "/batch/0/event") || !strings.Contains(string(r.body), "/batch/1/userId") {
		t.Errorf("got %s, want details for both messages", r.body)
	}
	// A single call that is invalid is refused.
	mustStatus(t, h.segmentPost("/v1/track", "shop", `{"anonymousId":"a"}`), 400, "invalid_event")
}

func TestSegmentLimits(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "shop")
	big := strings.Repeat("x", segmentMessageLimit)
	msg := func(i int) string { return fmt.Sprintf(`{"type":"track","anonymousId":"a","event":"e%d"}`, i) }
	batchOf := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = msg(i)
		}
		return `{"batch":[` + strings.Join(parts, ",") + `]}`
	}
	tests := []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"invalid JSON", "/v1/batch", `{"batch":[`, 400, "invalid_event"},
		{"not an object", "/v1/track", `[1]`, 400, "invalid_event"},
		{"empty body", "/v1/track", ``, 400, "invalid_event"},
		{"batch not an array", "/v1/batch", `{"batch":{}}`, 400, "invalid_event"},
		{"empty batch", "/v1/batch", `{"batch":[]}`, 400, "invalid_event"},
		{"2,500 messages", "/v1/batch", batchOf(segmentMaxBatch), 200, ""},
		{"2,501 messages", "/v1/batch", batchOf(segmentMaxBatch + 1), 400, "invalid_event"},
		{"a single call over 32 KB", "/v1/track", `{"anonymousId":"a","event":"x","properties":{"p":"` + big + `"}}`, 400, "invalid_event"},
		{"a batch message over 32 KB", "/v1/batch", `{"batch":[` + msg(0) + `,{"type":"track","anonymousId":"a","event":"x","properties":{"p":"` + big + `"}}]}`, 400, "invalid_event"},
		{"a body over 500 KB", "/v1/batch", `{"batch":[` + msg(0) + `],"pad":"` + strings.Repeat("x", segmentBodyLimit) + `"}`, 400, "invalid_event"},
		{"a body over 500 KB, key in the body", "/v1/batch", `{"writeKey":"shop","batch":[` + msg(0) + `],"pad":"` + strings.Repeat("x", segmentBodyLimit) + `"}`, 400, "invalid_event"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "shop"
			if strings.Contains(tt.name, "key in the body") {
				key = ""
			}
			mustStatus(t, h.segmentPost(tt.path, key, tt.body), tt.status, tt.code)
		})
	}
}

func TestSegmentClockSkew(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "shop")
	now := h.clock.Now() // 2026-01-31T09:05:00.120Z
	tests := []struct {
		name, body, want string
	}{
		// The client's clock is an hour fast: its timestamp is 5 s before its sentAt.
		{"message sentAt", `{"type":"track","anonymousId":"a","event":"m","timestamp":"2026-01-31T10:04:55.120Z","sentAt":"2026-01-31T10:05:00.120Z"}`, "2026-01-31T09:04:55.120Z"},
		{"batch sentAt", `{"type":"track","anonymousId":"a","event":"b","timestamp":"2026-01-31T08:04:50Z"}`, "2026-01-31T09:04:50.120Z"},
		{"no sentAt: the timestamp as sent", `{"type":"track","anonymousId":"a","event":"n","timestamp":"2026-01-30T10:00:00+01:00"}`, "2026-01-30T09:00:00.000Z"},
		{"no timestamp: the receive time", `{"type":"track","anonymousId":"a","event":"r"}`, now.Format("2006-01-02T15:04:05.000Z")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"batch":[` + tt.body + `],"sentAt":"2026-01-31T08:05:00Z"}`
			if tt.name != "batch sentAt" {
				body = `{"batch":[` + tt.body + `]}`
			}
			segmentOKAnswer(t, h.segmentPost("/v1/batch", "shop", body))
			evs := h.segmentEvents("shop")
			if got := evs[len(evs)-1].ts; got != tt.want {
				t.Errorf("got ts %s, want %s", got, tt.want)
			}
		})
	}
	// A corrected time more than a day ahead is refused.
	mustStatus(t, h.segmentPost("/v1/track", "shop", `{"anonymousId":"a","event":"f","timestamp":"2026-02-03T00:00:00Z"}`), 400, "invalid_event")
}

func TestSegmentConsent(t *testing.T) {
	t.Parallel()
	consent := func(prefs string) string {
		// Identifiers with a '-' cannot occur inside the hex of a cookieless id,
		// so the leak check below cannot match one by chance.
		return `{"type":"track","anonymousId":"anon-7","userId":"user-7","event":"x","properties":{"url":"https://shop.test/p?q=1"},` +
			`"context":{"ip":"10.0.0.1","consent":{"categoryPreferences":` + prefs + `}}}`
	}
	t.Run("require mode keeps only granted analytics consent", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.ConsentMode = privacy.ConsentRequire })
		h.setupTenant("acme", "shop")
		body := `{"batch":[` + strings.Join([]string{
			consent(`{"Analytics":true,"Advertising":false}`),
			consent(`{"analytics":true}`),
			consent(`{"Analytics":false}`),
			consent(`{"Advertising":true}`),
			`{"type":"track","anonymousId":"a1","event":"x"}`,
		}, ",") + `]}`
		a := segmentOKAnswer(t, h.segmentPost("/v1/batch", "shop", body))
		if a.Accepted != 2 || a.Dropped != 3 {
			t.Errorf("got %+v, want 2 accepted, 3 dropped", a)
		}
	})
	t.Run("denied is stored cookieless, Segment's identifiers gone from raw", func(t *testing.T) {
		h := newHarness(t)
		h.setupTenant("acme", "shop")
		segmentOKAnswer(t, h.segmentPost("/v1/batch", "shop", `{"batch":[`+consent(`{"Analytics":false}`)+`]}`))
		e := h.segmentEvents("shop")[0]
		if !privacy.IsCookielessID(e.anon) || e.user.Valid || nullStr(e.url) != "https://shop.test/p" {
			t.Errorf("got anon %s user %s url %s, want a cookieless row", e.anon, nullStr(e.user), nullStr(e.url))
		}
		for _, leak := range []string{"user-7", "anon-7", "10.0.0.1", "q=1", "anon_id"} {
			if strings.Contains(e.raw, `"`+leak+`"`) || strings.Contains(e.raw, leak+`"`) {
				t.Errorf("raw %s still holds %s", e.raw, leak)
			}
		}
		if !strings.Contains(e.raw, `"anonymousId":"`+e.anon+`"`) {
			t.Errorf("raw %s lacks the cookieless anonymousId", e.raw)
		}
	})
}

func TestSegmentIdentityAndProfile(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "shop")
	segmentOKAnswer(t, h.segmentPost("/v1/alias", "shop", `{"previousId":"anon-1","userId":"user-1"}`))
	if n := h.count(`SELECT COUNT(*) FROM identity_links WHERE site_id = 'shop' AND anon_id = 'anon-1' AND user_id = 'user-1'`); n != 1 {
		t.Errorf("got %d identity links anon-1 -> user-1, want 1", n)
	}
	segmentOKAnswer(t, h.segmentPost("/v1/identify", "shop", `{"userId":"user-1","traits":{"plan":"pro"}}`))
	segmentOKAnswer(t, h.segmentPost("/v1/identify", "shop", `{"userId":"user-1","traits":{"email":"a@b.test"}}`))
	var traits string
	h.sqlDB().QueryRow(`SELECT traits FROM user_profiles WHERE site_id = 'shop' AND user_id = 'user-1'`).Scan(&traits)
	if !strings.Contains(traits, `"plan":"pro"`) || !strings.Contains(traits, `"email":"a@b.test"`) {
		t.Errorf("got traits %s, want plan and email merged", traits)
	}
	// A group's traits are the group's, not the user's.
	segmentOKAnswer(t, h.segmentPost("/v1/group", "shop", `{"userId":"user-1","groupId":"g","traits":{"plan":"enterprise"}}`))
	h.sqlDB().QueryRow(`SELECT traits FROM user_profiles WHERE site_id = 'shop' AND user_id = 'user-1'`).Scan(&traits)
	if strings.Contains(traits, "enterprise") {
		t.Errorf("got traits %s, want the group's traits kept out of the profile", traits)
	}
}

func TestSegmentDedupByMessageID(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "shop")
	for _, mid := range []string{uuid.NewString(), "ajs-next-abc"} {
		body := `{"batch":[{"type":"track","anonymousId":"a","event":"x","messageId":"` + mid + `"}]}`
		if a := segmentOKAnswer(t, h.segmentPost("/v1/batch", "shop", body)); a.Accepted != 1 {
			t.Fatalf("%s: got %+v, want 1 accepted", mid, a)
		}
		if a := segmentOKAnswer(t, h.segmentPost("/v1/batch", "shop", body)); a.Accepted != 0 || a.Duplicates != 1 {
			t.Errorf("%s resent: got %+v, want 1 duplicate", mid, a)
		}
	}
}

func TestSegmentGates(t *testing.T) {
	t.Parallel()
	t.Run("bot", func(t *testing.T) {
		h := newHarness(t)
		h.setupTenant("acme", "shop")
		a := segmentOKAnswer(t, h.segmentPost("/v1/track", "shop", `{"anonymousId":"a","event":"x","context":{"userAgent":"Googlebot/2.1 (+http://www.google.com/bot.html)"}}`))
		if a.Dropped != 1 || len(h.segmentEvents("shop")) != 0 {
			t.Errorf("got %+v, want the bot's message dropped", a)
		}
	})
	t.Run("rate limit", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.RateLimit = 2 }) // burst 4
		h.setupTenant("acme", "shop")
		three := `{"batch":[` + strings.Repeat(`{"type":"track","anonymousId":"a","event":"x"},`, 2) + `{"type":"track","anonymousId":"a","event":"x"}]}`
		segmentOKAnswer(t, h.segmentPost("/v1/batch", "shop", three))
		r := h.segmentPost("/v1/batch", "shop", three)
		mustStatus(t, r, 429, "rate_limited")
		if r.header.Get("Retry-After") == "" || r.header.Get("X-RateLimit-Reset") != r.header.Get("Retry-After") {
			t.Errorf("got Retry-After %q, X-RateLimit-Reset %q, want both, equal", r.header.Get("Retry-After"), r.header.Get("X-RateLimit-Reset"))
		}
	})
	t.Run("quota", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.Quota = 1 })
		h.setupTenant("acme", "shop")
		segmentOKAnswer(t, h.segmentPost("/v1/track", "shop", `{"anonymousId":"a","event":"x"}`))
		mustStatus(t, h.segmentPost("/v1/track", "shop", `{"anonymousId":"a","event":"y"}`), 429, "quota_exceeded")
	})
	t.Run("plan reject refuses each failing message", func(t *testing.T) {
		plan, err := schema.ParsePlan([]byte(`{"mode":"reject","events":{"Order Completed":{"type":"object","required":["properties"],
			"properties":{"properties":{"type":"object","required":["revenue"]}}},"*":{"type":"object"}}}`))
		if err != nil {
			t.Fatal(err)
		}
		h := newHarness(t, func(c *Config) { c.Plan = plan })
		h.setupTenant("acme", "shop")
		a := segmentOKAnswer(t, h.segmentPost("/v1/batch", "shop", `{"batch":[
			{"type":"track","anonymousId":"a","event":"Order Completed","properties":{"revenue":49}},
			{"type":"track","anonymousId":"a","event":"Order Completed","properties":{}},
			{"type":"page","anonymousId":"a"}]}`))
		if a.Accepted != 2 || a.Rejected != 1 {
			t.Errorf("got %+v, want 2 accepted, 1 rejected", a)
		}
	})
}

func TestSegmentDLQReplay(t *testing.T) {
	t.Parallel()
	h, tn, fix := quarantineHarness(t)
	// The batch's context (its userAgent and page) must survive the DLQ.
	body := `{"batch":[{"type":"track","anonymousId":"a","event":"purchase","messageId":"m-1","timestamp":"2026-01-31T10:00:00.120Z"}],
		"sentAt":"2026-01-31T10:05:00.120Z","context":{"ip":"203.0.113.9","userAgent":"` + chromeUA + `","page":{"url":"https://shop.test/cart"}}}`
	a := segmentOKAnswer(t, h.segmentPost("/v1/batch", "web", body))
	if a.Quarantined != 1 {
		t.Fatalf("got %+v, want 1 quarantined", a)
	}
	id := uuid.NewSHA1(segmentNamespace, []byte("m-1")).String()
	var endpoint, payload string
	h.sqlDB().QueryRow(`SELECT endpoint, payload FROM dlq WHERE id = ?`, id).Scan(&endpoint, &payload)
	if endpoint != endpointSegment {
		t.Fatalf("got DLQ endpoint %q, want %q", endpoint, endpointSegment)
	}
	if strings.Contains(payload, "203.0.113.9") || strings.Contains(payload, "sentAt") || !strings.Contains(payload, "https://shop.test/cart") {
		t.Errorf("got DLQ payload %s, want the mapped message: the batch context merged in, no ip, no sentAt", payload)
	}
	fix()
	r := h.q("POST", "/v1/sites/web/dlq/"+id+"/replay", tn.adminKey, nil)
	mustStatus(t, r, 200, "")
	evs := h.segmentEvents("web")
	if len(evs) != 1 {
		t.Fatalf("got %d events, want 1", len(evs))
	}
	e := evs[0]
	if e.id != id || e.typ != "purchase" || nullStr(e.url) != "https://shop.test/cart" || nullStr(e.browser) != "Chrome" || e.ts != "2026-01-31T09:00:00.120Z" {
		t.Errorf("got %s %s %s %s %s, want the message mapped as first received", e.id, e.typ, nullStr(e.url), nullStr(e.browser), e.ts)
	}
	if h.count(`SELECT COUNT(*) FROM dlq`) != 0 {
		t.Error("the DLQ row is still there")
	}
}

func TestSegmentLargeBatchWriterJobs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "shop")
	parts := make([]string, segmentMaxBatch)
	for i := range parts {
		parts[i] = fmt.Sprintf(`{"type":"track","anonymousId":"a%d","event":"e","messageId":"m%d"}`, i%7, i)
	}
	body := `{"batch":[` + strings.Join(parts, ",") + `]}`
	jobs := func() string {
		return metricValue(t, h, `service_storage_write_duration_seconds_count{endpoint="segment"}`)
	}
	before := jobs()
	a := segmentOKAnswer(t, h.segmentPost("/v1/batch", "shop", body))
	if a.Accepted != segmentMaxBatch {
		t.Fatalf("got %+v, want %d accepted", a, segmentMaxBatch)
	}
	if before != "0" || jobs() != fmt.Sprint(segmentMaxBatch/maxJob) {
		t.Errorf("got %s writer jobs (from %s), want %d of at most %d events", jobs(), before, segmentMaxBatch/maxJob, maxJob)
	}
	if n := h.count(`SELECT COUNT(*) FROM events WHERE site_id = 'shop'`); n != segmentMaxBatch {
		t.Errorf("got %d stored, want %d", n, segmentMaxBatch)
	}
	// A resend is all duplicates.
	if a := segmentOKAnswer(t, h.segmentPost("/v1/batch", "shop", body)); a.Duplicates != segmentMaxBatch {
		t.Errorf("resent: got %+v, want %d duplicates", a, segmentMaxBatch)
	}
}

func TestSegmentMetricsAndFeed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.DebugFeedSize = 10 })
	h.setupTenant("acme", "shop")
	if got := metricValue(t, h, `service_events_received_total{endpoint="segment"}`); got != "0" {
		t.Fatalf("got %s, want the series at 0 from start-up", got)
	}
	segmentOKAnswer(t, h.segmentPost("/v1/track", "shop", `{"anonymousId":"a","event":"Order Completed"}`))
	if got := metricValue(t, h, `service_events_accepted_total{endpoint="segment"}`); got != "1" {
		t.Errorf("got %s accepted, want 1", got)
	}
	r := h.q("GET", "/v1/debug/decisions", "", nil)
	var list decisionsAnswer
	json.Unmarshal(r.body, &list)
	if len(list.Decisions) != 1 || list.Decisions[0].Endpoint != endpointSegment || list.Decisions[0].Type != "Order Completed" ||
		list.Decisions[0].Status != 200 {
		t.Errorf("got %s, want one segment decision of type Order Completed, status 200", r.body)
	}
	// The write key is a credential: no payload in the feed keeps it, not
	// even that of a request refused whole.
	mustStatus(t, h.segmentPost("/v1/track", "", `{"writeKey":"shop","anonymousId":"a"}`), 400, "invalid_event")
	segmentOKAnswer(t, h.segmentPost("/v1/batch", "", `{"writeKey":"shop","batch":[{"type":"page","anonymousId":"a","writeKey":"shop"}]}`))
	r = h.q("GET", "/v1/debug/decisions", "", nil)
	if strings.Contains(string(r.body), "writeKey") || len(r.json(t)["decisions"].([]any)) != 3 {
		t.Errorf("got %s, want three decisions, no writeKey", r.body)
	}
}

// TestSegmentRoutesCoexist checks the native /v1 collector routes still
// answer beside Segment's.
func TestSegmentRoutesCoexist(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "shop")
	intake(t, h.c("POST", "/v1/s2s/events", "shop", ev("shop", 1, map[string]any{"anon_id": "a", "type": "x"})))
	intake(t, h.c("POST", "/v1/events", "shop", ev("shop", 2, map[string]any{"anon_id": "a", "type": "x"})))
	mustStatus(t, h.c("GET", "/v1/script.js", "", nil), 200, "")
	segmentOKAnswer(t, h.segmentPost("/v1/s", "shop", `{"anonymousId":"a","name":"Home"}`))
	// The native envelope's type pattern is not Segment's: a name with spaces is fine there only.
	mustStatus(t, h.c("POST", "/v1/events", "shop", ev("shop", 3, map[string]any{"anon_id": "a", "type": "Order Completed"})), 400, "invalid_event")
}

func TestSegmentWithoutWriteKey(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`{"writeKey":"k","a":1}`, `{"a":1}`},
		{`{ "writeKey" : "k" , "a":1}`, `{ "a":1}`},
		{`{"a":1,"writeKey":"k","b":2}`, `{"a":1,"b":2}`},
		{`{"a":1, "writeKey":"k"}`, `{"a":1}`},
		{`{"writeKey":"k"}`, `{}`},
		{`{"a":{"writeKey":"nested stays"}}`, `{"a":{"writeKey":"nested stays"}}`},
	}
	for _, tt := range tests {
		if got := string(withoutMember(json.RawMessage(tt.in), "writeKey")); got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.in, got, tt.want)
		}
	}
}

// TestSegmentLaterJobFails makes the second writer job of a long batch
// fail (a trigger refuses one of its rows): the answer is an error the SDK
// retries, the feed and the metrics count the first job's messages as
// stored, and the retry finds those duplicates and stores the rest.
func TestSegmentLaterJobFails(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.DebugFeedSize = 1000 })
	h.setupTenant("acme", "shop")
	lift := refuseEventType(t, h, "Refused")
	n := maxJob + 10
	parts := make([]string, n)
	for i := range parts {
		event := "Fine"
		if i == n-1 {
			event = "Refused"
		}
		parts[i] = fmt.Sprintf(`{"type":"track","anonymousId":"a","event":%q,"messageId":"m%d"}`, event, i)
	}
	body := `{"batch":[` + strings.Join(parts, ",") + `]}`
	r := h.segmentPost("/v1/batch", "shop", body)
	if r.status < 500 {
		t.Fatalf("got %d %s, want a 5xx the SDK retries", r.status, r.body)
	}
	if got := h.count(`SELECT COUNT(*) FROM events WHERE site_id = 'shop'`); got != maxJob {
		t.Fatalf("got %d stored, want the first job's %d", got, maxJob)
	}
	if got := metricValue(t, h, `service_events_accepted_total{endpoint="segment"}`); got != fmt.Sprint(maxJob) {
		t.Errorf("got %s accepted in the metrics, want %d", got, maxJob)
	}
	if got := metricValue(t, h, `service_events_dropped_total{endpoint="segment",reason="internal"}`); got != "10" {
		t.Errorf("got %s dropped as internal, want 10", got)
	}
	var list decisionsAnswer
	json.Unmarshal(h.q("GET", "/v1/debug/decisions?outcome=accepted&limit=1000", "", nil).body, &list)
	if len(list.Decisions) != maxJob {
		t.Errorf("got %d accepted decisions, want %d", len(list.Decisions), maxJob)
	}
	lift()
	a := segmentOKAnswer(t, h.segmentPost("/v1/batch", "shop", body))
	if a.Accepted != 10 || a.Duplicates != maxJob {
		t.Errorf("retry: got %+v, want 10 accepted, %d duplicates", a, maxJob)
	}
}

// refuseEventType makes the database refuse every event of type typ with a
// trigger, in each backend's own syntax, and returns what lifts it.
func refuseEventType(t *testing.T, h *harness, typ string) (lift func()) {
	t.Helper()
	create := `CREATE TRIGGER refuse BEFORE INSERT ON events WHEN NEW.type = '` + typ + `'
		BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`
	drop := `DROP TRIGGER refuse`
	if dbtest.Postgres() {
		create = `CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION 'refused by the test'; END $$;
			CREATE TRIGGER refuse BEFORE INSERT ON events FOR EACH ROW WHEN (NEW.type = '` + typ + `') EXECUTE FUNCTION refuse()`
		drop = `DROP TRIGGER refuse ON events`
	}
	if _, err := h.sqlDB().Exec(create); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if _, err := h.sqlDB().Exec(drop); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSegmentLocation(t *testing.T) {
	t.Parallel()
	loc, err := privacy.NewLocator("../testdata/geoip-test.mmdb", false)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *Config) { c.Locator = loc })
	h.setupTenant("acme", "shop")
	body := `{"batch":[
		{"type":"track","anonymousId":"a","event":"ip","context":{"ip":"203.0.113.9","userAgent":"x"}},
		{"type":"track","anonymousId":"a","event":"batch ip"},
		{"type":"track","anonymousId":"a","event":"own ip","context":{"ip":"198.51.100.7"}}],
		"context":{"ip":"2001:db8::1"}}`
	segmentOKAnswer(t, h.segmentPost("/v1/batch", "shop", body))
	segmentOKAnswer(t, h.segmentPost("/v1/track", "shop", `{"anonymousId":"a","event":"no ip"}`))
	want := map[string]string{"ip": "DE Berlin", "batch ip": "JP Tokyo", "own ip": "FR Paris", "no ip": "NL Amsterdam"}
	for _, e := range h.segmentEvents("shop") {
		if got := e.country.String + " " + e.city.String; got != want[e.typ] {
			t.Errorf("%s: got %s, want %s", e.typ, got, want[e.typ])
		}
		if strings.Contains(e.raw, `"ip":`) || strings.Contains(e.raw, "203.0.113.9") {
			t.Errorf("%s: raw %s keeps the address", e.typ, e.raw)
		}
	}
	if e := h.segmentEvents("shop")[0]; e.raw != `{"type":"track","anonymousId":"a","event":"ip","context":{"userAgent":"x"}}` {
		t.Errorf("got raw %s, want the message's bytes without context.ip", e.raw)
	}
}

// FuzzSegmentIntake posts arbitrary bodies to the Segment paths of the real
// collector over a real database, with the write key in the header and in
// the body: every answer must be a 200 or a 4xx, never a 5xx or a panic.
func FuzzSegmentIntake(f *testing.F) {
	for _, seed := range []string{
		`{"batch":[{"type":"track","anonymousId":"a","event":"Order Completed","properties":{"revenue":49}}],"context":{"ip":"127.0.0.1"},"sentAt":"2026-01-31T09:05:00Z"}`,
		`{"writeKey":"web","batch":[{"type":"alias","previousId":"p","userId":"u"},{"type":"identify","userId":7,"traits":{"x":1}}]}`,
		`{"type":"page","anonymousId":"a","writeKey":"web","context":{"consent":{"categoryPreferences":{"Analytics":false}},"page":{"url":"%zz?q"}}}`,
		`{"anonymousId":"a","event":"x","timestamp":"1999-01-01T00:00:00Z","sentAt":"x","messageId":"m"}`,
		`{"batch":[1,"a",null,{}],"context":[]}`, `{"writeKey":{"a":1}}`, `{`, ``, `null`, `[]`,
	} {
		f.Add([]byte(seed))
	}
	hostileSeeds(f,
		`{"batch":[{"type":"track","anonymousId":V,"event":V,"properties":{"p":V,K:1},"context":{"page":{"url":V},"userAgent":V}},{"type":"track","anonymousId":"a","event":"ok"}]}`,
		`{"type":"identify","userId":V,"traits":{"t":V,K:2},"messageId":V,"timestamp":V}`,
		`{"batch":[{"type":"alias","previousId":V,"userId":"u"},{"type":"page","anonymousId":"a","name":V,"properties":{"url":V,"referrer":V}}],"context":{K:V}}`)
	h := fuzzCollector(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range []string{"/v1/batch", "/v1/track", "/v1/i", "/v1/alias"} {
			for _, basic := range []bool{true, false} {
				req := httptest.NewRequest("POST", path, bytes.NewReader(body))
				if basic {
					req.SetBasicAuth("web", "")
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK && (rec.Code < 400 || rec.Code >= 500) {
					t.Fatalf("%s: got %d %s for body %q", path, rec.Code, rec.Body, body)
				}
			}
		}
	})
}

func TestSegmentLogs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	h := newHarness(t, func(c *Config) { c.Logger = slog.New(slog.NewJSONHandler(&buf, nil)) })
	h.setupTenant("acme", "shop")
	secret := "very-secret-property-value"
	segmentOKAnswer(t, h.segmentPost("/v1/batch", "", `{"writeKey":"shop","batch":[
		{"type":"identify","userId":"alice@example.com","traits":{"t":"`+secret+`"},"context":{"ip":"203.0.113.9"}},
		{"type":"track","anonymousId":"a","properties":{"p":"`+secret+`"}}]}`))
	lines := logLines(t, &buf, "intake")
	if len(lines) != 1 || lines[0]["endpoint"] != endpointSegment || lines[0]["rejected"] != float64(1) ||
		fmt.Sprint(lines[0]["refused"]) != "[/batch/1/event]" {
		t.Fatalf("got %v, want one segment line naming the refused message's problem", lines)
	}
	for _, banned := range []string{"203.0.113.9", secret, "alice@example.com", "writeKey"} {
		if strings.Contains(buf.String(), banned) {
			t.Errorf("logs contain %q:\n%s", banned, buf.String())
		}
	}
}

// Over HTTP, write keys follow REQUIRE_API_KEY (docs/api.md#write-keys): a
// throw-away site's ingest key, restricted to that site, is its write key in
// every mode; a site id only without require; a workspace-wide key never.
func TestSegmentWriteKeysByMode(t *testing.T) {
	t.Parallel()
	track := func(n int) map[string]any {
		return map[string]any{"userId": "u1", "event": "Order Completed",
			"messageId": fmt.Sprintf("00000000-0000-4000-8000-%012d", n)}
	}
	for _, mode := range []string{KeyModeNone, KeyModeTag, KeyModeRequire} {
		t.Run(mode, func(t *testing.T) {
			h, tn := devHarness(t, func(c *Config) { c.RequireAPIKey = mode })
			s := h.newThrowAwaySite(nil)
			tests := []struct {
				name, key  string
				status     int
				credential string // stored events.credential prefix, when 200
			}{
				{"site id", s.SiteID, map[string]int{KeyModeNone: 200, KeyModeTag: 200, KeyModeRequire: 401}[mode], "site"},
				{"key restricted to the site", s.Keys.Ingest, map[string]int{KeyModeNone: 401, KeyModeTag: 200, KeyModeRequire: 200}[mode], "key:"},
				{"workspace-wide ingest key", tn.ingestKey, map[string]int{KeyModeNone: 401, KeyModeTag: 403, KeyModeRequire: 403}[mode], ""},
			}
			for i, tt := range tests {
				r := h.segmentPost("/v1/track", tt.key, track(i+1))
				mustStatus(t, r, tt.status, map[int]string{200: "", 401: "unauthorized", 403: "forbidden"}[tt.status])
				if tt.status != 200 {
					continue
				}
				stored := h.segmentEvents(s.SiteID)
				if len(stored) == 0 || !strings.HasPrefix(stored[len(stored)-1].credential.String, tt.credential) {
					t.Errorf("%s: got stored %+v, want the event with credential %s...", tt.name, stored, tt.credential)
				}
			}
		})
	}
}
