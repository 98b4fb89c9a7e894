package storage

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestImportedSumsLeaveTheirInputAlone: adding imported rows to a report's
// groups never changes the groups given, which the report cache may hold
// (a cached answer would count the imported days again at every read).
func TestImportedSumsLeaveTheirInputAlone(t *testing.T) {
	t.Parallel()
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

// TestImportsOfOneSiteAtOnce: of two imports of a site run at once, the one
// completing first removes the other, which then fails and leaves no rows.
func TestImportsOfOneSiteAtOnce(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "t.db"))
	ctx := context.Background()
	withSites(t, db, "web")
	a, err := db.BeginImport(ctx, "web", "plausible", []string{"a.csv"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := db.BeginImport(ctx, "web", "plausible", []string{"b.csv"})
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range []*Import{a, b} {
		if err := im.Add(ctx, []ImportedRow{{Day: "2026-01-02", Visitors: 5}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Finish(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.Finish(ctx, 1, nil); err == nil {
		t.Fatal("the import removed meanwhile: got no error, want one")
	}
	if err := a.Abandon(ctx); err != nil {
		t.Fatal(err)
	}
	var rows, imports int
	if err := db.read.QueryRow(`SELECT (SELECT COUNT(*) FROM imported_rows), (SELECT COUNT(*) FROM imports)`).Scan(&rows, &imports); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || imports != 1 {
		t.Errorf("got %d rows of %d imports, want b's 1 of 1", rows, imports)
	}
	list, err := db.Imports(ctx, "web")
	if err != nil || len(list) != 1 || list[0].ID != b.ID() {
		t.Errorf("imports listed: got %+v (%v), want b", list, err)
	}
}

// TestImportedSourcesValue: a whole imported_sources row keeps each column
// at most 256 bytes (cut on a character), without the separator, missing
// columns as (not set); read back, its columns are the query API's names
// and its tests apply to their own column.
func TestImportedSourcesValue(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 255) + "é" + "tail"
	v := ImportedSourcesValue([]string{"Google", long, "x" + sourcesSep + "y"})
	if len(v) > len(importedSourceCols)*(sourcesColMax+1) {
		t.Errorf("got a value of %d bytes, want at most %d", len(v), len(importedSourceCols)*(sourcesColMax+1))
	}
	cols := strings.Split(v, sourcesSep)
	want := []string{"Google", strings.Repeat("a", 255), "xy", NotSet, NotSet, NotSet, NotSet}
	if !slices.Equal(cols, want) {
		t.Errorf("got columns %q, want %q", cols, want)
	}
	tests, ok := sourcesPlan([]QueryFilter{{Op: "is", Dim: "visit:utm_source", Values: []string{"xy"}}}, "visit:source")
	if !ok {
		t.Fatal("a filter on a UTM tag by source: got no plan, want one")
	}
	if got, ok := sourcesRow(v, "visit:source", tests); !ok || got != "Google" {
		t.Errorf("read back by source: got %q, %v, want Google, true", got, ok)
	}
	tests, _ = sourcesPlan([]QueryFilter{{Op: "is", Dim: "visit:utm_source", Values: []string{"x"}}}, "")
	if _, ok := sourcesRow(v, "", tests); ok {
		t.Error("a filter the row fails: got it passing")
	}
	if _, ok := sourcesPlan([]QueryFilter{{Op: "or", Children: []QueryFilter{
		{Op: "is", Dim: "visit:utm_source", Values: []string{"x"}}, {Op: "is", Dim: "visit:utm_medium", Values: []string{"y"}}}}}, ""); ok {
		t.Error("a condition over two columns: got a plan, want none")
	}
}
