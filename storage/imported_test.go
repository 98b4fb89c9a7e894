package storage

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestImportedSumsLeaveTheirInputAlone: adding imported rows to a report's
// groups never changes the groups given, which the report cache may hold
// (a cached answer would count the imported days again at every read).
func TestImportedSumsLeaveTheirInputAlone(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "t.db"))
	ctx := context.Background()
	ws, err := db.CreateWorkspace(ctx, Actor{Kind: ActorAdmin}, "acme", "acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateSite(ctx, Actor{Kind: ActorAdmin}, ws, "web", "web"); err != nil {
		t.Fatal(err)
	}
	im, err := db.BeginImport(ctx, "web", "plausible", []string{"x.csv"})
	if err != nil {
		t.Fatal(err)
	}
	if err := im.Add(ctx, []ImportedRow{{Day: "2026-01-02", Visitors: 5, Visits: 6, Pageviews: 7, Events: 7}}); err != nil {
		t.Fatal(err)
	}
	// Not counted before the import is complete.
	q := StatsQuery{Site: "web", From: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC),
		Zone: time.UTC, Metrics: []string{MetricVisitors}, Imports: true}
	given := map[string]*aggregate{"": {visitors: 1, visits: 1}}
	out, _, err := db.withImported(ctx, q, given, []string{""})
	if err != nil || out[""].visitors != 1 {
		t.Fatalf("an incomplete import: got %v visitors (%v), want 1", out[""].visitors, err)
	}
	if err := im.Finish(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	out, _, err = db.withImported(ctx, q, given, []string{""})
	if err != nil || out[""].visitors != 6 || out[""].visits != 7 {
		t.Errorf("with the import: got %+v (%v), want 6 visitors, 7 visits", out[""], err)
	}
	if given[""].visitors != 1 || given[""].visits != 1 {
		t.Errorf("the groups given: got %+v, want them unchanged", given[""])
	}
}
