package storage

import (
	"context"
	"time"
)

// coord is what several instances on one database agree on
// (docs/postgresql.md#on-postgresql): changes of the tenancy tables announced
// to the others, and jobs run by one instance at a time. On SQLite there is one
// instance, and every method is a no-op (noCoord).
type coord interface {
	// notify announces, at tx's commit, that the entity kind:id changed.
	notify(tx *writeTx, kind, id string) error
	// listening reports whether this instance hears the others' changes;
	// when it does not, Authenticate asks the database.
	listening() bool
	// leader runs f unless another instance runs the job of that name,
	// and reports whether it ran.
	leader(ctx context.Context, job string, f func() error) (ran bool, err error)
	// lockWorkspace serialises, until tx ends, the writes of one
	// workspace's audit log across instances.
	lockWorkspace(tx *writeTx, workspaceID string) error
	// lockNames serialises, until tx ends, the claims of the names sites
	// answer to (site ids, aliases) across instances, so that two claims
	// of one name cannot both pass their check. Taken before the audit
	// lock.
	lockNames(tx *writeTx) error
	// hideSite marks site id as being deleted, in tx, for every instance
	// and for a restart; sitesShown is the condition (or "") that leaves
	// such sites out of the tenancy maps, and hiddenSite finds one of ws
	// to resume its delete.
	hideSite(tx *writeTx, id string) error
	sitesShown() string
	hiddenSite(ctx context.Context, wsID, id string) (*Site, error)
	// holdSite holds site, until tx ends, against a delete on another
	// instance, and refuses it if that began (tenancy_site_hold.go).
	holdSite(tx *writeTx, site *Site) error
	// exclusively runs f while holding the lock of name, waiting for
	// another instance that holds it.
	exclusively(ctx context.Context, name string, f func() error) error
	// claimReplay claims the DLQ entry (site, id) as read (receivedAt)
	// for a replay until now + replayClaim, unless another instance's
	// claim holds; releaseReplay ends the claim it returned. On SQLite the
	// process's own claims (ClaimReplay) are all there are.
	claimReplay(ctx context.Context, site, id, receivedAt string, now time.Time) (claimed bool, until string, err error)
	releaseReplay(ctx context.Context, site, id, until string) error
	// close stops what the coordination runs in the background.
	close()
}

// noCoord is SQLite's coord: one instance, nothing to coordinate.
type noCoord struct{}

func (noCoord) notify(*writeTx, string, string) error { return nil }
func (noCoord) listening() bool                       { return true }
func (noCoord) leader(_ context.Context, _ string, f func() error) (bool, error) {
	return true, f()
}
func (noCoord) lockWorkspace(*writeTx, string) error { return nil }
func (noCoord) lockNames(*writeTx) error             { return nil }
func (noCoord) close()                               {}
func (noCoord) hideSite(*writeTx, string) error      { return nil }
func (noCoord) sitesShown() string                   { return "" }
func (noCoord) hiddenSite(context.Context, string, string) (*Site, error) {
	return nil, nil
}
func (noCoord) holdSite(*writeTx, *Site) error                                { return nil }
func (noCoord) exclusively(_ context.Context, _ string, f func() error) error { return f() }
func (noCoord) claimReplay(context.Context, string, string, string, time.Time) (bool, string, error) {
	return true, "", nil
}
func (noCoord) releaseReplay(context.Context, string, string, string) error { return nil }

// listenerGrace is how long the listener may be down before Authenticate
// stops trusting the cached keys: a revocation on another instance is
// refused here within a second either way.
const listenerGrace = 500 * time.Millisecond

// co is the DB's coord, noCoord when none was set.
func (db *DB) coord() coord {
	if db.pg.co == nil {
		return noCoord{}
	}
	return db.pg.co
}

// Leader runs f on one instance at a time for the job of that name (the
// daily jobs: retention, prune, partials warm-up) and reports whether it
// ran; on SQLite it always runs.
func (db *DB) Leader(ctx context.Context, job string, f func() error) (bool, error) {
	return db.coord().leader(ctx, job, f)
}
