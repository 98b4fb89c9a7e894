package server

import (
	"fmt"
	"strings"
	"testing"
)

// importStream is an import stream of source with rows, and an end line
// counting them.
func importStream(source string, rows ...string) string {
	return fmt.Sprintf(`{"source":%q,"files":["f.csv"]}`+"\n", source) + strings.Join(rows, "\n") + "\n" +
		fmt.Sprintf(`{"end":{"rows":%d,"skipped":0}}`, len(rows)) + "\n"
}

func importRow(id, ts, anon, url string) string {
	return fmt.Sprintf(`{"id":%q,"type":"pageview","ts":%q,"anon_id":%q,"url":%q}`, id, ts, anon, url)
}

// Who may import: the admin token or an admin key reaching the site; a
// site of another workspace is the ordinary 404.
func TestImportEndpointAccess(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	h.setupTenant("other", "theirs")
	body := importStream("goatcounter", importRow("i1", "2026-01-30T10:00:00Z", "s1", "/a"))
	tests := []struct {
		name, site, token string
		status            int
		code              string
	}{
		{"no credential", "web", "", 401, "unauthorized"},
		{"read key", "web", tn.readKey, 403, "forbidden"},
		{"ingest key", "web", tn.ingestKey, 403, "forbidden"},
		{"admin key of another workspace's site", "theirs", tn.adminKey, 404, "not_found"},
		{"unknown site", "nope", testAdminToken, 404, "not_found"},
		{"admin key", "web", tn.adminKey, 200, ""},
		{"admin token", "web", testAdminToken, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mustStatus(t, h.q("POST", "/v1/sites/"+tt.site+"/imports", tt.token, body), tt.status, tt.code)
		})
	}
	if n := h.count(`SELECT COUNT(*) FROM events`); n != 1 {
		t.Errorf("got %d events, want 1 (the second import of the same row stores nothing)", n)
	}
	if n := h.count(`SELECT COUNT(*) FROM events WHERE site_id = 'theirs'`); n != 0 {
		t.Errorf("got %d events in the other workspace's site, want 0", n)
	}
}

// A stream that is not one is 400 invalid_import naming its line, never a
// 500; rows of chunks before a bad line stay stored and the same stream,
// fixed, completes the import.
func TestImportEndpointRefusesBadStreams(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	good := importRow("i1", "2026-01-30T10:00:00Z", "s1", "/a")
	tests := []struct {
		name, body, want string
	}{
		{"empty", "", "the import is empty"},
		{"not JSON", "hello\n", "line 1: want a header"},
		{"unknown source", `{"source":"matomo","files":[]}`, "line 1: want a header"},
		{"header with an unknown field", `{"source":"umami","files":[],"x":1}`, "line 1: want a header"},
		{"no end line", `{"source":"umami","files":[]}` + "\n" + good + "\n", "without its end line"},
		{"end line counting otherwise", `{"source":"umami","files":[]}` + "\n" + good + "\n" + `{"end":{"rows":2,"skipped":0}}`, "line 3: the end line counts 2 rows"},
		{"row of an unknown field", importStream("umami", `{"id":"a","type":"pageview","ts":"2026-01-30T10:00:00Z","anon_id":"s","ip":"1.2.3.4"}`), `line 2: not a row: json: unknown field "ip"`},
		{"row without id", importStream("umami", `{"type":"pageview","ts":"2026-01-30T10:00:00Z","anon_id":"s"}`), "line 2: id"},
		{"row of a bad type", importStream("umami", `{"id":"a","type":"a b","ts":"2026-01-30T10:00:00Z","anon_id":"s"}`), "line 2: type"},
		{"row without ts", importStream("umami", `{"id":"a","type":"pageview","anon_id":"s"}`), "line 2: ts"},
		{"row too far ahead", importStream("umami", importRow("a", "2026-02-05T10:00:00Z", "s", "/")), "more than 24 hours ahead"},
		{"row of a long anon_id", importStream("umami", importRow("a", "2026-01-30T10:00:00Z", strings.Repeat("x", 129), "/")), "line 2: anon_id"},
		{"properties not an object", importStream("umami", `{"id":"a","type":"pageview","ts":"2026-01-30T10:00:00Z","anon_id":"s","properties":[1]}`), "line 2: properties"},
		{"bad country", importStream("umami", `{"id":"a","type":"pageview","ts":"2026-01-30T10:00:00Z","anon_id":"s","country":"Germany"}`), "line 2: country"},
		{"a line over 1 MiB", importStream("umami", strings.Repeat(" ", 1<<20+1)), "line 2: longer than"},
		{"a row array", importStream("umami", `[1,2]`), "line 2: not a row"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.q("POST", "/v1/sites/web/imports", testAdminToken, tt.body)
			mustStatus(t, r, 400, "invalid_import")
			if msg := r.json(t)["error"].(map[string]any)["message"].(string); !strings.Contains(msg, tt.want) {
				t.Errorf("got %q, want a message containing %q", msg, tt.want)
			}
		})
	}
	// 600 good rows, then a bad one: the first chunk of 500 is stored, and
	// the stream fixed imports the rest once.
	var rows []string
	for i := 0; i < 600; i++ {
		rows = append(rows, importRow(fmt.Sprintf("r%d", i), "2026-01-29T10:00:00Z", fmt.Sprintf("s%d", i%10), "/p"))
	}
	bad := importStream("umami", append(append([]string{}, rows...), `{"id":"x"}`)...)
	mustStatus(t, h.q("POST", "/v1/sites/web/imports", testAdminToken, bad), 400, "invalid_import")
	before := h.count(`SELECT COUNT(*) FROM events WHERE site_id = 'web'`)
	if before != 501 { // the first chunk, and the row of the "no end line" case
		t.Fatalf("got %d events after the bad stream, want its first chunk of 500", before)
	}
	r := h.q("POST", "/v1/sites/web/imports", testAdminToken, importStream("umami", rows...))
	mustStatus(t, r, 200, "")
	if m := r.json(t); m["imported"] != float64(100) || m["duplicates"] != float64(500) { // r0-r499 stored
		t.Errorf("got %v, want 100 imported and 500 duplicates", m)
	}
	if n := h.count(`SELECT COUNT(*) FROM audit_log WHERE action = 'site.import'`); n != 1 {
		t.Errorf("got %d site.import audit entries, want 1 (only the import that ended)", n)
	}
}

