package storage

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Funnel partials (docs/query-api.md#how-reports-stay-fast,
// docs/query-api.md#goals-and-funnels): the dashboard's default funnel (the site's goals in their
// listed order, up to MaxFunnelSteps) over whole closed days, unfiltered,
// is answered from one partial a day plus the few visits no day holds.
// A day's partial lists, for the visits that start on that day and end
// before it ends, each visitor's furthest step (visitors of none left
// out): every event of such a visit is in its day, so the day's walk is
// the range's. The visits that no day holds (those starting before the
// range that run into it, and those that run past the end of their
// start's day) are read with their events as before, clipped to the
// range. A visitor's furthest step is the largest of the days' and the
// read's, so the answer is exact, as the read of every visit is.
//
// The partials are kept in day_partials under a dim naming the steps'
// definitions (deleted with the goal partials when a goal is created or
// deleted) and dropped, as every partial is, by the writers that change a
// visit or event of their day (a late event, an erasure, retention).

// funnelDimPrefix starts a funnel's partials' dim: under goalDimPrefix,
// so dropGoalPartialsSQL deletes them too.
const funnelDimPrefix = goalDimPrefix + "funnel:"

// basisFunnel is the basis of funnel partials.
const basisFunnel = "funnel"

// maxFunnelPartialBytes bounds a day's funnel partial that is kept: about
// 16 bytes a visitor who reached the first step (measured on the read
// benchmark's ids: 37 KB for some 2,300 visitors a day), so a day of some
// 65,000 such visitors. A larger one answers the funnel that computed it
// and is not stored.
const maxFunnelPartialBytes = 1 << 20

func isFunnelDim(dim string) bool { return strings.HasPrefix(dim, funnelDimPrefix) }

// defaultFunnelSteps are the steps of the dashboard's default funnel over
// goals (as Goals lists them): the first MaxFunnelSteps; nil for fewer
// than two goals.
func defaultFunnelSteps(goals []Goal) []Goal {
	if len(goals) < 2 {
		return nil
	}
	return goals[:min(len(goals), MaxFunnelSteps)]
}

// funnelSetDim names the partials of a funnel of steps by their
// definitions.
func funnelSetDim(steps []Goal) string {
	type step struct{ E, P, N, V string }
	defs := make([]step, len(steps))
	for i, g := range steps {
		defs[i] = step{g.EventName, g.PagePath, g.PropName, g.PropValue}
	}
	b, _ := json.Marshal(defs)
	sum := sha256.Sum256(b)
	return funnelDimPrefix + hex.EncodeToString(sum[:16])
}

// funnelFromPartials answers q's visitors' furthest steps from funnel
// partials, or false when q is not the site's default funnel over whole
// closed days without filters.
func (db *DB) funnelFromPartials(ctx context.Context, q *FunnelQuery, m *funnelMatcher, lo time.Time) (map[string]int, bool, error) {
	if len(q.Filters) > 0 {
		return nil, false, nil
	}
	loc := q.Zone
	if loc == nil {
		loc = time.UTC
	}
	days, ok := localDays(q.From, q.To, loc)
	now := db.now()
	if !ok || days[len(days)-1].end.Add(partialMargin).After(now) {
		return nil, false, nil
	}
	goals, err := db.Goals(ctx, q.Site)
	if err != nil {
		return nil, false, err
	}
	def := defaultFunnelSteps(goals)
	if len(def) != len(q.Steps) {
		return nil, false, nil
	}
	for i := range def {
		if def[i].ID != q.Steps[i].ID {
			return nil, false, nil
		}
	}
	blobs, err := db.funnelDayPartials(ctx, q, m, loc, days, now)
	if err != nil {
		return nil, false, err
	}
	best := map[string]int{}
	for _, b := range blobs {
		if err := decodeFunnelPartial(b, func(anon string, step int) {
			best[anon] = max(best[anon], step)
		}); err != nil {
			return nil, false, nil // damaged: the read of every visit answers
		}
	}
	// The visits no day holds: started before the range and running into
	// it, or running past the end of their start's day.
	var cond strings.Builder
	fmt.Fprintf(&cond, " AND s.ended_ms >= CASE WHEN s.started_ms < %d THEN %d", q.From.UnixMilli(), q.From.UnixMilli())
	for _, d := range days {
		fmt.Fprintf(&cond, " WHEN s.started_ms < %d THEN %d", d.end.UnixMilli(), d.end.UnixMilli())
	}
	cond.WriteString(" END")
	edges, err := db.funnelBests(ctx, q, m, lo, cond.String())
	if err != nil {
		return nil, false, err
	}
	for anon, step := range edges {
		best[anon] = max(best[anon], step)
	}
	return best, true, nil
}

// funnelDayPartials returns the funnel partial of each of days for q's
// site and steps: kept ones, and the others computed and those of closed
// days stored, as dayPartials does. The days missing are computed in one
// read of their visits, each visit's furthest step kept under its start
// day's index and its visitor (q.visitKey).
func (db *DB) funnelDayPartials(ctx context.Context, q *FunnelQuery, m *funnelMatcher, loc *time.Location, days []localDay, now time.Time) ([][]byte, error) {
	return db.keptPartials(ctx, q.Site, loc, days, funnelSetDim(q.Steps), basisFunnel, false, now, func(ds []localDay) ([][]byte, error) {
		// The index of the visit's start day among ds, and that day's end.
		var day, end strings.Builder
		day.WriteString("(CASE")
		end.WriteString("(CASE")
		for i, d := range ds {
			fmt.Fprintf(&day, " WHEN s.started_ms < %d THEN %d", d.end.UnixMilli(), i)
			fmt.Fprintf(&end, " WHEN s.started_ms < %d THEN %d", d.end.UnixMilli(), d.end.UnixMilli())
		}
		day.WriteString(" END)")
		end.WriteString(" END)")
		dq := *q
		dq.From, dq.To = ds[0].start, ds[len(ds)-1].end
		dq.visitKey = day.String() + " || ' ' || s.anon_id"
		best, err := db.funnelBests(ctx, &dq, m, dq.From, " AND s.ended_ms < "+end.String())
		if err != nil {
			return nil, err
		}
		perDay := make([]map[string]int, len(ds))
		for i := range perDay {
			perDay[i] = map[string]int{}
		}
		for k, step := range best {
			i, anon, ok := strings.Cut(k, " ")
			n, err := strconv.Atoi(i)
			if !ok || err != nil || n < 0 || n >= len(ds) {
				return nil, errBadPartial
			}
			perDay[n][anon] = max(perDay[n][anon], step)
		}
		out := make([][]byte, len(ds))
		for i := range ds {
			out[i] = encodeFunnelPartial(perDay[i])
		}
		return out, nil
	})
}

// encodeFunnelPartial writes a day's furthest steps: their count, then
// each visitor's id (its length, its bytes) and step, by id.
func encodeFunnelPartial(best map[string]int) []byte {
	anons := make([]string, 0, len(best))
	for a := range best {
		anons = append(anons, a)
	}
	slices.Sort(anons)
	b := binary.AppendUvarint(nil, uint64(len(anons)))
	for _, a := range anons {
		b = binary.AppendUvarint(b, uint64(len(a)))
		b = append(b, a...)
		b = binary.AppendUvarint(b, uint64(best[a]))
	}
	return b
}

// decodeFunnelPartial hands each visitor of an encoded funnel partial to
// each, with its furthest step.
func decodeFunnelPartial(b []byte, each func(anon string, step int)) error {
	next := func() (uint64, bool) {
		x, k := binary.Uvarint(b)
		if k <= 0 {
			return 0, false
		}
		b = b[k:]
		return x, true
	}
	n, ok := next()
	if !ok {
		return errBadPartial
	}
	for range n {
		l, ok := next()
		if !ok || uint64(len(b)) < l {
			return errBadPartial
		}
		anon := string(b[:l])
		b = b[l:]
		step, ok := next()
		if !ok || step > MaxFunnelSteps {
			return errBadPartial
		}
		each(anon, int(step))
	}
	return nil
}
