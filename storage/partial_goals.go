package storage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// Goal partials (docs/query-api.md#how-reports-stay-fast): a breakdown
// by goal of a closed range, with the site's goals listed as a dashboard
// lists them (all of them, by name), is answered from one day partial per
// day, as the other panels are: per goal (its index in the query's Goals),
// the events and pageviews that complete it and a sketch of their
// visitors. The partial's dim names the goal set by a digest of the goals'
// definitions in their listed order, so a partial of one goal set never
// answers another: creating, changing or deleting a goal makes a new dim,
// and deletes the site's goal partials (they would only pile up). Only the
// site's whole goal set is read from and kept: a breakdown of some goals
// (an event:goal filter choosing them) scans, as before, so the goal
// partials of a site are at most one set's days.

// goalDimPrefix starts the dim of a goal set's partials; no query
// dimension starts with it (event:goal is the dimension's whole name).
const goalDimPrefix = GoalDimension + ":"

// maxGoalPartialBytes bounds a day's goal partial that is kept: a site of
// many goals each completed by thousands of visitors a day would keep a
// dense sketch (16 KB) per goal and day. A larger one answers the query
// that computed it and is not stored, so such a site scans its goals'
// days at every first view, as before.
//
// 256 KB: 16 goals of dense sketches; the read benchmark's five goals at
// 1M events encode to at most 19 KB a day (docs/storage.md#event-bytes).
const maxGoalPartialBytes = 256 << 10

// goalSetDim names the partials of the goals whose filters (GoalFilter,
// in the query's order) are goals.
func goalSetDim(goals []QueryFilter) string {
	b, _ := json.Marshal(goals)
	sum := sha256.Sum256(b)
	return goalDimPrefix + hex.EncodeToString(sum[:16])
}

// isGoalDim reports whether dim names a goal set's partials.
func isGoalDim(dim string) bool { return strings.HasPrefix(dim, goalDimPrefix) && !isFunnelDim(dim) }

// siteGoalFilters are site's goals as a breakdown by goal lists them all:
// by name (Goals' order), each as its filter.
func siteGoalFilters(goals []Goal) []QueryFilter {
	out := make([]QueryFilter, len(goals))
	for i, g := range goals {
		out[i] = GoalFilter(g)
	}
	return out
}

// goalDims are the dims of site's whole goal set and of its default
// funnel (partial_funnels.go), "" for none.
func goalDims(goals []Goal) (set, funnel string) {
	if len(goals) == 0 {
		return "", ""
	}
	if steps := defaultFunnelSteps(goals); steps != nil {
		funnel = funnelSetDim(steps)
	}
	return goalSetDim(siteGoalFilters(goals)), funnel
}

// dropGoalPartialsSQL deletes a site's goal and funnel partials of every
// set, kept for a goal set that just changed.
const dropGoalPartialsSQL = `DELETE FROM day_partials WHERE site_id = ? AND dim >= '` + goalDimPrefix + `' AND dim < '` + GoalDimension + `;'`

// goalDimsOf reads, within tx, goalDims of site's goals as they stand.
func (tx *writeTx) goalDimsOf(ctx context.Context, site string) (string, string, error) {
	rows, err := tx.QueryContext(ctx, goalsSQL, site)
	if err != nil {
		return "", "", err
	}
	goals, err := scanGoals(rows)
	if err != nil {
		return "", "", err
	}
	set, funnel := goalDims(goals)
	return set, funnel, nil
}

// goalDimNow reads the dim of site's goal set on the read pool.
func (db *DB) goalDimNow(ctx context.Context, site string) (string, error) {
	goals, err := db.Goals(ctx, site)
	if err != nil {
		return "", err
	}
	set, _ := goalDims(goals)
	return set, nil
}
