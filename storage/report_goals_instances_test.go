package storage

import (
	"context"
	"testing"
)

// Goals are read from the database on every request, with no cache of
// their own in an instance: a goal created or deleted on one instance is
// what the other answers at once (docs/postgresql.md#on-postgresql).
func TestGoalsAcrossInstances(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	ctx := context.Background()
	ws, err := a.CreateWorkspace(ctx, system, "W", "w")
	if err != nil {
		t.Fatal(err)
	}
	site, err := a.CreateSite(ctx, system, ws, "shop", "Shop")
	if err != nil {
		t.Fatal(err)
	}
	event := "signup"
	g, err := a.CreateGoal(ctx, system, site, NewGoal{Name: "Signups", EventName: &event})
	if err != nil {
		t.Fatal(err)
	}
	goals, err := b.Goals(ctx, "shop")
	if err != nil || len(goals) != 1 || goals[0].Name != "Signups" {
		t.Fatalf("b after a created the goal: got %+v, %v, want the goal", goals, err)
	}
	// b deletes it (its tenancy maps hold the site once the listener
	// reloaded), and a answers without it.
	within(t, "the new site", func() bool { _, ok := b.Site("shop"); return ok })
	bSite, _ := b.Site("shop")
	if err := b.DeleteGoal(ctx, system, bSite, g.ID); err != nil {
		t.Fatal(err)
	}
	if goals, err := a.Goals(ctx, "shop"); err != nil || len(goals) != 0 {
		t.Fatalf("a after b deleted the goal: got %+v, %v, want none", goals, err)
	}
}
