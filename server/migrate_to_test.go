package server

import (
	"context"
	"database/sql"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tally-analytics/tally/internal/dbtest"
	"github.com/tally-analytics/tally/schema"
	"github.com/tally-analytics/tally/storage"
)

// TestMigrateToCopiesEverything seeds a SQLite file through the API with
// rows in every table, copies it
// (docs/postgresql.md#moving-from-sqlite-to-postgresql) and compares: counts
// and sums, every derived column with SQLite's functions for the same row, the
// audit log in order, and the identities continuing past the copied ids.
func TestMigrateToCopiesEverything(t *testing.T) {
	t.Parallel()
	dbtest.OnlySQLite(t, "the source of the copy is a SQLite file")
	url := dbtest.SharedDatabase(t, "")
	dir := t.TempDir()
	planPath := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(planPath, []byte(`{"mode":"quarantine","events":{"purchase":{"type":"object","required":["properties"]},"*":{"type":"object"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	plan, err := schema.LoadPlan(planPath)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "src.db")
	h := newHarnessAt(t, path, func(c *Config) { c.Plan, c.PlanPath = plan, planPath })
	tn := h.setupTenant("acme", "web")
	importHistory(t, h.db, "web", "2026-01-29", 3)
	const ua = "User-Agent"
	for _, e := range []map[string]any{
		ev("web", 1, map[string]any{"url": "https://example.test/pricing?utm_source=news&utm_campaign=spring", "user_id": "u1",
			"referrer": "https://ref.test/x", "properties": map[string]any{"k": "v", "n": 1e2, "o": map[string]any{"a": true}}}),
		ev("web", 2, map[string]any{"type": "identify", "user_id": "u1", "traits": map[string]any{"plan": "pro"}}),
		ev("web", 3, map[string]any{"type": "purchase", "user_id": "u1"}), // quarantined: into the DLQ
		ev("web", 4, map[string]any{"consent": "denied", "url": "https://example.test/a/b/"}),
		ev("web", 5, map[string]any{"type": "signup", "url": nil, "properties": map[string]any{"plan": "pro"}}),
		ev("web", 6, map[string]any{"anon_id": "anon-2", "url": "https://example.test/docs#x"}),
	} {
		h.clock.Advance(time.Second)
		intake(t, h.c("POST", "/v1/events", "web", e, ua, chromeUA))
	}
	mustStatus(t, h.q("POST", "/v1/sites/web/goals", tn.adminKey, map[string]any{"name": "Home", "page_path": "/"}), 201, "")
	mustStatus(t, h.q("POST", "/v1/sites/web/goals", tn.adminKey, map[string]any{"name": "Signup", "event_name": "signup"}), 201, "")
	mustStatus(t, h.q("POST", "/v1/sites/web/funnels", tn.adminKey, map[string]any{"name": "Signups", "steps": []any{"Home", "Signup"}}), 201, "")
	mustStatus(t, h.q("POST", "/v1/sites/web/segments", tn.adminKey, map[string]any{"name": "Pricing", "type": "site",
		"segment_data": map[string]any{"filters": []any{[]any{"is", "event:page", []string{"/pricing"}}}}}), 201, "")
	mapData := base64.StdEncoding.EncodeToString([]byte(`{"version":3,"sources":["app.ts"],"mappings":"AAAA"}`))
	mustStatus(t, h.q("POST", "/v1/sites/web/sourcemaps", "web", map[string]any{"release": "1.0", "file": "app.min.js", "map": mapData}), 201, "")
	mustStatus(t, h.q("POST", "/v1/sites/web/webhook-secrets", tn.adminKey, map[string]any{"adapter": "payments"}), 201, "")
	// A closed day's read leaves its partials behind.
	mustStatus(t, h.q("GET", "/v1/sites/web/pageviews?from=2026-01-01&to=2026-01-31", tn.readKey, nil), 200, "")
	h.stop()

	checks, err := storage.CopyToPostgres(context.Background(), path, url, nil)
	if err != nil {
		t.Fatalf("copy: %v", err)
	}
	rows := map[string]int64{}
	for _, c := range checks {
		rows[c.Table] = c.SQLite
		if !c.OK() {
			t.Errorf("%s: got %+v, want equal counts and sums", c.Table, c)
		}
	}
	for _, table := range []string{"workspaces", "sites", "api_keys", "audit_log", "credentials", "events", "event_pages", "event_ids",
		"sessions", "identity_links", "user_profiles", "daily_events_slots", "daily_sessions_slots", "daily_dimensions_slots",
		"site_usage_slots", "dlq", "sourcemaps", "goals", "funnels", "segments", "imports", "imported_rows", "webhook_secrets", "daily_salts"} {
		if rows[table] == 0 {
			t.Errorf("%s: got no rows in the seeded file, want some (the test must cover it)", table)
		}
	}

	lite, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	ctx := context.Background()
	pg, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(ctx)

	// Derived columns: what SQLite's Go functions give for the same row.
	type derived struct {
		Seq        int64
		ID, Path   sql.NullString
		K, Plan    sql.NullString
		ReceivedAt string
	}
	var want, got []derived
	lr, err := lite.Query(`SELECT seq, id, tally_page_path(url),
		tally_prop(event_raw(raw, id, site_id, type, anon_id, user_id, url, referrer), 'k'),
		tally_prop(event_raw(raw, id, site_id, type, anon_id, user_id, url, referrer), 'plan'),
		event_received_at(received_at, raw, ts) FROM events ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	for lr.Next() {
		var d derived
		if err := lr.Scan(&d.Seq, &d.ID, &d.Path, &d.K, &d.Plan, &d.ReceivedAt); err != nil {
			t.Fatal(err)
		}
		want = append(want, d)
	}
	pr, err := pg.Query(ctx, `SELECT seq, id, path, props->>'k', props->>'plan',
		to_char(to_timestamp(received_ms / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') FROM events ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	for pr.Next() {
		var d derived
		if err := pr.Scan(&d.Seq, &d.ID, &d.Path, &d.K, &d.Plan, &d.ReceivedAt); err != nil {
			t.Fatal(err)
		}
		got = append(got, d)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("derived columns:\ngot  %+v\nwant %+v", got, want)
	}
	var rawProps string
	if err := pg.QueryRow(ctx, `SELECT props::text FROM events WHERE id = $1`, eventID(1)).Scan(&rawProps); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rawProps, `"k":"v"`) || !strings.Contains(rawProps, `"o":{"a":true}`) {
		t.Errorf("props: got %s, want the properties object as sent", rawProps)
	}

	// The audit log, entry by entry, in order.
	auditQ := `SELECT seq, id, workspace_id, actor_kind, coalesce(actor_id, ''), action, coalesce(target, ''), metadata, ts FROM audit_log ORDER BY seq`
	var wantAudit, gotAudit []string
	lr, err = lite.Query(auditQ)
	if err != nil {
		t.Fatal(err)
	}
	for lr.Next() {
		v := make([]any, 9)
		p := make([]any, 9)
		for i := range v {
			p[i] = &v[i]
		}
		if err := lr.Scan(p...); err != nil {
			t.Fatal(err)
		}
		wantAudit = append(wantAudit, fmt.Sprint(v...))
	}
	pr, err = pg.Query(ctx, auditQ)
	if err != nil {
		t.Fatal(err)
	}
	for pr.Next() {
		v, err := pr.Values()
		if err != nil {
			t.Fatal(err)
		}
		gotAudit = append(gotAudit, fmt.Sprint(v...))
	}
	if len(wantAudit) == 0 || !reflect.DeepEqual(gotAudit, wantAudit) {
		t.Errorf("audit log:\ngot  %q\nwant %q", gotAudit, wantAudit)
	}

	// Identities continue past the copied ids.
	for _, c := range []struct{ table, insert string }{
		{"audit_log", `INSERT INTO audit_log(id, workspace_id, actor_kind, action, ts) VALUES ('new', 'w', 'system', 'x', 'z') RETURNING seq`},
		{"events", `INSERT INTO events(id_text, site_id, type, ts, anon_id, raw, received_at) VALUES ('new', 'web', 'pageview', '2026-01-31T10:00:00.000Z', 'a', '\x00', '2026-01-31T10:00:00.000Z') RETURNING seq`},
		{"credentials", `INSERT INTO credentials(credential) VALUES ('key:new') RETURNING code`},
	} {
		var max, id int64
		col := "seq"
		if c.table == "credentials" {
			col = "code"
		}
		if err := lite.QueryRow(`SELECT MAX(` + col + `) FROM ` + c.table).Scan(&max); err != nil {
			t.Fatal(err)
		}
		if err := pg.QueryRow(ctx, c.insert).Scan(&id); err != nil {
			t.Fatalf("%s: %v", c.table, err)
		}
		if id <= max {
			t.Errorf("%s: got id %d for a new row, want past %d", c.table, id, max)
		}
	}
}
