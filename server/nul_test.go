package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tally-analytics/tally/internal/dbtest"
	"github.com/tally-analytics/tally/storage"
)

// TestNul sends NUL (U+0000) in every text a client controls, on each
// backend: no answer is a 5xx, each is the wanted one, and an event
// answered 202 is stored (docs/postgresql.md#text-with-nul-and-invalid-utf-8).
func TestNul(t *testing.T) {
	t.Parallel()
	h, tn, fix := quarantineHarness(t)
	mustStatus(t, h.q("PATCH", "/v1/sites/web", testAdminToken,
		map[string]any{"aliases": []string{"example.com", umamiWebsite}}), 200, "")
	const n = "a\u0000b"
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("web:"))
	from := "&from=2026-01-01&to=2026-02-28"
	query := func(filters ...any) map[string]any {
		return map[string]any{"metrics": []string{"visitors", "events"}, "date_range": "all", "filters": filters}
	}
	tests := []struct {
		name                      string
		want                      int // SQLite's answer, and PostgreSQL's
		wantPG                    int // PostgreSQL's, where it differs
		side, method, path, token string
		body                      any
		headers                   []string
	}{
		{"event type", 400, 0, "c", "POST", "/v1/events", "web", ev("web", 1, map[string]any{"type": n}), []string{"User-Agent", chromeUA}},
		{"anon_id", 202, 0, "c", "POST", "/v1/events", "web", ev("web", 2, map[string]any{"anon_id": n}), []string{"User-Agent", chromeUA}},
		{"user_id", 202, 0, "c", "POST", "/v1/events", "web", ev("web", 3, map[string]any{"user_id": n}), []string{"User-Agent", chromeUA}},
		{"url", 202, 0, "c", "POST", "/v1/events", "web", ev("web", 4, map[string]any{"url": "https://example.test/" + n}), []string{"User-Agent", chromeUA}},
		{"referrer", 202, 0, "c", "POST", "/v1/events", "web", ev("web", 5, map[string]any{"referrer": "https://r.test/" + n}), []string{"User-Agent", chromeUA}},
		{"property key", 202, 0, "c", "POST", "/v1/events", "web", ev("web", 6, map[string]any{"properties": map[string]any{n: "v"}}), []string{"User-Agent", chromeUA}},
		{"property value", 202, 0, "c", "POST", "/v1/events", "web", ev("web", 7, map[string]any{"properties": map[string]any{"plan": n}}), []string{"User-Agent", chromeUA}},
		{"trait", 202, 0, "c", "POST", "/v1/events", "web", ev("web", 8, map[string]any{"type": "identify", "user_id": "u", "traits": map[string]any{"email": n}}), []string{"User-Agent", chromeUA}},
		{"event id", 400, 0, "c", "POST", "/v1/events", "web", ev("web", 9, map[string]any{"id": n}), []string{"User-Agent", chromeUA}},
		{"site id", 400, 0, "c", "POST", "/v1/events", "web", ev("web", 10, map[string]any{"site_id": n}), []string{"User-Agent", chromeUA}},
		{"raw NUL in JSON", 400, 0, "c", "POST", "/v1/events", "web", `{"id":"` + eventID(11) + `","site_id":"web","anon_id":"a` + "\x00" + `","type":"pageview"}`, []string{"User-Agent", chromeUA}},
		{"s2s anon_id", 202, 0, "c", "POST", "/v1/s2s/events", "web", ev("web", 13, map[string]any{"anon_id": n, "user_agent": n, "ip": n}), nil},
		{"s2s props", 202, 0, "c", "POST", "/v1/s2s/events", "web", ev("web", 14, map[string]any{"properties": map[string]any{"plan": n, n: n}}), nil},
		{"batch", 400, 0, "c", "POST", "/v1/events", "web", []any{ev("web", 15, nil), ev("web", 16, map[string]any{"type": n})}, []string{"User-Agent", chromeUA}},
		{"quarantined", 202, 0, "c", "POST", "/v1/events", "web", ev("web", 17, map[string]any{"type": "purchase", "anon_id": n, "x": n}), []string{"User-Agent", chromeUA}},
		{"quarantined s2s", 202, 0, "c", "POST", "/v1/s2s/events", "web", ev("web", 18, map[string]any{"type": "purchase", "anon_id": n, "user_agent": n}), nil},
		{"segment track", 200, 0, "c", "POST", "/v1/track", "", map[string]any{"anonymousId": n, "userId": n, "event": n, "properties": map[string]any{n: n}, "messageId": "m" + n}, []string{"Authorization", basic}},
		{"segment page", 200, 0, "c", "POST", "/v1/page", "", map[string]any{"anonymousId": "a", "properties": map[string]any{"url": "https://x.test/" + n, "referrer": n}}, []string{"Authorization", basic}},
		{"segment identify", 200, 0, "c", "POST", "/v1/identify", "", map[string]any{"userId": "u", "traits": map[string]any{"email": n}}, []string{"Authorization", basic}},
		{"segment batch", 200, 0, "c", "POST", "/v1/batch", "", map[string]any{"batch": []any{map[string]any{"type": "track", "anonymousId": "a", "event": n}, map[string]any{"type": "track", "anonymousId": "a", "event": "ok"}}}, []string{"Authorization", basic}},
		{"plausible", 400, 0, "c", "POST", "/api/event", "", map[string]any{"name": n, "url": "https://example.com/" + n, "domain": "example.com", "referrer": n, "props": map[string]any{n: n}}, []string{"User-Agent", chromeUA, "Content-Type", "text/plain"}},
		{"plausible domain", 401, 0, "c", "POST", "/api/event", "", map[string]any{"name": "pageview", "url": "https://example.com/", "domain": n}, []string{"User-Agent", chromeUA, "Content-Type", "text/plain"}},
		{"umami", 400, 0, "c", "POST", "/api/send", "", map[string]any{"type": "event", "payload": map[string]any{"website": umamiWebsite, "url": "/" + n, "referrer": n, "name": n, "hostname": n, "data": map[string]any{n: n}, "title": n, "language": n, "screen": n}}, []string{"User-Agent", chromeUA}},
		{"umami website", 401, 0, "c", "POST", "/api/send", "", map[string]any{"type": "event", "payload": map[string]any{"website": n}}, []string{"User-Agent", chromeUA}},
		// The plan now takes purchase: the quarantined rows replay whole.
		{"fix the plan", 0, 0, "", "", "", "", nil, nil},
		{"dlq list", 200, 0, "q", "GET", "/v1/sites/web/dlq", tn.adminKey, nil, nil},
		{"dlq replay nul id", 404, 0, "q", "POST", "/v1/sites/web/dlq/" + url.PathEscape(n) + "/replay", tn.adminKey, nil, nil},
		{"dlq replay", 200, 0, "q", "POST", "/v1/sites/web/dlq/" + eventID(17) + "/replay", tn.adminKey, nil, nil},
		{"dlq replay s2s", 200, 0, "q", "POST", "/v1/sites/web/dlq/" + eventID(18) + "/replay", tn.adminKey, nil, nil},
		// Reads.
		{"breakdown url", 200, 0, "q", "GET", "/v1/sites/web/breakdown?dimension=url" + from, tn.readKey, nil, nil},
		{"breakdown referrer", 200, 0, "q", "GET", "/v1/sites/web/breakdown?dimension=referrer" + from, tn.readKey, nil, nil},
		{"breakdown dimension", 400, 0, "q", "GET", "/v1/sites/web/breakdown?dimension=" + url.QueryEscape(n) + from, tn.readKey, nil, nil},
		{"events", 200, 0, "q", "GET", "/v1/sites/web/events?" + from[1:], tn.readKey, nil, nil},
		{"events type", 200, 0, "q", "GET", "/v1/sites/web/events?type=" + url.QueryEscape(n) + from, tn.readKey, nil, nil},
		{"pageviews", 200, 0, "q", "GET", "/v1/sites/web/pageviews?" + from[1:], tn.readKey, nil, nil},
		{"sessions", 200, 0, "q", "GET", "/v1/sites/web/sessions?" + from[1:], tn.readKey, nil, nil},
		{"property names", 200, 0, "q", "GET", "/v1/sites/web/properties?" + from[1:], tn.readKey, nil, nil},
		{"property names of type", 200, 0, "q", "GET", "/v1/sites/web/properties?event=" + url.QueryEscape(n) + from, tn.readKey, nil, nil},
		{"export", 400, 0, "q", "GET", "/v1/sites/web/export?" + from[1:], tn.readKey, nil, nil},
		{"realtime", 200, 0, "q", "GET", "/v1/sites/web/realtime", tn.readKey, nil, nil},
		{"timeline", 200, 0, "q", "GET", "/v1/sites/web/users/" + url.PathEscape(n) + "/timeline", tn.readKey, nil, nil},
		{"query props dimension", 200, 0, "q", "POST", "/v1/sites/web/query", tn.readKey, map[string]any{"metrics": []string{"visitors", "events"}, "date_range": "all", "dimensions": []string{"event:props:plan"}}, nil},
		{"query NUL prop dimension", 200, 0, "q", "POST", "/v1/sites/web/query", tn.readKey, map[string]any{"metrics": []string{"visitors"}, "date_range": "all", "dimensions": []string{"event:props:" + n}}, nil},
		{"query page is", 200, 0, "q", "POST", "/v1/sites/web/query", tn.readKey, query([]any{"is", "event:page", []string{n}}), nil},
		{"query page contains", 200, 0, "q", "POST", "/v1/sites/web/query", tn.readKey, query([]any{"contains", "event:page", []string{n}}), nil},
		{"query page matches", 200, 0, "q", "POST", "/v1/sites/web/query", tn.readKey, query([]any{"matches", "event:page", []string{n}}), nil},
		{"query goal is", 400, 0, "q", "POST", "/v1/sites/web/query", tn.readKey, query([]any{"is", "event:goal", []string{n}}), nil},
		{"query prop is", 200, 0, "q", "POST", "/v1/sites/web/query", tn.readKey, query([]any{"is", "event:props:plan", []string{n}}), nil},
		{"query NUL prop is", 200, 0, "q", "POST", "/v1/sites/web/query", tn.readKey, query([]any{"is", "event:props:" + n, []string{"v"}}), nil},
		{"query prop contains", 200, 0, "q", "POST", "/v1/sites/web/query", tn.readKey, query([]any{"contains", "event:props:plan", []string{n}}), nil},
		{"query source is", 200, 0, "q", "POST", "/v1/sites/web/query", tn.readKey, query([]any{"is", "visit:source", []string{n}}), nil},
		{"query browser is", 200, 0, "q", "POST", "/v1/sites/web/query", tn.readKey, query([]any{"is", "visit:browser", []string{n}}), nil},
		{"plausible query", 200, 0, "q", "POST", "/api/v2/query", tn.readKey, map[string]any{"site_id": "web", "metrics": []string{"visitors"}, "date_range": "all", "filters": []any{[]any{"is", "event:page", []string{n}}}}, nil},
		{"plausible query site", 404, 0, "q", "POST", "/api/v2/query", tn.readKey, map[string]any{"site_id": n, "metrics": []string{"visitors"}, "date_range": "all"}, nil},
		{"workspace name", 201, 0, "q", "POST", "/v1/workspaces", testAdminToken, map[string]any{"name": n, "slug": "nul"}, nil},
		{"workspace slug", 400, 0, "q", "POST", "/v1/workspaces", testAdminToken, map[string]any{"name": "x", "slug": n}, nil},
		{"workspace rename", 200, 0, "q", "PATCH", "/v1/workspaces/acme", testAdminToken, map[string]any{"name": n}, nil},
		{"site name", 201, 0, "q", "POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": "nulsite", "name": n}, nil},
		{"site id", 400, 0, "q", "POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": n, "name": "x"}, nil},
		{"site rename", 200, 0, "q", "PATCH", "/v1/sites/web", testAdminToken, map[string]any{"name": n}, nil},
		{"site alias", 400, 0, "q", "PATCH", "/v1/sites/web", testAdminToken, map[string]any{"aliases": []string{n}}, nil},
		{"key label", 201, 0, "q", "POST", "/v1/workspaces/acme/keys", testAdminToken, map[string]any{"label": n, "scopes": []string{"admin"}}, nil},
		{"goal", 201, 0, "q", "POST", "/v1/sites/web/goals", tn.adminKey, map[string]any{"name": n, "event_name": "signup"}, nil},
		{"goal page", 201, 0, "q", "POST", "/v1/sites/web/goals", tn.adminKey, map[string]any{"name": "g", "page_path": "/" + n}, nil},
		// The goal is stored as "a\uFFFDb" on PostgreSQL: the funnel
		// names it by its stored name there.
		{"funnel", 200, 400, "q", "POST", "/v1/sites/web/funnel", tn.readKey, map[string]any{"date_range": "all", "steps": []string{n, "g"}}, nil},
		{"audit", 200, 0, "q", "GET", "/v1/workspaces/acme/audit", testAdminToken, nil, nil},
	}
	accepted := 0
	for _, tt := range tests {
		if tt.side == "" {
			fix()
			continue
		}
		h.clock.Advance(time.Second)
		var r response
		if tt.side == "c" {
			r = h.c(tt.method, tt.path, tt.token, tt.body, tt.headers...)
		} else {
			r = h.q(tt.method, tt.path, tt.token, tt.body, tt.headers...)
		}
		want := tt.want
		if h.url != "" && tt.wantPG != 0 {
			want = tt.wantPG
		}
		if r.status != want {
			t.Errorf("%s: got %d %s, want %d", tt.name, r.status, r.body, want)
		}
		var a struct{ Accepted int }
		if r.status < 300 && json.Unmarshal(r.body, &a) == nil {
			accepted += a.Accepted
		}
	}
	// Every event answered as stored is there.
	if n := h.count(`SELECT COUNT(*) FROM events WHERE site_id = 'web'`); n != accepted {
		t.Errorf("got %d events stored, want the %d answered accepted", n, accepted)
	}
}