// Imported events reach reads of days already kept as partials: the
// import deletes the partials of the days it touches, as intake does.
func TestImportRefreshesClosedDays(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	query := map[string]any{"metrics": []string{"visitors", "pageviews"}, "date_range": []string{"2026-01-10", "2026-01-10"}}
	send := func(rows ...string) {
		t.Helper()
		mustStatus(t, h.q("POST", "/v1/sites/web/imports", testAdminToken, importStream("goatcounter", rows...)), 200, "")
	}
	send(importRow("a1", "2026-01-10T10:00:00Z", "s1", "/a"))
	pageviews := func() any {
		r := h.q("POST", "/v1/sites/web/query", tn.readKey, query)
		mustStatus(t, r, 200, "")
		return r.json(t)["results"].([]any)[0].(map[string]any)["metrics"]
	}
	if got := fmt.Sprint(pageviews()); got != "[1 1]" {
		t.Fatalf("got %s, want [1 1]", got)
	}
	eventually(t, "the day's partial to be kept", func() bool {
		return h.count(`SELECT COUNT(*) FROM day_partials WHERE site_id = 'web'`) > 0
	})
	send(importRow("a2", "2026-01-10T11:00:00Z", "s2", "/b"), importRow("a3", "2026-01-10T11:01:00Z", "s2", "/c"))
	if got := fmt.Sprint(pageviews()); got != "[2 3]" {
		t.Errorf("after importing into the kept day: got %s, want [2 3]", got)
	}
}

// Imported events use no quota, keep the source's received time when it
// gives one, and are marked in raw with context.import.
func TestImportedEventsAreMarked(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Quota = 1 })
	h.setupTenant("acme", "web")
	row := `{"id":"t1","type":"pageview","ts":"2026-01-20T10:00:00.000Z","anon_id":"s","received_at":"2026-01-20T10:00:01.500Z"}`
	mustStatus(t, h.q("POST", "/v1/sites/web/imports", testAdminToken,
		importStream("tally", row, importRow("t2", "2026-01-20T10:01:00Z", "s", "/"))), 200, "")
	r := h.q("GET", "/v1/sites/web/export?from=2026-01-20&to=2026-01-20&format=ndjson", testAdminToken, nil)
	mustStatus(t, r, 200, "")
	if !strings.Contains(string(r.body), `"received_at":"2026-01-20T10:00:01.500Z"`) {
		t.Errorf("got %s, want t1's received_at as the source gave it", r.body)
	}
	r = h.q("POST", "/v1/sites/web/gdpr/export", testAdminToken, map[string]any{"subject": map[string]any{"anon_id": "s"}})
	mustStatus(t, r, 200, "")
	raw := string(r.body)
	if !strings.Contains(raw, `\"context\":{\"import\":\"tally\"}`) && !strings.Contains(raw, `"context":{"import":"tally"}`) {
		t.Errorf("got %.400s, want raw marked with context.import", raw)
	}
	if n := h.count(`SELECT COALESCE(SUM(accepted), 0) FROM site_usage`); n != 0 {
		t.Errorf("got %d events counted against the quota, want 0", n)
	}
	// The quota of 1 is untouched: an event sent now is accepted.
	mustStatus(t, h.c("POST", "/v1/s2s/events", "web", ev("web", 1, nil)), 202, "")
}
