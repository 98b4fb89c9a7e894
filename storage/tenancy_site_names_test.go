package storage

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// TestSiteNamesAcrossInstances: an alias set on one instance and a site
// created on another with that name in another case, at the same moment,
// never both succeed: the names lock orders their checks (docs/intake.md#plausible--and-umami-compatible-intake, Aliases).
func TestSiteNamesAcrossInstances(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	ctx := context.Background()
	ws, err := a.CreateWorkspace(ctx, system, "W", "w")
	if err != nil {
		t.Fatal(err)
	}
	web, err := a.CreateSite(ctx, system, ws, "web", "Web")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		alias, id := fmt.Sprintf("name%d", i), fmt.Sprintf("Name%d", i)
		var aliasErr, siteErr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); _, aliasErr = a.SetSiteAliases(ctx, system, web, []string{alias}) }()
		go func() { defer wg.Done(); _, siteErr = b.CreateSite(ctx, system, ws, id, "S") }()
		wg.Wait()
		if (aliasErr == nil) == (siteErr == nil) {
			t.Fatalf("alias %s and site %s at once: got errors %v and %v, want exactly one to succeed", alias, id, aliasErr, siteErr)
		}
	}
}
