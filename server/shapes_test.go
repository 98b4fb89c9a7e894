package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tally-analytics/tally/internal/dbtest"
	"github.com/tally-analytics/tally/schema"
	"github.com/tally-analytics/tally/storage"
)

var updateShapes = flag.Bool("update", false, "rewrite testdata/shapes.golden from today's answers")

// shapesGolden describes the wire shape of every endpoint's answer.
const shapesGolden = "testdata/shapes.golden"

// shapeCase is one request whose answer's shape is pinned. Path, body and
// headers may name {var}s saved from earlier answers.
type shapeCase struct {
	api     string // "c" collector, "q" query API
	method  string
	path    string
	token   string
	body    any
	headers []string
	status  int
	// alias also sends the request without its /v1 prefix (it must be a
	// read) and requires the same status and shape.
	alias bool
	// sqliteOnly: the endpoint is refused on PostgreSQL by design
	// (docs/postgresql.md#on-postgresql); its shape is SQLite's.
	sqliteOnly bool
	// save records top-level string or number fields of the answer as
	// {var}s: var name -> field.
	save map[string]string
	// build, when set, makes the body and headers once the vars are known.
	build func(vars map[string]string) (body any, headers []string)
}

// TestResponseShapes pins the JSON structure of every answer, errors
// included: the set of key paths and the JSON type at each (array elements
// merged), checked against testdata/shapes.golden. Values that vary (ids,
// times) do not count; a field renamed, dropped, added, or turned from a
// value into null (or back) does. Regenerate with -update only when the
// wire contract changes on purpose.
func TestResponseShapes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	planPath := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(planPath, []byte(`{"mode":"quarantine","events":{"purchase":{"type":"object","required":["properties"]},"*":{"type":"object"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	plan, err := schema.LoadPlan(planPath)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *Config) { c.Plan, c.PlanPath, c.DebugFeedSize = plan, planPath, 100 })
	tn := h.setupTenant("acme", "web")
	importHistory(t, h.db, "web", "2026-01-30", 2)

	mapData := base64.StdEncoding.EncodeToString([]byte(`{"version":3,"sources":["app.ts"],"mappings":"AAAA"}`))
	const ua = "User-Agent"
	const today = "from=2026-01-31&to=2026-01-31"
	cases := []shapeCase{
		// Collector.
		{api: "c", method: "GET", path: "/v1/healthz", status: 200, alias: true},
		{api: "c", method: "GET", path: "/v1/metrics", status: 200, alias: true},
		{api: "c", method: "GET", path: "/v1/script.js", status: 200},
		{api: "c", method: "OPTIONS", path: "/v1/events", status: 204},
		{api: "c", method: "POST", path: "/v1/events", token: "web", status: 202, headers: []string{ua, chromeUA},
			body: ev("web", 1, map[string]any{"ts": "2026-01-31T08:00:00Z", "user_id": "u1", "referrer": "https://ref.test/x", "properties": map[string]any{"k": "v"}})},
		{api: "c", method: "POST", path: "/events", token: "web", status: 202, headers: []string{ua, chromeUA},
			body: []any{
				ev("web", 2, map[string]any{"type": "identify", "user_id": "u1", "traits": map[string]any{"plan": "pro"}}),
				ev("web", 3, map[string]any{"type": "purchase", "user_id": "u1"}), // quarantined: no properties
				ev("web", 4, map[string]any{"consent": "denied"}),
			}},
		{api: "c", method: "POST", path: "/v1/events", token: "web", status: 202, headers: []string{ua, chromeUA},
			build: func(map[string]string) (any, []string) {
				h.clock.Advance(time.Second) // a second DLQ row, a second later: the list has a next page
				return ev("web", 9, map[string]any{"type": "purchase"}), []string{ua, chromeUA}
			}},
		{api: "c", method: "POST", path: "/v1/s2s/events", token: "web", status: 202,
			body: ev("web", 5, map[string]any{"anon_id": "anon-2", "user_agent": chromeUA})},
		{api: "c", method: "POST", path: "/v1/events", token: "web", status: 202, headers: []string{ua, "Googlebot/2.1"},
			body: ev("web", 6, nil)},
		// An identify whose trait the profile cannot take: traits_dropped.
		{api: "c", method: "POST", path: "/v1/s2s/events", token: "web", status: 202,
			body: ev("web", 90, map[string]any{"type": "identify", "user_id": "u1", "user_agent": chromeUA,
				"traits": map[string]any{"plan": strings.Repeat("x", storage.MaxProfileBytes)}})},
		{api: "c", method: "POST", path: "/v1/events", token: "web", status: 400, headers: []string{ua, chromeUA},
			body: ev("web", 7, map[string]any{"anon_id": nil})},
		{api: "c", method: "POST", path: "/v1/events", token: "nope", status: 401, body: ev("web", 8, nil)},
		// Segment's HTTP Tracking API
		// (docs/intake.md#segment-compatible-intake).
		{api: "c", method: "POST", path: "/v1/batch", status: 200, body: map[string]any{"writeKey": "web", "batch": []any{
			map[string]any{"type": "track", "anonymousId": "anon-s", "event": "Order Completed", "properties": map[string]any{"revenue": 49},
				"context": map[string]any{"userAgent": chromeUA}},
			map[string]any{"type": "page"}}}},
		{api: "c", method: "POST", path: "/v1/track", status: 400, body: map[string]any{"writeKey": "web", "anonymousId": "anon-s"}},
		{api: "c", method: "GET", path: "/v1/projects/web/settings", status: 200},
		{api: "c", method: "GET", path: "/v1/projects/nope/settings", status: 401},
		{api: "c", method: "GET", path: "/v1/nowhere", status: 404},

		// Tenancy.
		{api: "q", method: "GET", path: "/v1/healthz", status: 200, alias: true},
		{api: "q", method: "GET", path: "/v1/workspaces", token: testAdminToken, status: 200, alias: true},
		{api: "q", method: "POST", path: "/workspaces", token: testAdminToken, status: 201, body: map[string]any{"name": "Beta", "slug": "beta"}},
		{api: "q", method: "POST", path: "/v1/workspaces", token: testAdminToken, status: 409, body: map[string]any{"name": "Beta", "slug": "beta"}},
		{api: "q", method: "GET", path: "/v1/workspaces/acme", token: testAdminToken, status: 200, alias: true},
		{api: "q", method: "PATCH", path: "/v1/workspaces/acme", token: testAdminToken, status: 200, body: map[string]any{"name": "Acme Inc"}},
		{api: "q", method: "PUT", path: "/v1/workspaces/acme", token: testAdminToken, status: 405},
		{api: "q", method: "POST", path: "/v1/workspaces/acme/sites", token: testAdminToken, status: 201, body: map[string]any{"id": "shop", "name": "Shop"}},
		{api: "q", method: "GET", path: "/v1/workspaces/acme/sites", token: testAdminToken, status: 200, alias: true},
		{api: "q", method: "PATCH", path: "/v1/sites/shop", token: testAdminToken, status: 200, alias: true, body: map[string]any{"retention_days": 30}},
		{api: "q", method: "PATCH", path: "/v1/sites/shop", token: testAdminToken, status: 400, body: map[string]any{"retention_days": -1}},
		{api: "q", method: "POST", path: "/v1/workspaces/acme/keys", token: testAdminToken, status: 201,
			body: map[string]any{"label": "dash", "scopes": []string{"query:read"}}, save: map[string]string{"key": "id"}},
		{api: "q", method: "POST", path: "/v1/workspaces/acme/keys", token: testAdminToken, status: 201,
			body: map[string]any{"label": "web only", "scopes": []string{"ingest:write"}, "sites": []string{"web"}}},
		{api: "q", method: "GET", path: "/v1/workspaces/acme/keys", token: tn.adminKey, status: 200, alias: true},
		{api: "q", method: "GET", path: "/v1/workspaces/acme/keys", token: tn.readKey, status: 403},

		// Tracking plan and the DLQ.
		{api: "q", method: "POST", path: "/v1/plan/reload", token: testAdminToken, status: 200},

		// Backup.
		{api: "q", method: "POST", path: "/v1/backup", token: testAdminToken, status: 200, body: map[string]any{}, sqliteOnly: true},
		{api: "q", method: "POST", path: "/v1/backup", token: testAdminToken, status: 400, body: map[string]any{"path": filepath.Join(dir, "backup.db")}, sqliteOnly: true},
		{api: "q", method: "GET", path: "/v1/sites/web/dlq", token: tn.adminKey, status: 200, alias: true},
		{api: "q", method: "GET", path: "/v1/sites/web/dlq?limit=1", token: tn.adminKey, status: 200},
		{api: "q", method: "POST", path: "/v1/sites/web/dlq/" + eventID(3) + "/replay", token: tn.adminKey, status: 200},

		// Reads.
		{api: "q", method: "GET", path: "/v1/sites/web/pageviews?" + today, token: tn.readKey, status: 200, alias: true},
		{api: "q", method: "GET", path: "/v1/sites/web/events?" + today, token: tn.readKey, status: 200, alias: true},
		{api: "q", method: "GET", path: "/v1/sites/web/sessions?" + today, token: tn.readKey, status: 200, alias: true},
		{api: "q", method: "GET", path: "/v1/sites/web/users/u1/timeline", token: tn.readKey, status: 200, alias: true},
		{api: "q", method: "GET", path: "/v1/sites/web/users/u1/timeline?limit=1", token: tn.readKey, status: 200},
		{api: "q", method: "GET", path: "/v1/sites/web/breakdown?dimension=url&" + today, token: tn.readKey, status: 200},
		{api: "q", method: "GET", path: "/v1/sites/web/breakdown?dimension=country&" + today, token: tn.readKey, status: 200},
		{api: "q", method: "GET", path: "/v1/sites/web/pageviews?from=2026-02-01&" + "to=2026-01-01", token: tn.readKey, status: 400},
		{api: "q", method: "GET", path: "/v1/sites/web/realtime", token: tn.readKey, status: 200},
		{api: "q", method: "GET", path: "/v1/sites/web/properties", token: tn.readKey, status: 200},
		{api: "q", method: "GET", path: "/v1/sites/web", token: tn.readKey, status: 200},
		{api: "q", method: "GET", path: "/v1/sites/web/export?format=ndjson&" + today, token: tn.readKey, status: 200},
		{api: "q", method: "GET", path: "/v1/sites/web/export?format=csv&" + today, token: tn.readKey, status: 200},
		{api: "q", method: "GET", path: "/v1/sites/web/export?" + today, token: tn.readKey, status: 400},

		// Query API (Plausible's Stats API v2).
		{api: "q", method: "POST", path: "/v1/sites/web/query", token: tn.readKey, status: 200,
			body: map[string]any{"metrics": []string{"visitors", "pageviews"}, "date_range": []string{"2026-01-31", "2026-01-31"}, "dimensions": []string{"time:hour", "event:page"},
				"filters": []any{[]any{"is_not", "event:page", []string{"/x"}}}, "include": map[string]any{"total_rows": true, "time_labels": true}}},
		{api: "q", method: "POST", path: "/api/v2/query", token: tn.readKey, status: 200,
			body: map[string]any{"site_id": "web", "metrics": []string{"visits", "bounce_rate"}, "date_range": "day", "dimensions": []string{"visit:source"},
				"include": map[string]any{"comparisons": map[string]any{"mode": "previous_period"}}, "pagination": map[string]any{"limit": 5}}},
		{api: "q", method: "POST", path: "/v1/sites/web/query", token: tn.readKey, status: 400,
			body: map[string]any{"metrics": []string{"scroll_depth"}, "date_range": "7d"}},

		// Goals and funnels.
		{api: "q", method: "POST", path: "/v1/sites/web/goals", token: tn.adminKey, status: 201,
			body: map[string]any{"name": "Home", "page_path": "/"}, save: map[string]string{"goal_id": "id"}},
		{api: "q", method: "POST", path: "/v1/sites/web/goals", token: tn.adminKey, status: 201,
			body: map[string]any{"name": "Pro purchase", "event_name": "purchase", "property": map[string]any{"name": "plan", "value": "pro"}, "currency": "EUR"}},
		{api: "q", method: "POST", path: "/v1/sites/web/goals", token: tn.adminKey, status: 409,
			body: map[string]any{"name": "Home", "event_name": "x"}},
		{api: "q", method: "POST", path: "/v1/sites/web/goals", token: tn.adminKey, status: 400,
			body: map[string]any{"name": "x"}},
		{api: "q", method: "GET", path: "/v1/sites/web/goals", token: tn.readKey, status: 200},
		{api: "q", method: "POST", path: "/v1/sites/web/query", token: tn.readKey, status: 200,
			body: map[string]any{"metrics": []string{"visitors", "conversion_rate", "total_revenue"}, "date_range": "day", "dimensions": []string{"event:goal"}}},
		{api: "q", method: "POST", path: "/v1/sites/web/funnel", token: tn.readKey, status: 200,
			body: map[string]any{"steps": []string{"Home", "Pro purchase"}, "date_range": "day"}},
		{api: "q", method: "POST", path: "/v1/sites/web/funnel", token: tn.readKey, status: 400,
			body: map[string]any{"steps": []string{"Home"}, "date_range": "day"}},
		{api: "q", method: "DELETE", path: "/v1/sites/web/goals/{goal_id}", token: tn.adminKey, status: 204},

		// Saved funnels (docs/query-api.md#saved-funnels).
		{api: "q", method: "POST", path: "/v1/sites/web/goals", token: tn.adminKey, status: 201,
			body: map[string]any{"name": "Signup", "event_name": "Signup"}},
		{api: "q", method: "POST", path: "/v1/sites/web/goals", token: tn.adminKey, status: 201,
			body: map[string]any{"name": "Landing", "page_path": "/landing"}},
		{api: "q", method: "POST", path: "/v1/sites/web/funnels", token: tn.adminKey, status: 201,
			body: map[string]any{"name": "Signups", "steps": []any{"Landing", "Signup"}}, save: map[string]string{"funnel_id": "id"}},
		{api: "q", method: "POST", path: "/v1/sites/web/funnels", token: tn.adminKey, status: 400,
			body: map[string]any{"name": "x", "steps": []any{"Landing"}}},
		{api: "q", method: "GET", path: "/v1/sites/web/funnels", token: tn.readKey, status: 200},
		{api: "q", method: "PATCH", path: "/v1/sites/web/funnels/{funnel_id}", token: tn.adminKey, status: 200,
			body: map[string]any{"name": "Sign-ups"}},
		{api: "q", method: "DELETE", path: "/v1/sites/web/funnels/{funnel_id}", token: tn.adminKey, status: 204},

		// Saved segments (docs/query-api.md#saved-segments).
		{api: "q", method: "POST", path: "/v1/sites/web/segments", token: tn.adminKey, status: 201,
			body: map[string]any{"name": "DE", "type": "site", "segment_data": map[string]any{"filters": []any{[]any{"is", "visit:country", []string{"DE"}}}, "labels": map[string]any{"DE": "Germany"}}},
			save: map[string]string{"segment_id": "id"}},
		{api: "q", method: "POST", path: "/v1/sites/web/segments", token: testAdminToken, status: 201,
			body: map[string]any{"name": "Mine", "type": "personal", "segment_data": map[string]any{"filters": []any{[]any{"is", "visit:country", []string{"FR"}}}}}},
		{api: "q", method: "POST", path: "/v1/sites/web/segments", token: tn.adminKey, status: 400,
			body: map[string]any{"name": "x", "type": "site", "segment_data": map[string]any{"filters": []any{[]any{"is", "visit:nope", []string{"x"}}}}}},
		{api: "q", method: "GET", path: "/v1/sites/web/segments", token: testAdminToken, status: 200},
		{api: "q", method: "GET", path: "/v1/sites/web/segments/{segment_id}", token: tn.readKey, status: 200},
		{api: "q", method: "PATCH", path: "/v1/sites/web/segments/{segment_id}", token: testAdminToken, status: 200,
			body: map[string]any{"name": "Germany"}},
		{api: "q", method: "POST", path: "/v1/sites/web/query", token: tn.readKey, status: 200,
			build: func(v map[string]string) (any, []string) {
				return map[string]any{"metrics": []string{"visitors"}, "date_range": "day", "filters": []any{[]any{"is", "segment", []any{json.Number(v["segment_id"])}}}}, nil
			}},
		{api: "q", method: "POST", path: "/api/v2/query", token: tn.readKey, status: 400,
			body: map[string]any{"site_id": "web", "metrics": []string{"visitors"}, "date_range": "day", "filters": []any{[]any{"is", "segment", []int{999999}}}}},
		{api: "q", method: "DELETE", path: "/v1/sites/web/segments/{segment_id}", token: tn.adminKey, status: 204},

		// Imported history (docs/import.md).
		{api: "q", method: "POST", path: "/v1/sites/web/query", token: tn.readKey, status: 200,
			body: map[string]any{"metrics": []string{"visitors"}, "date_range": "7d", "include": map[string]any{"imports": true}}},
		{api: "q", method: "POST", path: "/v1/sites/web/query", token: tn.readKey, status: 200,
			body: map[string]any{"metrics": []string{"visitors"}, "date_range": "7d", "dimensions": []string{"visit:city"}, "include": map[string]any{"imports": true}}},
		{api: "q", method: "GET", path: "/v1/sites/web/imports", token: tn.readKey, status: 200},

		// Sourcemaps.
		{api: "q", method: "POST", path: "/v1/sites/web/sourcemaps", token: "web", status: 201,
			body: map[string]any{"release": "1.0", "file": "app.min.js", "map": mapData}},
		{api: "q", method: "DELETE", path: "/v1/sites/web/sourcemaps?release=1.0", token: tn.adminKey, status: 200},

		// Webhooks.
		{api: "q", method: "POST", path: "/v1/sites/web/webhook-secrets", token: tn.adminKey, status: 201,
			body: map[string]any{"adapter": "payments"}, save: map[string]string{"secret_id": "id", "secret": "secret"}},
		{api: "q", method: "GET", path: "/v1/sites/web/webhook-secrets", token: tn.adminKey, status: 200},
		{api: "q", method: "POST", path: "/v1/webhooks/payments/web", status: 200,
			build: func(vars map[string]string) (any, []string) {
				body := chargeEvent("evt_1", map[string]any{"anon_id": "anon-1", "user_id": "u1"})
				return body, []string{"Payments-Signature", signed(body, vars["secret"], h.clock.Now())}
			}},
		{api: "q", method: "DELETE", path: "/v1/sites/web/webhook-secrets/{secret_id}", token: tn.adminKey, status: 204},

		// GDPR.
		{api: "q", method: "POST", path: "/v1/sites/web/gdpr/export", token: tn.adminKey, status: 200,
			body: map[string]any{"subject": map[string]any{"user_id": "u1"}}},
		{api: "q", method: "POST", path: "/sites/web/gdpr/export", token: tn.adminKey, status: 200,
			body: map[string]any{"subject": map[string]any{"anon_id": "anon-2"}}},
		{api: "q", method: "POST", path: "/v1/sites/web/gdpr/delete", token: tn.adminKey, status: 200,
			body: map[string]any{"subject": map[string]any{"anon_id": "anon-2"}}},
		{api: "q", method: "POST", path: "/v1/sites/web/gdpr/delete", token: tn.adminKey, status: 400,
			body: map[string]any{"subject": map[string]any{}}},

		// Deletions, the audit log, dev mode.
		{api: "q", method: "DELETE", path: "/v1/workspaces/acme/keys/{key}", token: tn.adminKey, status: 204},
		{api: "q", method: "DELETE", path: "/v1/workspaces/acme/sites/shop", token: testAdminToken, status: 204},
		{api: "q", method: "GET", path: "/v1/workspaces/acme/audit", token: tn.adminKey, status: 200, alias: true},
		{api: "q", method: "GET", path: "/v1/workspaces/acme/audit?limit=1", token: tn.adminKey, status: 200},
		{api: "q", method: "POST", path: "/v1/debug/faults", status: 200, body: map[string]any{"delay_ms": 1, "site_id": "web"}},
		{api: "c", method: "POST", path: "/v1/events", token: "web", status: 202, body: ev("web", 9, nil)},
		{api: "q", method: "POST", path: "/v1/debug/faults", status: 200, body: map[string]any{"status": 503, "count": 2}},
		{api: "c", method: "POST", path: "/v1/events", token: "web", status: 503, body: ev("web", 10, nil)},
		{api: "q", method: "GET", path: "/v1/debug/faults", status: 200},
		{api: "q", method: "DELETE", path: "/v1/debug/faults", status: 200},
		{api: "q", method: "POST", path: "/v1/debug/faults", status: 400, body: map[string]any{"status": 404}},
		{api: "q", method: "POST", path: "/v1/debug/sites", status: 201, body: "{}", save: map[string]string{"throwaway": "site_id"}},
		{api: "q", method: "DELETE", path: "/v1/debug/sites/{throwaway}", status: 204},
		{api: "q", method: "GET", path: "/v1/debug/decisions", status: 200},
		{api: "q", method: "GET", path: "/v1/debug/decisions?property.k=v&min=1&wait=1s", status: 200},
		{api: "q", method: "GET", path: "/v1/debug/decisions?property.=v", status: 400},
		{api: "q", method: "GET", path: "/v1/debug/decisions?wait=31s", status: 400},
		{api: "q", method: "GET", path: "/v1/debug/summary?site_id=web&min=1&wait=1s", status: 200},
		{api: "q", method: "POST", path: "/v1/debug/reset", status: 200, body: map[string]any{"site_id": "web"}},
		{api: "q", method: "POST", path: "/v1/debug/reset", status: 200, body: "{}"},
		{api: "q", method: "GET", path: "/", status: 200},
		{api: "q", method: "GET", path: "/v1/ui/missing.js", status: 404},

		// Imports (docs/import.md).
		{api: "q", method: "POST", path: "/v1/sites/web/imports", token: tn.adminKey, status: 200,
			body: `{"source":"goatcounter","files":["a.csv"]}` + "\n" +
				`{"id":"i1","type":"pageview","ts":"2026-01-30T10:00:00Z","anon_id":"s1","url":"/a"}` + "\n" +
				`{"end":{"rows":1,"skipped":0}}` + "\n"},
		{api: "q", method: "POST", path: "/v1/sites/web/imports", token: tn.adminKey, status: 400, body: `{"source":"matomo"}`},
		{api: "q", method: "POST", path: "/v1/sites/web/imports/goatcounter?file=gc.csv", token: tn.adminKey, status: 200,
			body: "2Path,Title,Event,UserAgent,Browser,System,Session,Bot,Referrer,Referrer scheme,Screen size,Location,FirstVisit,Date\n" +
				"/,Home,false,,Firefox 123,Linux,s1,0,,,,DE,true,2026-01-30T10:00:00Z\n"},
		{api: "q", method: "POST", path: "/v1/sites/web/imports/goatcounter", token: tn.adminKey, status: 400, body: "a,b\n"},
		{api: "q", method: "POST", path: "/v1/sites/web/imports/matomo", token: tn.adminKey, status: 404, body: "a,b\n"},

		// Accounts (docs/accounts.md).
		{api: "q", method: "POST", path: "/v1/users", token: testAdminToken, status: 201,
			body: map[string]any{"email": "ana@example.com", "role": "owner", "workspace": "acme", "password": "correct horse battery"}},
		{api: "q", method: "POST", path: "/v1/users", token: testAdminToken, status: 201,
			body: map[string]any{"email": "bo@example.com", "role": "viewer", "workspace": "acme"}, save: map[string]string{"bo": "id"}},
		{api: "q", method: "POST", path: "/v1/users", token: testAdminToken, status: 409,
			body: map[string]any{"email": "BO@example.com", "role": "viewer", "workspace": "acme"}},
		{api: "q", method: "POST", path: "/v1/users/password-link", token: testAdminToken, status: 200, body: map[string]any{"email": "bo@example.com"}},
		{api: "q", method: "POST", path: "/v1/auth/signin", status: 200, body: map[string]any{"email": "ana@example.com", "password": "correct horse battery"}},
		{api: "q", method: "POST", path: "/v1/auth/signin", status: 401, body: map[string]any{"email": "ana@example.com", "password": "wrong password"}},
		{api: "q", method: "GET", path: "/v1/auth/session", status: 200, build: func(map[string]string) (any, []string) { return nil, shapeSession(t, h) }},
		{api: "q", method: "GET", path: "/v1/auth/sessions", status: 200, build: func(map[string]string) (any, []string) { return nil, shapeSession(t, h) }},
		{api: "q", method: "GET", path: "/v1/auth/session", status: 401},
		{api: "q", method: "POST", path: "/v1/auth/totp", status: 200, build: func(map[string]string) (any, []string) { return nil, shapeSession(t, h) }},
		{api: "q", method: "POST", path: "/v1/workspaces/acme/invitations", token: tn.adminKey, status: 201,
			body: map[string]any{"email": "cy@example.com", "role": "viewer"}},
		{api: "q", method: "POST", path: "/v1/workspaces/acme/invitations", token: tn.adminKey, status: 201,
			body: map[string]any{"email": "di@example.com", "role": "admin"}, save: map[string]string{"invitation": "id"}},
		{api: "q", method: "GET", path: "/v1/workspaces/acme/invitations", token: tn.adminKey, status: 200},
		{api: "q", method: "DELETE", path: "/v1/workspaces/acme/invitations/{invitation}", token: tn.adminKey, status: 204},
		{api: "q", method: "GET", path: "/v1/workspaces/acme/members", token: tn.adminKey, status: 200},
		{api: "q", method: "PATCH", path: "/v1/workspaces/acme/members/{bo}", token: tn.adminKey, status: 200, body: map[string]any{"role": "admin"}},
		{api: "q", method: "PATCH", path: "/v1/workspaces/acme/members/{bo}", token: tn.adminKey, status: 400, body: map[string]any{"role": "boss"}},
		{api: "q", method: "DELETE", path: "/v1/workspaces/acme/members/{bo}", token: tn.adminKey, status: 204},

		// Shared links (docs/sharing.md).
		{api: "q", method: "POST", path: "/v1/sites/web/shared-links", token: tn.adminKey, status: 201,
			body: map[string]any{"label": "Board", "allowed_origins": []string{"https://intranet.example"}}, save: map[string]string{"link_id": "id", "share_token": "token"}},
		{api: "q", method: "POST", path: "/v1/sites/web/shared-links", token: tn.adminKey, status: 400,
			body: map[string]any{"label": "Board", "allowed_origins": []string{"https://intranet.example/x"}}},
		{api: "q", method: "GET", path: "/v1/sites/web/shared-links", token: tn.adminKey, status: 200},
		{api: "q", method: "PATCH", path: "/v1/sites/web/shared-links/{link_id}", token: tn.adminKey, status: 200, body: map[string]any{"label": "Board room"}},
		{api: "q", method: "GET", path: "/v1/share", status: 200, build: func(vars map[string]string) (any, []string) { return nil, []string{shareHeader, vars["share_token"]} }},
		{api: "q", method: "GET", path: "/v1/sites/web", status: 200, build: func(vars map[string]string) (any, []string) { return nil, []string{shareHeader, vars["share_token"]} }},
		{api: "q", method: "GET", path: "/v1/workspaces/acme/keys", status: 404, build: func(vars map[string]string) (any, []string) { return nil, []string{shareHeader, vars["share_token"]} }},
		{api: "q", method: "DELETE", path: "/v1/sites/web/shared-links/{link_id}", token: tn.adminKey, status: 204},

		// Mail (docs/email.md).
		{api: "q", method: "POST", path: "/v1/sites/web/email-reports", token: tn.adminKey, status: 200,
			body: map[string]any{"email": "ana@example.com", "weekly": true}},
		{api: "q", method: "GET", path: "/v1/sites/web/email-reports", token: tn.adminKey, status: 200},
		{api: "q", method: "DELETE", path: "/v1/sites/web/email-reports", token: tn.adminKey, status: 204, body: map[string]any{"email": "ana@example.com"}},
		{api: "q", method: "PUT", path: "/v1/sites/web/traffic-alerts", token: tn.adminKey, status: 200,
			body: map[string]any{"recipients": []string{"ops@example.com"}, "spike_visitors": 100}},
		{api: "q", method: "GET", path: "/v1/sites/web/traffic-alerts", token: tn.adminKey, status: 200},
		{api: "q", method: "PUT", path: "/v1/sites/web/traffic-alerts", token: tn.adminKey, status: 400, body: map[string]any{"recipients": []string{"ops@example.com"}}},
		{api: "q", method: "POST", path: "/v1/auth/password/forgot", status: 503, body: map[string]any{"email": "ana@example.com"}},

		// Draining (docs/operations.md#behind-a-load-balancer): last, as it
		// lasts.
		{api: "c", method: "GET", path: "/v1/healthz", status: 503, build: func(map[string]string) (any, []string) {
			h.srv.Drain()
			return nil, nil
		}},
		{api: "q", method: "GET", path: "/v1/healthz", status: 503},
	}

	vars := map[string]string{}
	expand := func(s string) string {
		for k, v := range vars {
			s = strings.ReplaceAll(s, "{"+k+"}", v)
		}
		return s
	}
	send := func(c shapeCase, path string) response {
		body, headers := c.body, c.headers
		if c.build != nil {
			body, headers = c.build(vars)
		}
		if c.api == "c" {
			return h.c(c.method, expand(path), c.token, body, headers...)
		}
		return h.q(c.method, expand(path), c.token, body, headers...)
	}
	var got strings.Builder
	titles := map[string]int{}
	skipped := map[string]bool{}
	for _, c := range cases {
		listener := map[string]string{"c": "collector", "q": "query"}[c.api]
		title := fmt.Sprintf("%s %s %s", listener, c.method, c.path)
		if titles[title]++; titles[title] > 1 {
			title += fmt.Sprintf(" (#%d)", titles[title])
		}
		if c.sqliteOnly && dbtest.Postgres() {
			skipped[title] = true
			continue
		}
		r := send(c, c.path)
		if r.status != c.status {
			t.Fatalf("%s: got status %d, want %d; body %s", title, r.status, c.status, r.body)
		}
		shape := describeShape(t, r)
		fmt.Fprintf(&got, "== %s -> %d\n%s", title, r.status, shape)
		if c.alias {
			unprefixed := strings.TrimPrefix(c.path, "/v1")
			ra := send(c, unprefixed)
			if sa := describeShape(t, ra); ra.status != r.status || sa != shape {
				t.Errorf("%s: got %d\n%s\nwant %d\n%s(as under /v1)", unprefixed, ra.status, sa, r.status, shape)
			}
		}
		if len(c.save) > 0 {
			m := r.json(t)
			for name, field := range c.save {
				vars[name] = fmt.Sprint(m[field])
			}
		}
	}

	if *updateShapes {
		if dbtest.Postgres() {
			t.Fatal("update the golden file on SQLite: PostgreSQL skips the SQLite-only cases")
		}
		if err := os.MkdirAll(filepath.Dir(shapesGolden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(shapesGolden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(shapesGolden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	gotSections, wantSections := shapeSections(got.String()), shapeSections(string(want))
	for _, title := range slices.Sorted(mapKeys(wantSections, gotSections)) {
		g, okG := gotSections[title]
		w, okW := wantSections[title]
		switch {
		case skipped[strings.SplitN(title, " -> ", 2)[0]]: // a section's title adds its status
		case !okG:
			t.Errorf("%s: no longer requested, want\n%s", title, w)
		case !okW:
			t.Errorf("%s: got\n%s\nwhich %s does not describe", title, g, shapesGolden)
		case g != w:
			t.Errorf("%s: got\n%s\nwant\n%s", title, g, w)
		}
	}
}

// describeShape renders an answer's shape: one line per key path with the
// JSON types seen there, sorted; "(no body)" or the content type when the
// answer is not JSON.
func describeShape(t *testing.T, r response) string {
	t.Helper()
	if len(r.body) == 0 {
		return "(no body)\n"
	}
	body := r.body
	switch ct := r.header.Get("Content-Type"); ct {
	case "application/json":
	case "application/x-ndjson": // one object a line: described as an array of them
		body = []byte("[" + strings.ReplaceAll(strings.TrimSpace(string(body)), "\n", ",") + "]")
	default:
		return "(not JSON: " + ct + ")\n"
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("answer is not JSON: %v: %s", err, r.body)
	}
	// types counts the values of each type seen at a path; objects counts
	// the objects seen at a path, so a key missing from some of them (an
	// omitempty field) shows.
	types := map[string]map[string]int{}
	objects := map[string]int{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		add := func(typ string) {
			if types[path] == nil {
				types[path] = map[string]int{}
			}
			types[path][typ]++
		}
		switch x := v.(type) {
		case map[string]any:
			add("object")
			objects[path]++
			for k, e := range x {
				walk(path+"."+k, e)
			}
		case []any:
			if len(x) == 0 {
				add("array (empty)")
			} else {
				add("array")
			}
			for _, e := range x {
				walk(path+"[]", e)
			}
		case string:
			add("string")
		case json.Number:
			add("number")
		case bool:
			add("bool")
		case nil:
			add("null")
		}
	}
	walk("$", v)
	paths := make([]string, 0, len(types))
	for p := range types {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var b strings.Builder
	for _, p := range paths {
		n := 0
		for _, c := range types[p] {
			n += c
		}
		absent := ""
		if i := strings.LastIndex(p, "."); i > 0 && n < objects[p[:i]] {
			absent = " (absent in some)"
		}
		fmt.Fprintf(&b, "  %s: %s%s\n", p, strings.Join(slices.Sorted(mapKeys(types[p])), "|"), absent)
	}
	return b.String()
}

// shapeSections splits a rendered description by its "== " titles.
func shapeSections(s string) map[string]string {
	out := map[string]string{}
	for _, sec := range strings.Split(s, "== ")[1:] {
		title, body, _ := strings.Cut(sec, "\n")
		out[title] = body
	}
	return out
}

// mapKeys iterates over the keys of every map given, each once.
func mapKeys[V any](ms ...map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		seen := map[string]bool{}
		for _, m := range ms {
			for k := range m {
				if !seen[k] {
					seen[k] = true
					if !yield(k) {
						return
					}
				}
			}
		}
	}
}

// shapeSession signs ana@example.com in and returns the headers of a
// same-origin request with its cookie and CSRF token.
func shapeSession(t *testing.T, h *harness) []string {
	t.Helper()
	r := h.q("POST", "/v1/auth/signin", "", map[string]any{"email": "ana@example.com", "password": "correct horse battery"})
	mustStatus(t, r, 200, "")
	c := sessionCookieOf(r, sessionCookieName)
	return []string{"Cookie", c.Name + "=" + c.Value, csrfHeader, r.json(t)["csrf_token"].(string),
		"Origin", h.query.URL, "Sec-Fetch-Site", "same-origin"}
}
