package storage

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tally-analytics/tally/fault"
)

// TestCleanOrigins: what an allowed origin of a shared link may be, which
// goes into the share page's Content-Security-Policy as is.
func TestCleanOrigins(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   []string
		want string // the cleaned list joined by spaces, or the error's detail path
	}{
		{nil, ""},
		{[]string{"https://example.com"}, "https://example.com"},
		{[]string{"HTTPS://Example.COM/"}, "https://example.com"},
		{[]string{"http://localhost:8000", "https://a.example", "https://a.example/"}, "http://localhost:8000 https://a.example"},
		{[]string{"https://127.0.0.1:8443"}, "https://127.0.0.1:8443"},
		{[]string{"https://[::1]:8443"}, "https://[::1]:8443"},
		{[]string{"https://xn--bcher-kva.example"}, "https://xn--bcher-kva.example"},
		{[]string{"https://a.example", ""}, "/allowed_origins/1"},
		{[]string{"example.com"}, "/allowed_origins/0"},
		{[]string{"ftp://example.com"}, "/allowed_origins/0"},
		{[]string{"javascript:alert(1)"}, "/allowed_origins/0"},
		{[]string{"https://example.com/path"}, "/allowed_origins/0"},
		{[]string{"https://example.com?x=1"}, "/allowed_origins/0"},
		{[]string{"https://example.com#x"}, "/allowed_origins/0"},
		{[]string{"https://user@example.com"}, "/allowed_origins/0"},
		{[]string{"https://*.example.com"}, "/allowed_origins/0"},
		{[]string{"https://example.com:0"}, "/allowed_origins/0"},
		{[]string{"https://example.com:65536"}, "/allowed_origins/0"},
		{[]string{"https://example.com:"}, "/allowed_origins/0"},
		{[]string{"https://exa mple.com"}, "/allowed_origins/0"},
		{[]string{"https://example.com 'unsafe-inline'"}, "/allowed_origins/0"},
		{[]string{"https://example.com;script-src"}, "/allowed_origins/0"},
		{[]string{"https://-bad.example"}, "/allowed_origins/0"},
		{[]string{"https://" + strings.Repeat("a", 300) + ".example"}, "/allowed_origins/0"},
		{strings.Split(strings.Repeat("https://a.example,", MaxSharedLinkOrigins+1), ",")[:MaxSharedLinkOrigins+1], "/allowed_origins"},
	} {
		got, err := CleanOrigins(tc.in)
		if err != nil {
			e := fault.As(err)
			if e == nil || e.Code != fault.InvalidSharedLink || len(e.Details) != 1 || e.Details[0].Path != tc.want {
				t.Errorf("%q: got %v, want %s", tc.in, err, tc.want)
			}
			continue
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestSharedLinkLabelAndPassword: a label's bounds, and every password
// check costs one argon2id hash, with a password or without.
func TestSharedLinkLabelAndPassword(t *testing.T) {
	// Not parallel: passwordChecks counts every check of the package.
	db := openTest(t, filepath.Join(t.TempDir(), "t.db"))
	withSites(t, db, "web")
	site, _ := db.Site("web")
	ctx := context.Background()
	sys := Actor{Kind: ActorSystem}
	for _, tc := range []struct {
		label string
		ok    bool
	}{{"Board", true}, {strings.Repeat("x", maxSharedLinkLabel), true}, {strings.Repeat("x", maxSharedLinkLabel+1), false}, {" \t", false}, {"\xff", false}} {
		_, _, err := db.CreateSharedLink(ctx, sys, site, NewSharedLink{Label: tc.label})
		if (err == nil) != tc.ok {
			t.Errorf("label %q: got %v, want ok %v", tc.label, err, tc.ok)
		}
	}
	pw := "correct horse battery"
	with, token, err := db.CreateSharedLink(ctx, sys, site, NewSharedLink{Label: "x", Password: &pw})
	if err != nil {
		t.Fatal(err)
	}
	without, _, err := db.CreateSharedLink(ctx, sys, site, NewSharedLink{Label: "y"})
	if err != nil {
		t.Fatal(err)
	}
	read, ok, err := db.SharedLinkByToken(ctx, token)
	if err != nil || !ok || read.ID != with.ID || !read.HasPassword {
		t.Fatalf("by token: got %+v %v %v, want the link with its password", read, ok, err)
	}
	for _, tc := range []struct {
		name string
		l    *SharedLink
		pw   string
		want bool
	}{
		{"no password", without, pw, false},
		{"wrong password", read, "wrong password", false},
		{"right password", read, pw, true},
	} {
		before := passwordChecks.Load()
		got := CheckSharedLinkPassword(tc.l, tc.pw)
		if n := passwordChecks.Load() - before; got != tc.want || n != 1 {
			t.Errorf("%s: got %v after %d hashes, want %v after 1", tc.name, got, n, tc.want)
		}
	}
	if without.PasswordProof("x") != nil {
		t.Error("a link without a password has a proof of one")
	}
	if err := db.RevokeSharedLink(ctx, sys, site, with.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := db.SharedLinkByToken(ctx, token); ok {
		t.Error("a revoked link is still found by its token")
	}
	if err := db.RevokeSharedLink(ctx, sys, site, with.ID); !errors.Is(err, errNoSharedLink) {
		t.Errorf("revoking twice: got %v, want not_found", err)
	}
}