// TestNulGDPR: a subject id with NUL is exported and erased on each
// backend as it was stored (docs/postgresql.md#text-with-nul-and-invalid-utf-8).
func TestNulGDPR(t *testing.T) {
	t.Parallel()
	h, tn := gdprFixture(t)
	const n = "a\u0000b"
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 100, map[string]any{"anon_id": n, "user_id": n}), "User-Agent", chromeUA))
	for _, subject := range []map[string]any{{"user_id": n}, {"anon_id": n}} {
		r := gdpr(h, "export", tn.adminKey, map[string]any{"subject": subject})
		mustStatus(t, r, 200, "")
		if got := r.json(t)["counts"].(map[string]any)["events"]; got != 1.0 {
			t.Errorf("export %v: got %v events, want 1", subject, got)
		}
	}
	r := gdpr(h, "delete", tn.adminKey, map[string]any{"subject": map[string]any{"user_id": n}})
	mustStatus(t, r, 200, "")
	if got := r.json(t)["counts"].(map[string]any)["events"]; got != 1.0 {
		t.Errorf("delete: got %v events, want 1", got)
	}
}

// TestMigrateToCopiesNul: tally migrate-to copies a SQLite file's text
// with NUL as PostgreSQL's intake would have stored it, U+FFFD, rather
// than fail the copy (docs/postgresql.md#text-with-nul-and-invalid-utf-8).
func TestMigrateToCopiesNul(t *testing.T) {
	t.Parallel()
	dbtest.OnlySQLite(t, "the source of the copy is a SQLite file")
	url := dbtest.SharedDatabase(t, "")
	path := filepath.Join(t.TempDir(), "src.db")
	h := newHarnessAt(t, path)
	h.setupTenant("acme", "web")
	const n = "a\u0000b"
	mustStatus(t, h.q("PATCH", "/v1/sites/web", testAdminToken, map[string]any{"name": n}), 200, "")
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, map[string]any{"anon_id": n, "user_id": n, "url": "https://example.test/" + n,
		"properties": map[string]any{"plan": n, n: "v"}}), "User-Agent", chromeUA))
	h.stop()
	checks, err := storage.CopyToPostgres(context.Background(), path, url, nil)
	if err != nil {
		t.Fatalf("copy: got %v, want none", err)
	}
	for _, c := range checks {
		if !c.OK() {
			t.Errorf("%s: got %+v, want equal counts and sums", c.Table, c)
		}
	}
	ctx := context.Background()
	pg, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(ctx)
	var anon, site, plan, key string
	if err := pg.QueryRow(ctx, `SELECT e.anon_id, s.name, e.props->>'plan', e.props->>('a' || chr(65533) || 'b') FROM events e JOIN sites s ON s.id = e.site_id`).Scan(&anon, &site, &plan, &key); err != nil {
		t.Fatal(err)
	}
	if want := "a\uFFFDb"; anon != want || site != want || plan != want || key != "v" {
		t.Errorf("got anon_id %q, site name %q, props plan %q and key %q, want %q thrice and \"v\"", anon, site, plan, key, want)
	}
}

