package server

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tally-analytics/tally/internal/dbtest"
)

// gdprFixture: u1 on devices p and l (l also used by shared-user u2 once),
// and an unrelated visitor z. A quarantined-style DLQ row tagged with u1.
func gdprFixture(t *testing.T) (*harness, tenant) {
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	h.sendAt("web", 1, "p", "pageview", day(2, 10, 0), map[string]any{"user_id": "u1", "url": "https://a.test/?email=u1@x"})
	h.sendAt("web", 2, "p", "identify", day(2, 10, 5), map[string]any{"user_id": "u1", "traits": map[string]any{"email": "u1@x"}})
	h.sendAt("web", 3, "l", "pageview", day(3, 9, 0), nil)
	h.sendAt("web", 4, "l", "pageview", day(3, 9, 10), map[string]any{"user_id": "u1"})
	h.sendAt("web", 5, "z", "pageview", day(3, 9, 0), nil)
	h.sendAt("web", 6, "z", "click", day(4, 12, 0), nil)
	if _, err := h.sqlDB().Exec(`INSERT INTO dlq(id, site_id, payload, error, received_at, anon_id, user_id) VALUES
		('d1', 'web', '{"user_id":"u1"}', '[]', '2026-01-02T00:00:00.000Z', 'p', 'u1'),
		('d2', 'web', '{"note":"mentions u1 only inside"}', '[]', '2026-01-02T00:00:00.000Z', 'q', NULL)`); err != nil {
		t.Fatal(err)
	}
	return h, tn
}

func gdpr(h *harness, action, token string, body any, headers ...string) response {
	h.t.Helper()
	return h.q("POST", "/v1/sites/web/gdpr/"+action, token, body, headers...)
}

func TestGDPRRequestRules(t *testing.T) {
	t.Parallel()
	h, tn := gdprFixture(t)
	for _, action := range []string{"export", "delete"} {
		tests := []struct {
			name    string
			token   string
			body    any
			headers []string
			status  int
			code    string
		}{
			{"both ids", testAdminToken, map[string]any{"subject": map[string]any{"anon_id": "p", "user_id": "u1"}}, nil, 400, "invalid_subject"},
			{"no id", testAdminToken, map[string]any{"subject": map[string]any{}}, nil, 400, "invalid_subject"},
			{"no subject", testAdminToken, map[string]any{}, nil, 400, "invalid_subject"},
			{"empty id", testAdminToken, map[string]any{"subject": map[string]any{"user_id": ""}}, nil, 400, "invalid_subject"},
			{"id not a string", testAdminToken, map[string]any{"subject": map[string]any{"anon_id": 7}}, nil, 400, "invalid_subject"},
			{"subject not an object", testAdminToken, map[string]any{"subject": "u1"}, nil, 400, "invalid_subject"},
			{"malformed json", testAdminToken, `{"subject":`, nil, 400, "invalid_json"},
			{"no json content type", testAdminToken, map[string]any{"subject": map[string]any{"user_id": "u1"}}, []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type"},
			{"over 16 KB", testAdminToken, `{"subject":{"user_id":"` + strings.Repeat("u", 17<<10) + `"}}`, nil, 413, "payload_too_large"},
			{"read key", tn.readKey, map[string]any{"subject": map[string]any{"user_id": "u1"}}, nil, 403, "forbidden"},
			{"no credential", "", map[string]any{"subject": map[string]any{"user_id": "u1"}}, nil, 401, "unauthorized"},
			{"json with charset", tn.adminKey, map[string]any{"subject": map[string]any{"user_id": "nobody"}}, []string{"Content-Type", "application/json; charset=utf-8"}, 200, ""},
		}
		for _, tt := range tests {
			t.Run(action+" "+tt.name, func(t *testing.T) {
				mustStatus(t, gdpr(h, action, tt.token, tt.body, tt.headers...), tt.status, tt.code)
			})
		}
	}
	other := h.setupTenant("bravo", "other")
	mustStatus(t, gdpr(h, "delete", other.adminKey, map[string]any{"subject": map[string]any{"user_id": "u1"}}), 404, "not_found")
	if n := h.count(`SELECT COUNT(*) FROM events`); n != 6 {
		t.Fatalf("got %d events after refused requests, want 6", n)
	}
}

func TestGDPRExport(t *testing.T) {
	t.Parallel()
	h, _ := gdprFixture(t)
	r := gdpr(h, "export", testAdminToken, map[string]any{"subject": map[string]any{"user_id": "u1"}})
	mustStatus(t, r, 200, "")
	body := r.json(t)
	if fmt.Sprint(body["counts"]) != "map[dlq:1 events:4 identity_links:2 sessions:2 user_profiles:1]" || body["site_id"] != "web" ||
		fmt.Sprint(body["subject"]) != "map[user_id:u1]" {
		t.Fatalf("got %v %v %v", body["counts"], body["site_id"], body["subject"])
	}
	e := body["events"].([]any)[0].(map[string]any)
	raw, ok := e["raw"].(map[string]any)
	if !ok || raw["user_id"] != "u1" || e["anon_id"] != "p" || e["user_id"] != "u1" || e["received_at"] == nil || e["device_type"] != "desktop" {
		t.Fatalf("got event row %v, want complete with raw as an object", e)
	}
	profile := body["user_profiles"].([]any)[0].(map[string]any)
	if traits, ok := profile["traits"].(map[string]any); !ok || traits["email"] != "u1@x" {
		t.Fatalf("got profile %v", profile)
	}
	// The DLQ row tagged with u1, which erasure deletes, complete; not the one naming u1 only inside.
	dlq := body["dlq"].([]any)
	if len(dlq) != 1 {
		t.Fatalf("got %d DLQ rows, want d1 only", len(dlq))
	}
	if row := dlq[0].(map[string]any); row["id"] != "d1" || row["user_id"] != "u1" || row["anon_id"] != "p" ||
		fmt.Sprint(row["payload"]) != "map[user_id:u1]" {
		t.Fatalf("got DLQ row %v, want d1 complete with its payload as an object", row)
	}
	byAnon := gdpr(h, "export", testAdminToken, map[string]any{"subject": map[string]any{"anon_id": "z"}}).json(t)
	if fmt.Sprint(byAnon["counts"]) != "map[dlq:0 events:2 identity_links:0 sessions:2 user_profiles:0]" {
		t.Fatalf("by anon: got %v", byAnon["counts"])
	}
	entry := h.q("GET", "/v1/workspaces/acme/audit?limit=2", testAdminToken, nil).json(t)["entries"].([]any)[1].(map[string]any)
	meta := entry["metadata"].(map[string]any)
	if entry["action"] != "gdpr.export" || meta["subject_kind"] != "user_id" || meta["subject_hash"] != hash12("u1") {
		t.Fatalf("got audit %v", entry)
	}
}

func hash12(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:12]
}

