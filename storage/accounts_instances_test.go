package storage

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tally-analytics/tally/fault"
)

// both runs f(a) and f(b) at once and answers their errors.
func both(a, b *DB, f func(db *DB, i int) error) [2]error {
	var errs [2]error
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, db := range []*DB{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = f(db, i)
		}()
	}
	close(start)
	wg.Wait()
	return errs
}

// codeOf is err's fault code, "" for nil.
func codeOf(err error) string {
	if err == nil {
		return ""
	}
	if e := fault.As(err); e != nil {
		return e.Code
	}
	return err.Error()
}

// A workspace keeps an owner with two instances on one database: its two
// owners demoted at once, one on each, one demotion is refused with
// last_owner, every round (the owners are counted under the workspace's
// lock, docs/accounts.md#members).
func TestLastOwnerAcrossInstances(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	ctx := context.Background()
	ws, err := a.CreateWorkspace(ctx, system, "W", "w")
	if err != nil {
		t.Fatal(err)
	}
	var ids [2]string
	for i, email := range []string{"ana@example.com", "bo@example.com"} {
		u, err := a.CreateUser(ctx, system, email, "", ws, RoleOwner)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = u.ID
	}
	within(t, "the workspace", func() bool { _, ok := b.Workspace("w"); return ok })
	bws, _ := b.Workspace("w")
	for round := 0; round < 20; round++ {
		errs := both(a, b, func(db *DB, i int) error {
			w := ws
			if db == b {
				w = bws
			}
			_, err := db.SetMemberRole(ctx, system, w, ids[i], RoleAdmin)
			return err
		})
		if got := codeOf(errs[0]) + "," + codeOf(errs[1]); got != ",last_owner" && got != "last_owner," {
			t.Fatalf("round %d: the two owners demoted at once got errors %q, want one last_owner", round, got)
		}
		for _, id := range ids {
			if _, err := a.SetMemberRole(ctx, system, ws, id, RoleOwner); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// An invitation is accepted once with two instances on one database: two
// signed-in users accepting one link at once, one on each, one gets
// invalid_token, every round.
func TestInvitationAcceptedOnceAcrossInstances(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	ctx := context.Background()
	home, err := a.CreateWorkspace(ctx, system, "Home", "home")
	if err != nil {
		t.Fatal(err)
	}
	target, err := a.CreateWorkspace(ctx, system, "Target", "target")
	if err != nil {
		t.Fatal(err)
	}
	var users [2]*User
	for i, email := range []string{"ana@example.com", "bo@example.com"} {
		if users[i], err = a.CreateUser(ctx, system, email, "", home, RoleViewer); err != nil {
			t.Fatal(err)
		}
	}
	within(t, "the workspaces", func() bool { _, ok := b.Workspace("target"); return ok })
	for round := 0; round < 20; round++ {
		_, token, err := a.CreateInvitation(ctx, system, target, "cy@example.com", RoleAdmin, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		errs := both(a, b, func(db *DB, i int) error {
			_, _, err := db.AcceptInvitation(ctx, token, users[i], "")
			return err
		})
		if got := codeOf(errs[0]) + "," + codeOf(errs[1]); got != ",invalid_token" && got != "invalid_token," {
			t.Fatalf("round %d: one invitation accepted twice at once got errors %q, want one invalid_token", round, got)
		}
		for _, u := range users {
			if err := a.RemoveMember(ctx, system, target, u.ID); err != nil && codeOf(err) != "not_found" {
				t.Fatal(err)
			}
		}
	}
}
