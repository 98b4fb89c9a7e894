package server

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// aliasesOf decodes the aliases of a site answer.
func aliasesOf(t *testing.T, r response) []string {
	t.Helper()
	raw, ok := r.json(t)["aliases"].([]any)
	if !ok {
		t.Fatalf("got %s, want an aliases array", r.body)
	}
	out := []string{}
	for _, a := range raw {
		out = append(out, a.(string))
	}
	return out
}

// TestSiteAliases: PATCH replaces the list (cleaned, sorted), GET lists it,
// each change is audited, a name is unique across all sites (409), and
// bad lists are 400 invalid_aliases, changing nothing.
func TestSiteAliases(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.setupTenant("acme", "web")
	b := h.setupTenant("other", "shop")

	r := h.q("PATCH", "/v1/sites/web", testAdminToken, map[string]any{"aliases": []string{" Example.COM. ", "www.example.com", "example.com", "0b5d0e6a-6c7e-4b6e-9a0c-2b8f1c3d4e5f"}})
	mustStatus(t, r, 200, "")
	want := []string{"0b5d0e6a-6c7e-4b6e-9a0c-2b8f1c3d4e5f", "example.com", "www.example.com"}
	if got := aliasesOf(t, r); !reflect.DeepEqual(got, want) {
		t.Fatalf("PATCH: got aliases %v, want %v", got, want)
	}
	if got := aliasesOf(t, h.q("GET", "/v1/sites/web", a.readKey, nil)); !reflect.DeepEqual(got, want) {
		t.Fatalf("GET: got aliases %v, want %v", got, want)
	}
	if got := aliasesOf(t, h.q("GET", "/v1/sites/shop", testAdminToken, nil)); len(got) != 0 {
		t.Fatalf("GET of a site without aliases: got %v, want []", got)
	}
	if n := h.count(`SELECT COUNT(*) FROM audit_log WHERE action = 'site.aliases' AND target = 'web'`); n != 1 {
		t.Fatalf("got %d site.aliases audit rows, want 1", n)
	}
	// The same list again writes nothing.
	mustStatus(t, h.q("PATCH", "/v1/sites/web", testAdminToken, map[string]any{"aliases": want}), 200, "")
	if n := h.count(`SELECT COUNT(*) FROM audit_log WHERE action = 'site.aliases'`); n != 1 {
		t.Fatalf("an unchanged list: got %d audit rows, want 1", n)
	}

	// Unique across all sites, whatever the workspace; a site's own id
	// counts as taken too.
	for _, name := range []string{"EXAMPLE.com", "web"} {
		mustStatus(t, h.q("PATCH", "/v1/sites/shop", testAdminToken, map[string]any{"aliases": []string{name}}), 409, "alias_taken")
	}
	if got := aliasesOf(t, h.q("GET", "/v1/sites/shop", testAdminToken, nil)); len(got) != 0 {
		t.Fatalf("after a 409: got %v, want []", got)
	}

	long := strings.Repeat(strings.Repeat("a", 60)+".", 5) + "ee" // 307 bytes
	many := make([]string, 51)
	for i := range many {
		many[i] = fmt.Sprintf("s%d.example.org", i)
	}
	for _, tc := range []struct {
		name string
		body any
	}{
		{"not an array", map[string]any{"aliases": "example.org"}},
		{"null", map[string]any{"aliases": nil}},
		{"a number in it", map[string]any{"aliases": []any{"a.org", 7}}},
		{"empty name", map[string]any{"aliases": []string{" "}}},
		{"scheme", map[string]any{"aliases": []string{"https://example.org"}}},
		{"port", map[string]any{"aliases": []string{"example.org:8080"}}},
		{"path", map[string]any{"aliases": []string{"example.org/blog"}}},
		{"underscore", map[string]any{"aliases": []string{"ex_ample.org"}}},
		{"label starts with hyphen", map[string]any{"aliases": []string{"-x.org"}}},
		{"too long", map[string]any{"aliases": []string{long}}},
		{"too many", map[string]any{"aliases": many}},
	} {
		r := h.q("PATCH", "/v1/sites/shop", testAdminToken, tc.body)
		if r.status != 400 || r.code() != "invalid_aliases" {
			t.Errorf("%s: got %d %q, want 400 invalid_aliases; body %s", tc.name, r.status, r.code(), r.body)
		}
	}

	// Replacing the list frees the old names; [] empties it.
	mustStatus(t, h.q("PATCH", "/v1/sites/web", testAdminToken, map[string]any{"aliases": []string{"example.net"}}), 200, "")
	mustStatus(t, h.q("PATCH", "/v1/sites/shop", testAdminToken, map[string]any{"aliases": []string{"example.com"}}), 200, "")
	mustStatus(t, h.q("PATCH", "/v1/sites/web", testAdminToken, map[string]any{"aliases": []string{}}), 200, "")

	// Admin only: a query:read key may read, not change; another
	// workspace's key gets the ordinary 404.
	mustStatus(t, h.q("PATCH", "/v1/sites/web", a.readKey, map[string]any{"aliases": []string{"x.org"}}), 403, "forbidden")
	mustStatus(t, h.q("PATCH", "/v1/sites/web", b.adminKey, map[string]any{"aliases": []string{"x.org"}}), 404, "not_found")

	// Gone with the site: the name is free again, in the database too.
	mustStatus(t, h.q("DELETE", "/v1/workspaces/other/sites/shop", testAdminToken, nil), 204, "")
	if n := h.count(`SELECT COUNT(*) FROM site_aliases WHERE site_id = 'shop'`); n != 0 {
		t.Fatalf("after the site's delete: %d alias rows left, want 0", n)
	}
	mustStatus(t, h.q("PATCH", "/v1/sites/web", testAdminToken, map[string]any{"aliases": []string{"example.com"}}), 200, "")
}