func TestGDPRDeleteByUser(t *testing.T) {
	t.Parallel()
	h, tn := gdprFixture(t)
	before := h.q("GET", "/v1/sites/web/sessions?from=2026-01-01&to=2026-01-31", tn.readKey, nil).json(t)
	if before["count"] != float64(4) {
		t.Fatalf("fixture: got %v sessions, want 4", before["count"])
	}
	r := gdpr(h, "delete", tn.adminKey, map[string]any{"subject": map[string]any{"user_id": "u1"}})
	mustStatus(t, r, 200, "")
	if got := fmt.Sprint(r.json(t)["counts"]); got != "map[events:4 identity_links:2 sessions:2 user_profiles:1]" {
		t.Fatalf("got counts %s", got)
	}
	again := gdpr(h, "delete", tn.adminKey, map[string]any{"subject": map[string]any{"user_id": "u1"}})
	if got := fmt.Sprint(again.json(t)["counts"]); got != "map[events:0 identity_links:0 sessions:0 user_profiles:0]" {
		t.Fatalf("repeat: got %s, want zeros", got)
	}
	// Only z remains, and the rollups agree with what remains.
	after := h.q("GET", "/v1/sites/web/sessions?from=2026-01-01&to=2026-01-31", tn.readKey, nil).json(t)
	if after["count"] != float64(2) || after["avg_events"] != float64(1) || after["bounce_rate"] != float64(1) {
		t.Fatalf("sessions after erasure: got %v, want z's two bounces", after)
	}
	pv := h.q("GET", "/v1/sites/web/pageviews?from=2026-01-01&to=2026-01-31", tn.readKey, nil).json(t)
	evs := h.q("GET", "/v1/sites/web/events?from=2026-01-01&to=2026-01-31", tn.readKey, nil).json(t)
	if pv["count"] != float64(1) || fmt.Sprint(evs["by_name"]) != "[map[count:1 name:click] map[count:1 name:pageview]]" {
		t.Fatalf("after erasure: pageviews %v, events %v", pv["count"], evs["by_name"])
	}
	mustStatus(t, h.q("GET", "/v1/sites/web/users/u1/timeline", tn.readKey, nil), 404, "user_not_found")
	// The DLQ row tagged with u1 is gone; the one mentioning u1 only inside its payload stays (docs/gdpr.md).
	if n := h.count(`SELECT COUNT(*) FROM dlq WHERE id = 'd1'`); n != 0 {
		t.Error("tagged DLQ row kept")
	}
	if n := h.count(`SELECT COUNT(*) FROM dlq WHERE id = 'd2'`); n != 1 {
		t.Error("untagged DLQ row deleted")
	}
	// A full dump of the live tables holds no trace of u1 or its devices,
	// except the DLQ payload docs/gdpr.md keeps; the audit log has only hashes.
	cells := dumpTables(t, h)
	if len(cells) < 20 {
		t.Fatalf("got %d cells in the dump: the dump is not reading the tables", len(cells))
	}
	for _, c := range cells {
		if c.value == "p" || c.value == "l" || strings.Contains(c.value, "u1") {
			t.Errorf("%s still holds %q", c.table, c.value)
		}
	}
	entries := h.q("GET", "/v1/workspaces/acme/audit?limit=2", testAdminToken, nil).json(t)["entries"].([]any)
	for _, e := range entries {
		e := e.(map[string]any)
		meta := e["metadata"].(map[string]any)
		if e["action"] != "gdpr.delete" || e["actor_kind"] != "apiKey" || e["actor_id"] != tn.adminKID || meta["subject_hash"] != hash12("u1") {
			t.Errorf("got audit entry %v", e)
		}
	}
}

