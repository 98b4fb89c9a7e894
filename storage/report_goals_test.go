package storage

import (
	"regexp"
	"testing"
)

// TestPagePattern checks what a goal's page path matches
// (docs/query-api.md#goals-and-funnels): * within one segment, ** across
// segments, the rest literally.
func TestPagePattern(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		pattern, path string
		want          bool
	}{
		{"/blog/*", "/blog/hello", true},
		{"/blog/*", "/blog/", true},
		{"/blog/*", "/blog/2026/hello", false},
		{"/blog/*", "/blog", false},
		{"/blog/**", "/blog/2026/hello", true},
		{"/blog/**", "/blog/", true},
		{"/blog/**", "/blogs/x", false},
		{"/p/*/edit", "/p/12/edit", true},
		{"/p/*/edit", "/p/12/13/edit", false},
		{"/p/**/edit", "/p/12/13/edit", true},
		{"/*", "/x", true},
		{"/*", "/x/y", false},
		{"/**", "/x/y", true},
		{"/a.b", "/a.b", true},
		{"/a.b", "/axb", false},
		{"/(x)+?", "/(x)+?", true},
		{"/(x)+?", "/xx", false},
		{"/café/*", "/café/menu", true},
		{"/pricing*", "/pricing-2026", true},
		{"/pricing*", "/pricing/2026", false},
	} {
		re := regexp.MustCompile(PagePattern(c.pattern))
		if got := re.MatchString(c.path); got != c.want {
			t.Errorf("got %v for %s on %s (pattern %s), want %v", got, c.pattern, c.path, PagePattern(c.pattern), c.want)
		}
	}
}
