package server

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
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