// TestSiteAliasesSurviveRestart: the in-memory map is loaded from the
// table at start.
func TestSiteAliasesSurviveRestart(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	mustStatus(t, h.q("PATCH", "/v1/sites/web", testAdminToken, map[string]any{"aliases": []string{"example.com"}}), 200, "")
	path := h.path
	h.stop()
	h2 := newHarnessAt(t, path)
	if got := aliasesOf(t, h2.q("GET", "/v1/sites/web", testAdminToken, nil)); !reflect.DeepEqual(got, []string{"example.com"}) {
		t.Fatalf("after a restart: got %v, want [example.com]", got)
	}
	r := h2.c("POST", "/api/event", "", map[string]any{"name": "pageview", "url": "https://example.com/", "domain": "example.com"})
	if r.status != 202 {
		t.Fatalf("after a restart, an event naming the alias: got %d %s, want 202", r.status, r.body)
	}
}

// TestAliasesCannotCrossTenants: no workspace can take the traffic of
// another's site through an alias (issue 29, item 3). An alias that equals
// another site's id without regard to case is 409, as is a new site whose
// id equals another site's alias so; a name that is a site's id reaches
// that site, also over an alias stored before these checks.
func TestAliasesCannotCrossTenants(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.setupTenant("acme", "web")
	b := h.setupTenant("victim", "VictimSite")
	for _, name := range []string{"victimsite", "VICTIMSITE", "VictimSite"} {
		mustStatus(t, h.q("PATCH", "/v1/sites/web", a.adminKey, map[string]any{"aliases": []string{name}}), 409, "alias_taken")
	}
	// A site's own id, in any case, is its own to alias.
	mustStatus(t, h.q("PATCH", "/v1/sites/VictimSite", b.adminKey, map[string]any{"aliases": []string{"victimsite", "victim-blog"}}), 200, "")
	for _, id := range []string{"victim-blog", "Victim-Blog"} {
		mustStatus(t, h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": id, "name": "x"}), 409, "site_id_taken")
	}

	send := func(name string) {
		t.Helper()
		h.clock.Advance(time.Second)
		mustStatusText(t, h.c("POST", "/api/event", "", `{"n":"pageview","u":"https://victim.test/","d":"`+name+`"}`, "User-Agent", chromeUA), 202)
		mustStatusText(t, h.c("POST", "/api/send", "", `{"type":"event","payload":{"website":"`+name+`","url":"/"}}`, "User-Agent", chromeUA), 200)
	}
	check := func(when string, want map[string]int) {
		t.Helper()
		for site, n := range want {
			if got := h.count(`SELECT COUNT(*) FROM events WHERE site_id = ?`, site); got != n {
				t.Errorf("%s: got %d events of %s, want %d", when, got, site, n)
			}
		}
	}
	send("VictimSite")
	check("after the refused aliases", map[string]int{"VictimSite": 2, "web": 0})

	// Aliases stored before the checks existed: a name that is a site's
	// id still reaches that site; the alias answers only for names no
	// site has as its id.
	mustStatus(t, h.q("PATCH", "/v1/sites/VictimSite", b.adminKey, map[string]any{"aliases": []string{}}), 200, "")
	mustStatus(t, h.q("POST", "/v1/workspaces/victim/sites", testAdminToken, map[string]any{"id": "later", "name": "Later"}), 201, "")
	if _, err := h.sqlDB().Exec(`INSERT INTO site_aliases(site_id, alias) VALUES ('web', 'victimsite'), ('web', 'later')`); err != nil {
		t.Fatal(err)
	}
	path := h.path
	h.stop()
	h = newHarnessAt(t, path)
	send("VictimSite")
	send("later")
	send("VICTIMSITE")
	check("over aliases stored before the checks", map[string]int{"VictimSite": 4, "later": 2, "web": 2})
}
