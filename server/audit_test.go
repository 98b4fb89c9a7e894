package server

import (
	"fmt"
	"net/url"
	"testing"
	"time"
)

func TestAuditPagingWithOneMillisecond(t *testing.T) {
	t.Parallel()
	h := newHarness(t) // the clock stands still: every entry is made in one millisecond
	h.setupTenant("acme", "web")
	for i := range 20 {
		mustStatus(t, h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": fmt.Sprintf("s%02d", i), "name": "x"}), 201, "")
	}
	// 1 workspace + 1 site + 3 keys + 20 sites.
	const total = 25
	seen := map[string]bool{}
	var order []string
	cursor := ""
	for page := 0; ; page++ {
		if page > total {
			t.Fatal("paging does not end")
		}
		path := "/v1/workspaces/acme/audit?limit=4"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		r := h.q("GET", path, testAdminToken, nil)
		mustStatus(t, r, 200, "")
		body := r.json(t)
		for _, e := range body["entries"].([]any) {
			e := e.(map[string]any)
			id := e["id"].(string)
			if seen[id] {
				t.Fatalf("entry %s repeated", id)
			}
			seen[id] = true
			order = append(order, e["ts"].(string))
		}
		next, _ := body["next_cursor"].(string)
		if next == "" {
			if body["next_cursor"] != nil {
				t.Fatalf("got next_cursor %v, want null", body["next_cursor"])
			}
			break
		}
		if last := order[len(order)-1]; next != last {
			t.Fatalf("got next_cursor %s, want the last entry's ts %s", next, last)
		}
		cursor = next
	}
	if len(seen) != total {
		t.Fatalf("got %d entries over all pages, want %d", len(seen), total)
	}
	for i := 1; i < len(order); i++ {
		if order[i] >= order[i-1] {
			t.Fatalf("entries not strictly newest first: %s then %s", order[i-1], order[i])
		}
	}
	// The newest entry was moved forward 1 ms per collision, from the clock's time.
	if want := "2026-01-31T09:05:00.144Z"; order[0] != want {
		t.Errorf("got newest ts %s, want %s", order[0], want)
	}
	// The oldest entry keeps the clock's own time and the creation order.
	first := h.q("GET", "/v1/workspaces/acme/audit?limit=1&cursor=2026-01-31T09:05:00.121Z", testAdminToken, nil).json(t)
	e := first["entries"].([]any)[0].(map[string]any)
	if e["action"] != "workspace.create" || e["ts"] != "2026-01-31T09:05:00.120Z" {
		t.Errorf("got oldest %v %v, want workspace.create at 09:05:00.120Z", e["action"], e["ts"])
	}
	// A cursor with a sub-millisecond fraction keeps the entry of that millisecond.
	r := h.q("GET", "/v1/workspaces/acme/audit?cursor=2026-01-31T09:05:00.1205Z", testAdminToken, nil)
	if n := len(r.json(t)["entries"].([]any)); n != 1 {
		t.Errorf("got %d entries before 09:05:00.1205, want 1", n)
	}
}

func TestAuditEntryShapesAndActions(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	h.clock.Advance(time.Second)
	mustStatus(t, h.q("PATCH", "/v1/workspaces/acme", testAdminToken, map[string]any{"name": "Acme 2"}), 200, "")
	r := h.q("POST", "/v1/workspaces/acme/keys", tn.adminKey, map[string]any{"label": "x", "scopes": []string{"query:read"}})
	keyID := r.json(t)["id"].(string)
	mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/keys/"+keyID, tn.adminKey, nil), 204, "")
	mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/sites/web", testAdminToken, nil), 204, "")

	// Failed mutations leave no audit row: the audit insert shares their transaction.
	mustStatus(t, h.q("POST", "/v1/workspaces", testAdminToken, map[string]any{"name": "x", "slug": "acme"}), 409, "slug_taken")
	mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/keys/"+keyID, testAdminToken, nil), 404, "not_found")

	entries := h.q("GET", "/v1/workspaces/acme/audit", testAdminToken, nil).json(t)["entries"].([]any)
	var actions []string
	for _, e := range entries {
		actions = append(actions, e.(map[string]any)["action"].(string))
	}
	want := "[site.delete key.revoke key.create workspace.update key.create key.create key.create site.create workspace.create]"
	if got := fmt.Sprint(actions); got != want {
		t.Fatalf("got actions %s, want %s", got, want)
	}
	revoke := entries[1].(map[string]any)
	if revoke["actor_kind"] != "apiKey" || revoke["actor_id"] != tn.adminKID || revoke["target"] != keyID || revoke["workspace_id"] != tn.wsID {
		t.Errorf("got key.revoke entry %v", revoke)
	}
	if _, ok := revoke["metadata"].(map[string]any); !ok {
		t.Errorf("got metadata %v, want an object", revoke["metadata"])
	}
	del := entries[0].(map[string]any)
	if del["actor_kind"] != "admin" || del["actor_id"] != nil || del["target"] != "web" {
		t.Errorf("got site.delete entry %v", del)
	}
	for _, e := range entries {
		for _, f := range []string{"id", "workspace_id", "actor_kind", "actor_id", "action", "target", "metadata", "ts"} {
			if _, ok := e.(map[string]any)[f]; !ok {
				t.Errorf("entry lacks %s: %v", f, e)
			}
		}
	}
}

func TestSiteDeleteRemovesItsData(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	op := h.sqlDB()
	// The event through intake: its row's columns differ between backends.
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, nil)))
	if _, err := op.Exec(`INSERT INTO webhook_secrets(site_id, adapter, secret) VALUES ('web', 'payments', 's')`); err != nil {
		t.Fatal(err)
	}
	mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/sites/web", testAdminToken, nil), 204, "")
	for _, table := range []string{"sites", "events", "webhook_secrets"} {
		var n int
		if err := op.QueryRow(`SELECT COUNT(*) FROM ` + table + ` WHERE ` + map[bool]string{true: "id", false: "site_id"}[table == "sites"] + ` = 'web'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("got %d rows of the deleted site in %s, want 0", n, table)
		}
	}
	mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/sites/web", testAdminToken, nil), 404, "not_found")
	if n := len(h.q("GET", "/v1/workspaces/acme/sites", testAdminToken, nil).json(t)["sites"].([]any)); n != 0 {
		t.Errorf("got %d sites after delete, want 0", n)
	}
	// The id is free again.
	mustStatus(t, h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": "web", "name": "again"}), 201, "")
	// A site of another workspace cannot be deleted through this one.
	h.setupTenant("bravo", "bravo-web")
	mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/sites/bravo-web", testAdminToken, nil), 404, "not_found")
}

func TestAuditLogRefusesUpdateAndDelete(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	op := h.sqlDB() // a second connection, as an operator's shell would be
	for _, stmt := range []string{
		`UPDATE audit_log SET action = 'forged'`,
		`UPDATE audit_log SET metadata = '{}' WHERE action = 'workspace.create'`,
		`DELETE FROM audit_log`,
		`DELETE FROM audit_log WHERE action = 'key.create'`,
	} {
		if _, err := op.Exec(stmt); err == nil {
			t.Errorf("%s: got no error, want the trigger to abort", stmt)
		}
	}
	var n int
	if err := op.QueryRow(`SELECT COUNT(*) FROM audit_log WHERE action != 'forged'`).Scan(&n); err != nil || n != 5 {
		t.Fatalf("got %d intact audit rows (%v), want 5", n, err)
	}
}