type cell struct{ table, value string }

// dumpTables returns every value of every row of every table.
func dumpTables(t *testing.T, h *harness) []cell {
	t.Helper()
	db := h.sqlDB()
	tablesSQL := `SELECT name FROM sqlite_master WHERE type = 'table'`
	if dbtest.Postgres() {
		tablesSQL = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`
	}
	rows, err := db.Query(tablesSQL)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	var out []cell
	for _, table := range tables {
		rows, err := db.Query(`SELECT * FROM ` + table)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			rows.Scan(ptrs...)
			if table == "dlq" && fmt.Sprint(vals[0]) == "d2" {
				continue // kept (docs/gdpr.md): the subject appears only inside its payload
			}
			for _, v := range vals {
				if bs, ok := v.([]byte); ok {
					v = string(bs)
				}
				out = append(out, cell{table, fmt.Sprint(v)})
			}
		}
		rows.Close()
	}
	return out
}

func TestGDPRDeleteByAnon(t *testing.T) {
	t.Parallel()
	h, tn := gdprFixture(t)
	r := gdpr(h, "delete", testAdminToken, map[string]any{"subject": map[string]any{"anon_id": "l"}})
	mustStatus(t, r, 200, "")
	// l's two events and its session, its link to u1, and u1's profile (resolved through the link).
	if got := fmt.Sprint(r.json(t)["counts"]); got != "map[events:2 identity_links:1 sessions:1 user_profiles:1]" {
		t.Fatalf("got counts %s", got)
	}
	if n := h.count(`SELECT COUNT(*) FROM events WHERE anon_id = 'p'`); n != 2 {
		t.Errorf("got %d events of p, want p untouched (2)", n)
	}
	tl := h.q("GET", "/v1/sites/web/users/u1/timeline", tn.readKey, nil).json(t)
	if n := len(tl["events"].([]any)); n != 2 {
		t.Errorf("got %d timeline events for u1, want p's 2", n)
	}
	again := gdpr(h, "delete", testAdminToken, map[string]any{"subject": map[string]any{"anon_id": "l"}})
	if got := fmt.Sprint(again.json(t)["counts"]); got != "map[events:0 identity_links:0 sessions:0 user_profiles:0]" {
		t.Fatalf("repeat: got %s", got)
	}
	entry := h.q("GET", "/v1/workspaces/acme/audit?limit=1", testAdminToken, nil).json(t)["entries"].([]any)[0].(map[string]any)
	meta := entry["metadata"].(map[string]any)
	if meta["subject_kind"] != "anon_id" || meta["subject_hash"] != hash12("l") || strings.Contains(fmt.Sprint(entry), `"l"`) {
		t.Fatalf("got audit %v", entry)
	}
}

// linkMany links n made-up anon ids to user on site in one transaction of
// the operator's connection, as 66 batches of events would.
func linkMany(t *testing.T, h *harness, site, user string, n int) {
	t.Helper()
	_, err := h.sqlDB().Exec(`WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < ?)
		INSERT INTO identity_links(site_id, anon_id, user_id, created_at)
		SELECT CAST(? AS TEXT), 'forged-' || (1000000 + i), CAST(? AS TEXT), 1767571200000 FROM k`, n, site, user)
	if err != nil {
		t.Fatal(err)
	}
}

// A user linked to more anon ids than SQLite takes variables (32,766) is
// exported, shown and erased like any other.
func TestGDPRUserLinkedToManyAnonIDs(t *testing.T) {
	t.Parallel()
	h, tn := gdprFixture(t)
	linkMany(t, h, "web", "u1", 50_000)
	subject := map[string]any{"subject": map[string]any{"user_id": "u1"}}

	r := gdpr(h, "export", testAdminToken, subject)
	mustStatus(t, r, 200, "")
	if got := fmt.Sprint(r.json(t)["counts"]); got != "map[dlq:1 events:4 identity_links:50002 sessions:2 user_profiles:1]" {
		t.Fatalf("export: got counts %s, want u1's 4 events and 50,002 links", got)
	}

	// A page of one of u1's 4 events: the page is full, so the next_before
	// check runs over every linked anon id.
	var ids []string
	before := ""
	for range 5 {
		r := h.q("GET", "/v1/sites/web/users/u1/timeline?limit=1"+before, tn.readKey, nil)
		mustStatus(t, r, 200, "")
		body := r.json(t)
		for _, e := range body["events"].([]any) {
			ids = append(ids, e.(map[string]any)["id"].(string))
		}
		if body["next_before"] == nil {
			break
		}
		before = "&before=" + body["next_before"].(string)
	}
	if want := []string{eventID(4), eventID(3), eventID(2), eventID(1)}; fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("timeline: got %v, want %v", ids, want)
	}

	r = gdpr(h, "delete", testAdminToken, subject)
	mustStatus(t, r, 200, "")
	if got := fmt.Sprint(r.json(t)["counts"]); got != "map[events:4 identity_links:50002 sessions:2 user_profiles:1]" {
		t.Fatalf("delete: got counts %s", got)
	}
	if n := h.count(`SELECT COUNT(*) FROM identity_links`); n != 0 {
		t.Fatalf("got %d links left, want 0", n)
	}
	if n := h.count(`SELECT COUNT(*) FROM events`); n != 2 {
		t.Fatalf("got %d events left, want z's 2", n)
	}
	mustStatus(t, h.q("GET", "/v1/sites/web/users/u1/timeline", tn.readKey, nil), 404, "user_not_found")
}

// rollups returns the rollup tables and the remaining events and sessions
// as comparable text.
func rollups(t *testing.T, h *harness) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, q := range map[string]string{
		"daily_events":     `SELECT site_id, day, type, count FROM daily_events ORDER BY 1, 2, 3`,
		"daily_sessions":   `SELECT site_id, day, sessions, duration_ms, events, bounces FROM daily_sessions ORDER BY 1, 2`,
		"daily_dimensions": `SELECT site_id, day, dimension, value, count FROM daily_dimensions ORDER BY 1, 2, 3, 4`,
		"events":           `SELECT id, anon_id, ts FROM events ORDER BY id`,
		"sessions":         `SELECT anon_id, started_at, ended_at, event_count FROM sessions ORDER BY 1, 2`,
	} {
		rows, err := h.sqlDB().Query(q)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		var b strings.Builder
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(&b, vals...)
		}
		rows.Close()
		out[name] = b.String()
	}
	return out
}

// Erasing a user with many events, devices and days (taken in many writer
// jobs) leaves exactly what a server that never saw the user holds: the
// same events, sessions and rollups, and no rollup row of the user's pages
// or referrers at count 0.
func TestGDPRErasureIsExact(t *testing.T) {
	t.Parallel()
	const subjectEvents = 1500 // six times eraseChunk
	others := func(send func(batch []any)) {
		var batch []any
		for i := range 300 {
			anon := fmt.Sprintf("other-%d", i%5)
			batch = append(batch, ev("web", 100_000+i, map[string]any{"anon_id": anon, "type": []string{"pageview", "click"}[i%2],
				"url": "https://a.test/home", "referrer": "https://search.test/q", "ts": day(1+i%10, 8+i%5, i%60).Format(time.RFC3339)}))
		}
		send(batch)
	}
	subject := func(send func(batch []any)) {
		var batch []any
		for i := range subjectEvents {
			anon := fmt.Sprintf("dev-%d", i%7)
			batch = append(batch, ev("web", i, map[string]any{"anon_id": anon, "user_id": "u-many", "type": []string{"pageview", "pageview", "signup"}[i%3],
				"url": fmt.Sprintf("https://a.test/profile/u-many/%d?x=1", i%40), "referrer": "https://u-many-blog.test/post",
				"ts": day(1+i%10, 6+(i/10)%12, i%60).Format(time.RFC3339)}))
			if len(batch) == 500 {
				send(batch)
				batch = nil
			}
		}
	}
	sender := func(h *harness) func([]any) {
		return func(batch []any) { intake(t, h.c("POST", "/v1/events", "web", batch, "User-Agent", chromeUA)) }
	}
	clean := newHarness(t)
	clean.setupTenant("acme", "web")
	others(sender(clean))

	h := newHarness(t)
	h.setupTenant("acme", "web")
	subject(sender(h))
	others(sender(h))
	if _, err := h.sqlDB().Exec(`INSERT INTO dlq(id, site_id, payload, error, received_at, anon_id, user_id) VALUES
		('q1', 'web', '{"user_id":"u-many"}', '[]', '2026-01-02T00:00:00.000Z', NULL, 'u-many'),
		('q2', 'web', '{"anon_id":"dev-3"}', '[]', '2026-01-02T00:00:00.000Z', 'dev-3', NULL)`); err != nil {
		t.Fatal(err)
	}
	body := map[string]any{"subject": map[string]any{"user_id": "u-many"}}
	export := gdpr(h, "export", testAdminToken, body)
	mustStatus(t, export, 200, "")
	counts := export.json(t)["counts"].(map[string]any)
	if counts["events"] != float64(subjectEvents) || counts["identity_links"] != float64(7) || counts["dlq"] != float64(2) {
		t.Fatalf("export: got counts %v, want 1500 events, 7 links, 2 DLQ rows", counts)
	}
	r := gdpr(h, "delete", testAdminToken, body)
	mustStatus(t, r, 200, "")
	delete(counts, "dlq")
	if got, want := fmt.Sprint(r.json(t)["counts"]), fmt.Sprint(counts); got != want {
		t.Fatalf("delete: got counts %s, want the export's %s", got, want)
	}
	got, want := rollups(t, h), rollups(t, clean)
	for table := range want {
		if got[table] != want[table] {
			t.Errorf("%s after erasure:\n%s\nwant, as if never sent:\n%s", table, got[table], want[table])
		}
	}
	for _, c := range dumpTables(t, h) {
		if strings.Contains(c.value, "u-many") || strings.Contains(c.value, "dev-") {
			t.Errorf("%s still holds %q", c.table, c.value)
		}
	}
}

// After an erasure the inspection feed (dev mode) holds no decision of the
// subject: not of its anon ids, linked or not at the time, nor one whose
// payload names it.
func TestGDPRDeleteForgetsDecisions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.DebugFeedSize = 100 })
	h.setupTenant("acme", "web")
	h.sendAt("web", 1, "p", "pageview", day(2, 10, 0), map[string]any{"user_id": "u1"})
	h.sendAt("web", 2, "q", "pageview", day(2, 11, 0), nil)
	h.sendAt("web", 3, "q", "identify", day(2, 11, 1), map[string]any{"user_id": "u1"})
	h.sendAt("web", 4, "z", "pageview", day(2, 12, 0), nil)
	h.sendAt("web", 5, "y", "pageview", day(2, 12, 0), nil)
	mustStatus(t, h.c("POST", "/v1/events", "web", ev("web", 6, map[string]any{"anon_id": "r", "user_id": "u1", "type": "bad type"})), 400, "invalid_event")
	if n := len(h.srv.Decisions(DebugFilter{})); n != 6 {
		t.Fatalf("got %d decisions, want 6", n)
	}
	mustStatus(t, gdpr(h, "delete", testAdminToken, map[string]any{"subject": map[string]any{"user_id": "u1"}}), 200, "")
	mustStatus(t, gdpr(h, "delete", testAdminToken, map[string]any{"subject": map[string]any{"anon_id": "y"}}), 200, "")
	var left []string
	for _, d := range h.srv.Decisions(DebugFilter{}) {
		left = append(left, d.AnonID)
	}
	if fmt.Sprint(left) != "[z]" {
		t.Fatalf("got decisions of %v left, want only z's", left)
	}
	h.sendAt("web", 7, "x", "pageview", day(2, 13, 0), nil)
	if d := h.srv.Decisions(DebugFilter{}); len(d) != 2 || d[0].AnonID != "x" || d[1].AnonID != "z" {
		t.Fatalf("after forgetting, got %v, want x then z", d)
	}
}