// TestMigrateToMergesKeysEqualOnPostgres: rows that are distinct keys on
// SQLite but one once their text is stored as PostgreSQL stores it (NUL
// and bytes not UTF-8 as U+FFFD) are merged by the copy as intake on
// PostgreSQL would have merged them, rather than fail it: rollups summed,
// user profiles' traits merged, other rows kept once; the checks count
// the merged rows (docs/postgresql.md#moving-from-sqlite-to-postgresql).
func TestMigrateToMergesKeysEqualOnPostgres(t *testing.T) {
	t.Parallel()
	dbtest.OnlySQLite(t, "the source of the copy is a SQLite file")
	url := dbtest.SharedDatabase(t, "")
	path := filepath.Join(t.TempDir(), "src.db")
	h := newHarnessAt(t, path)
	tn := h.setupTenant("acme", "web")
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("web:"))
	for i, m := range []map[string]any{
		{"type": "track", "anonymousId": "a", "event": "\u0000"},
		{"type": "track", "anonymousId": "a", "event": "\uFFFD"},
		{"type": "page", "anonymousId": "a", "properties": map[string]any{"url": "https://example.test/\u0000"}},
		{"type": "page", "anonymousId": "a", "properties": map[string]any{"url": "https://example.test/\uFFFD"}},
		{"type": "identify", "anonymousId": "a", "userId": "u\u0000", "traits": map[string]any{"plan": "pro"}},
		{"type": "identify", "anonymousId": "a", "userId": "u\uFFFD", "traits": map[string]any{"seats": 3}},
	} {
		h.clock.Advance(time.Second)
		m["messageId"] = fmt.Sprintf("m%d", i)
		r := h.c("POST", "/v1/batch", "", map[string]any{"batch": []any{m}}, "Authorization", basic)
		mustStatus(t, r, 200, "")
	}
	for _, name := range []string{"g\u0000", "g\uFFFD"} {
		mustStatus(t, h.q("POST", "/v1/sites/web/goals", tn.adminKey, map[string]any{"name": name, "event_name": "signup"}), 201, "")
	}
	// A row of an earlier version, whose intake kept bytes not UTF-8.
	if _, err := h.sqlDB().Exec(`INSERT INTO user_profiles(site_id, user_id, traits, created_at, updated_at)
		VALUES ('web', ?, '{"old":true}', '2025-01-01T00:00:00.000Z', '2025-01-01T00:00:00.000Z')`, "u\xff"); err != nil {
		t.Fatal(err)
	}
	h.op.Close()
	h.stop()

	checks, err := storage.CopyToPostgres(context.Background(), path, url, nil)
	if err != nil {
		t.Fatalf("copy: got %v, want none", err)
	}
	merged := map[string]int64{}
	for _, c := range checks {
		merged[c.Table] = c.Merged
		if !c.OK() {
			t.Errorf("%s: got %+v, want equal counts (merged rows aside) and sums", c.Table, c)
		}
	}
	for table, want := range map[string]int64{"daily_events_slots": 1, "daily_dimensions_slots": 1, "user_profiles": 2, "identity_links": 1, "goals": 1, "events": 0} {
		if merged[table] != want {
			t.Errorf("%s: got %d rows merged, want %d", table, merged[table], want)
		}
	}
	ctx := context.Background()
	pg, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(ctx)
	var count int
	if err := pg.QueryRow(ctx, `SELECT count FROM daily_events WHERE site_id = 'web' AND type = chr(65533)`).Scan(&count); err != nil || count != 2 {
		t.Errorf("daily_events of U+FFFD: got %d, %v, want 2", count, err)
	}
	var traits, created string
	if err := pg.QueryRow(ctx, `SELECT traits, created_at FROM user_profiles WHERE site_id = 'web' AND user_id = 'u' || chr(65533)`).Scan(&traits, &created); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"plan":"pro"`, `"seats":3`, `"old":true`} {
		if !strings.Contains(traits, k) {
			t.Errorf("merged profile: got traits %s, want %s among them", traits, k)
		}
	}
	if created != "2025-01-01T00:00:00.000Z" {
		t.Errorf("merged profile: got created_at %s, want the earliest", created)
	}
}
