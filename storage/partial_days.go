package storage

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
)

// Per-day partials of the query API (docs/query-api.md#how-reports-stay-fast).
// An unfiltered report by day (or week, or month) or by one dimension is
// answered from one partial per local day and dimension: each value's sums,
// which add across days, and a sketch of its visitors, which merge into the
// sketch of the range. Partials of closed days are kept in day_partials; the
// open day is computed on every query.

const (
	// ExactVisitorsBelow is where visitors stop being counted exactly: a
	// range whose estimated distinct visitors is below it is answered by
	// the scan. It sits 5% (six standard errors of the sketch) above
	// 10,000, so that a range of fewer than 10,000 visitors is never
	// estimated.
	ExactVisitorsBelow = 10500
	// partialMargin is how long after its end a day counts as closed and
	// its partials are kept: events of a visit arrive up to a session gap
	// late in the ordinary case, and each later one deletes the partials
	// anyway.
	partialMargin = sessionGap
	// maxPartialDays bounds the days one query reads from partials; a
	// longer range is scanned.
	maxPartialDays = 400
	dayMS          = int64(24 * time.Hour / time.Millisecond)
)

// Bases of a partial: what its sums and visitors are of.
const (
	basisEvents = "events" // the day's events (visitors of events)
	basisVisits = "visits" // the visits starting on the day
)

// anonDim is a dimension only partials use: the visitor id, so that a
// day's read hands each visitor to the sketch of its group.
const anonDim = "\x00anon"

// partialGens counts, per site, the commits that changed a day partial's
// inputs: per UTC date (YYYY-MM-DD) or hour (YYYY-MM-DDTHH) the changes of
// the partials of the local days that overlap it,
// and the changes of all of a site's days (wide) or of every site's (all).
// A partial computed from reads that began before a change to its days
// committed is not stored: it may lack the commit's change, which already
// deleted the row it would replace. Changes to other days do not refuse
// it, so a live site's intake of today leaves the past days' stores be.
// The report cache (report_cache.go) uses the same counts.
type partialGens struct {
	mu   sync.Mutex
	all  uint64
	wide map[string]uint64
	days map[string]map[string]uint64
	// hours: per site, per UTC hour (ms since the epoch / hourMS).
	hours map[string]map[int64]uint64
	// stored counts the changes in the database too, where several
	// instances write it (partial_changes.go); nil on SQLite.
	stored storedChanges
}

// bump counts a change of site's partials of the UTC date or hour (""
// for all its days; site "" for every site).
func (g *partialGens) bump(site, date string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case site == "":
		g.all++
	case date == "":
		if g.wide == nil {
			g.wide = map[string]uint64{}
		}
		g.wide[site]++
	case len(date) == hourKeyLen:
		lo, _, ok := utcSpan(date)
		if !ok { // not an hour: count it as a change of every day
			if g.wide == nil {
				g.wide = map[string]uint64{}
			}
			g.wide[site]++
			return
		}
		if g.hours == nil {
			g.hours = map[string]map[int64]uint64{}
		}
		if g.hours[site] == nil {
			g.hours[site] = map[int64]uint64{}
		}
		h := floorDiv(lo, hourMS)
		g.hours[site][h]++
		if len(g.hours[site]) > maxGenHours {
			g.foldHours(site, h-foldAfterHours)
		}
	default:
		if g.days == nil {
			g.days = map[string]map[string]uint64{}
		}
		if g.days[site] == nil {
			g.days[site] = map[string]uint64{}
		}
		g.days[site][date]++
	}
}

// A site's hourly counts are folded into its daily ones once it has more
// than maxGenHours of them: those older than foldAfterHours before the
// hour just counted. Intake touches the last hours; late events older
// hours.
const (
	maxGenHours    = 96
	foldAfterHours = 48
)

// foldHours moves site's counts of the hours before h into the counts of
// their UTC dates, so the map stays small. Every range that held such an
// hour overlaps its date, so its count keeps the change; a range that
// overlaps the date but not the hour sees a change it did not have (its
// cached answer or partial is read again once): counts only grow, so a
// change is never missed.
func (g *partialGens) foldHours(site string, h int64) {
	if g.days == nil {
		g.days = map[string]map[string]uint64{}
	}
	if g.days[site] == nil {
		g.days[site] = map[string]uint64{}
	}
	for k, n := range g.hours[site] {
		if k < h {
			g.days[site][time.UnixMilli(k*hourMS).UTC().Format(time.DateOnly)] += n
			delete(g.hours[site], k)
		}
	}
}

// daysGen is a count that moves whenever a partial of site on any UTC date
// or hour of [from, to) changes.
func (g *partialGens) daysGen(site string, from, to time.Time) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.all + g.wide[site]
	days := g.days[site]
	for d := from.UTC().Truncate(24 * time.Hour); d.Before(to) && len(days) > 0; d = d.Add(24 * time.Hour) {
		n += days[d.Format(time.DateOnly)]
	}
	if hours := g.hours[site]; len(hours) > 0 {
		for h := floorDiv(from.UnixMilli(), hourMS); h*hourMS < to.UnixMilli(); h++ {
			n += hours[h]
		}
	}
	return n
}

// floorDiv is a / b rounded down (b > 0), for times before 1970 too.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// hourKeyLayout is a UTC hour as the writers of day partials name it: the
// first hourKeyLen characters of a stored time.
const (
	hourKeyLayout = "2006-01-02T15"
	hourKeyLen    = len(hourKeyLayout)
)

// partialsChanged records that tx changes the inputs of all of site's
// partials ("" for every site).
func (tx *writeTx) partialsChanged(site string) {
	tx.partialDaysChanged(site, "")
}

// partialDaysChanged records that tx changes the inputs of site's partials
// of one UTC date or hour (see dropPartialArgs; "" for all its days). The count moves now, which
// refuses a partial read before and stored later in the same transaction,
// and again on commit, which refuses one whose reads began before the
// commit.
//
// Where several instances write (g.stored), the change is also counted in
// the transaction for the others to see. A failed count fails the
// transaction: PostgreSQL refuses every later statement of a transaction
// with an error, and so its savepoint's release or its commit.
func (tx *writeTx) partialDaysChanged(site, date string) {
	if tx.gens == nil {
		return
	}
	g := tx.gens
	g.bump(site, date)
	tx.OnCommit(func() { g.bump(site, date) })
	if g.stored != nil {
		_ = g.stored.bump(tx, site, date)
	}
}

// dropPartialsSQL deletes a site's partials of every local day that
// overlaps the UTC span [?3, ?4) (a day or an hour): ?2 bounds the index
// range (a local day is shorter than three days).
// storePartialSQL stores a day partial in place of the one it computed
// again, if any.
const storePartialSQL = `INSERT INTO day_partials(site_id, zone, dim, basis, day_start, day_end, data)
	VALUES (?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT(site_id, zone, dim, basis, day_start) DO UPDATE SET day_end = excluded.day_end, data = excluded.data`

const dropPartialsSQL = `DELETE FROM day_partials WHERE site_id = ?1 AND day_start > ?2 AND day_start < ?4 AND day_end > ?3`

// dropPartialArgs are dropPartialsSQL's arguments for site and a UTC date
// (YYYY-MM-DD, the first ten characters of a stored time) or a UTC hour
// (YYYY-MM-DDTHH, the first thirteen).
func dropPartialArgs(site, span string) []any {
	if lo, hi, ok := utcSpan(span); ok {
		return []any{site, lo - 3*dayMS, lo, hi}
	}
	// Neither: drop all of the site's partials rather than miss one.
	return []any{site, int64(math.MinInt64), int64(math.MinInt64), int64(math.MaxInt64)}
}

// utcSpan is the UTC date or hour span names, in ms since the epoch.
func utcSpan(span string) (lo, hi int64, ok bool) {
	if h, err := time.Parse(hourKeyLayout, span); err == nil {
		return h.UnixMilli(), h.UnixMilli() + hourMS, true
	}
	if d, err := time.Parse(time.DateOnly, span); err == nil {
		return d.UnixMilli(), d.UnixMilli() + dayMS, true
	}
	return 0, 0, false
}

// dropDays deletes the partials of each (site, UTC date) in days with
// stmt (dropPartialsSQL bound to tx).
func dropDays(tx *writeTx, exec func(args ...any) error, days map[[2]string]bool) error {
	for _, k := range sortedKeys(days, comparePairs) { // intake_lock_order.go
		if err := exec(dropPartialArgs(k[0], k[1])...); err != nil {
			return err
		}
		span := k[1]
		if _, _, ok := utcSpan(span); !ok {
			span = "" // dropPartialArgs dropped all of them
		}
		tx.partialDaysChanged(k[0], span)
	}
	return nil
}

// partialGroup is one value's figures in a day partial.
type partialGroup struct {
	n      [4]float64 // events: pageviews, events; visits: visits, pageviews, bounces, duration
	sketch *visitorSketch
}

// encodePartial writes a partial: for each value, its text, its sums and
// its visitors' sketch.
func encodePartial(groups map[string]*partialGroup) []byte {
	b := binary.AppendUvarint(nil, uint64(len(groups)))
	for v, g := range groups {
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
		for _, x := range g.n[:3] {
			b = binary.AppendUvarint(b, uint64(x))
		}
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(g.n[3]))
		sk, _ := g.sketch.MarshalBinary()
		b = binary.AppendUvarint(b, uint64(len(sk)))
		b = append(b, sk...)
	}
	return b
}

// errBadPartial is a stored partial that does not decode (a damaged file,
// say): the query is then answered by the scan instead of failing.
var errBadPartial = errors.New("storage: malformed day partial")

// decodePartial hands each value of an encoded partial to each, with its
// sums and its encoded sketch (valid only during the call).
func decodePartial(b []byte, each func(value string, n [4]float64, sketch []byte)) error {
	count, k := binary.Uvarint(b)
	if k <= 0 {
		return errBadPartial
	}
	b = b[k:]
	next := func() (uint64, bool) {
		x, k := binary.Uvarint(b)
		if k <= 0 {
			return 0, false
		}
		b = b[k:]
		return x, true
	}
	for range count {
		l, ok := next()
		if !ok || uint64(len(b)) < l {
			return errBadPartial
		}
		v := string(b[:l])
		b = b[l:]
		var n [4]float64
		for i := range 3 {
			x, ok := next()
			if !ok {
				return errBadPartial
			}
			n[i] = float64(x)
		}
		if len(b) < 8 {
			return errBadPartial
		}
		n[3] = math.Float64frombits(binary.LittleEndian.Uint64(b))
		b = b[8:]
		l, ok = next()
		if !ok || uint64(len(b)) < l {
			return errBadPartial
		}
		each(v, n, b[:l])
		b = b[l:]
	}
	return nil
}

// sketchUnion is the union of encoded sketches, kept as the list of their
// registers until it is estimated: appending is cheaper than a map write
// per register, and most values of a report are small.
type sketchUnion struct {
	regs  []uint32 // index<<8 | rank, of sparse sketches
	dense []uint8  // the maximum of dense ones, nil while there are none
}

// add merges the encoded sketch b of one of days days into the union; a
// damaged one is errBadSketch (a dense register past the ranks would
// otherwise index past estimate's counts).
func (u *sketchUnion) add(b []byte, days int) error {
	if len(b) > 0 && b[0] == sketchSparse && u.regs == nil {
		// About as many registers on each day of the range.
		u.regs = make([]uint32, 0, (len(b)-1)/3*days)
	}
	return walkSketch(b, func(regs []byte) {
		if u.dense == nil {
			u.dense = make([]uint8, sketchM)
		}
		for i, r := range regs {
			u.dense[i] = max(u.dense[i], r)
		}
	}, func(idx uint16, r uint8) {
		u.regs = append(u.regs, uint32(idx)<<8|uint32(r))
	})
}

// estimate is the union's estimate; scratch is all zeros, and left so.
func (u *sketchUnion) estimate(scratch *[sketchM]uint8) int64 {
	var n [sketchQ + 2]int
	if u.dense != nil {
		for _, x := range u.regs {
			idx := x >> 8
			u.dense[idx] = max(u.dense[idx], uint8(x))
		}
		for _, r := range u.dense {
			n[r]++
		}
		return estimateRanks(n)
	}
	// Registers first set are noted, so the second pass reads each once.
	touched := make([]uint16, 0, min(len(u.regs), sketchM))
	for _, x := range u.regs {
		idx, r := x>>8, uint8(x)
		if scratch[idx] == 0 {
			touched = append(touched, uint16(idx))
		}
		scratch[idx] = max(scratch[idx], r)
	}
	n[0] = sketchM - len(touched)
	for _, idx := range touched {
		n[scratch[idx]]++
		scratch[idx] = 0
	}
	return estimateRanks(n)
}

// mergeEncoded merges an encoded sketch into s without decoding it into a
// sketch of its own.
func mergeEncoded(s *visitorSketch, b []byte) error {
	if len(b) == 0 {
		return errBadSketch
	}
	switch b[0] {
	case sketchDense:
		if len(b) != 1+sketchM {
			return errBadSketch
		}
		if s.dense == nil && len(s.sparse) == 0 {
			s.dense, s.sparse = append([]uint8(nil), b[1:]...), nil
			return nil
		}
		for i, r := range b[1:] {
			if r > 0 {
				s.set(uint16(i), r)
			}
		}
	case sketchSparse:
		if (len(b)-1)%3 != 0 {
			return errBadSketch
		}
		for p := 1; p < len(b); p += 3 {
			idx := binary.BigEndian.Uint16(b[p:])
			if idx >= sketchM {
				return errBadSketch
			}
			s.set(idx, b[p+2])
		}
	default:
		return errBadSketch
	}
	return nil
}

// computePartials reads days (consecutive) of site in one scan: for each
// day, per value of dim ("": one group), the sums of basis and a sketch
// of its visitors, encoded. Events are read through the visits of the
// days (eventRead), so a day costs its own visits and events.
//
// A goal set's dim (partial_goals.go) groups by goal, goals its filters.
func (db *DB) computePartials(ctx context.Context, site string, loc *time.Location, days []localDay, dim string, goals []QueryFilter, basis string) ([][]byte, error) {
	q := StatsQuery{Site: site, From: days[0].start, To: days[len(days)-1].end, Zone: loc, TimeUnit: "day",
		Dimensions: []string{"time:day", anonDim}}
	switch {
	case isGoalDim(dim):
		q.Dimensions, q.Goals = []string{"time:day", GoalDimension, anonDim}, goals
	case dim != "":
		q.Dimensions = []string{"time:day", dim, anonDim}
	}
	if basis == basisEvents {
		q.Metrics = []string{MetricVisitors, MetricPageviews, MetricEvents}
	} else {
		q.Metrics = []string{MetricVisitors, MetricVisits, MetricBounceRate}
	}
	groups, order, err := db.statsGroups(ctx, q)
	if err != nil {
		return nil, err
	}
	at := make(map[string]int, len(days))
	for i, d := range days {
		at[d.label("day")] = i
	}
	out := make([]map[string]*partialGroup, len(days))
	for i := range out {
		out[i] = map[string]*partialGroup{}
	}
	for _, key := range order {
		parts := splitKey(key, len(q.Dimensions))
		i, ok := at[parts[0]]
		if !ok {
			continue
		}
		value, anon := "", parts[len(parts)-1]
		if dim != "" {
			value = parts[1]
		}
		g := out[i][value]
		if g == nil {
			g = &partialGroup{sketch: newVisitorSketch()}
			out[i][value] = g
		}
		a := groups[key]
		if basis == basisEvents {
			g.n[0] += a.pageviews
			g.n[1] += a.events
		} else {
			g.n[0] += a.visits
			g.n[1] += a.sPageviews
			g.n[2] += a.sBounces
			g.n[3] += a.sDuration
		}
		g.sketch.Add(anon)
	}
	blobs := make([][]byte, len(days))
	for i := range out {
		blobs[i] = encodePartial(out[i])
	}
	return blobs, nil
}

// localDay is one local day of a query's range.
type localDay struct {
	start, end time.Time
	date       time.Time // its local date, at UTC midnight, for labels
}

// startOfDay is the start of t's local day in loc.
func startOfDay(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, loc)
}

// localDays splits [from, to) into whole local days of loc, or false when
// it is not made of them or holds more than maxPartialDays.
func localDays(from, to time.Time, loc *time.Location) ([]localDay, bool) {
	if !from.Before(to) || !startOfDay(from, loc).Equal(from) || !startOfDay(to, loc).Equal(to) {
		return nil, false
	}
	var days []localDay
	for d := from; d.Before(to); {
		l := d.In(loc)
		next := time.Date(l.Year(), l.Month(), l.Day()+1, 0, 0, 0, 0, loc)
		days = append(days, localDay{start: d, end: next, date: time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, time.UTC)})
		if len(days) > maxPartialDays {
			return nil, false
		}
		d = next
	}
	return days, true
}

// label is day's bucket of unit, as timeExpr shows it.
func (d localDay) label(unit string) string {
	switch unit {
	case "week":
		return d.date.AddDate(0, 0, -((int(d.date.Weekday()) + 6) % 7)).Format(time.DateOnly)
	case "month":
		return d.date.Format("2006-01") + "-01"
	}
	return d.date.Format(time.DateOnly)
}

// partialPlan is how q reads from partials: its one non-time dimension
// ("" for none), the unit of its time dimension ("" for none), and the
// bases it needs.
type partialPlan struct {
	dim, unit            string
	events, visits       bool
	visitorBasis         string
	needVisitors         bool
	dimAt, timeAt, nDims int
	// keep selects the partial's values that pass q's filters (nil: every
	// value; partial_filters.go), filter names them in cache keys.
	keep   valueFilter
	filter string
	// goals: the Goals of a breakdown by goal, dim their set's (partial_goals.go).
	goals []QueryFilter
}

// planPartials reports how q is answered from partials, or false when it
// is not: it has filters on another dimension than its own or on more
// than one, more than one non-time dimension, hours, or visits counted
// across events (a visit's events on two days would count it twice; an
// event filter's visits likewise).
func planPartials(q *StatsQuery) (partialPlan, bool) {
	p := partialPlan{dimAt: -1, timeAt: -1, nDims: len(q.Dimensions)}
	if len(q.Goals) > 0 {
		// A breakdown by goal, by time or not, unfiltered: a goal set's
		// partials (partial_goals.go). Its metrics are event ones (the
		// server asks visitors, events and pageviews only).
		if len(q.Filters) > 0 || !slices.Contains(q.Dimensions, GoalDimension) {
			return p, false
		}
		p.goals = q.Goals
	}
	if len(q.Filters) > 0 {
		// Filters on one dimension select among its partial's values.
		dim, ok := singleFilterDim(q.Filters)
		if !ok {
			return p, false
		}
		keep, ok := compileValueFilter(q.Filters)
		if !ok {
			return p, false
		}
		p.dim, p.keep, p.filter = dim, keep, filterKey(q.Filters)
	}
	for i, d := range q.Dimensions {
		switch {
		case TimeDimension(d):
			unit := strings.TrimPrefix(d, "time:")
			if d == "time" {
				unit = q.TimeUnit
			}
			if unit != "day" && unit != "week" && unit != "month" {
				return p, false
			}
			p.unit, p.timeAt = unit, i
		case p.dimAt >= 0 || d == anonDim || p.dim != "" && p.dim != d:
			return p, false
		case d == GoalDimension:
			if p.goals == nil {
				return p, false
			}
			p.dim, p.dimAt = goalSetDim(p.goals), i
		default:
			p.dim, p.dimAt = d, i
		}
	}
	eventLevel := q.eventLevel()
	eventMetric := needs(q.Metrics, MetricPageviews) || needs(q.Metrics, MetricEvents)
	sessionMetric := false
	for _, m := range q.Metrics {
		sessionMetric = sessionMetric || SessionMetric(m)
	}
	if eventLevel && (sessionMetric || needs(q.Metrics, MetricVisits)) {
		return p, false
	}
	p.needVisitors = needs(q.Metrics, MetricVisitors) || needs(q.Metrics, MetricPercentage)
	p.events = eventLevel || eventMetric
	p.visitorBasis = basisVisits
	if p.events {
		p.visitorBasis = basisEvents
	}
	p.visits = !eventLevel && (needs(q.Metrics, MetricVisits) || sessionMetric || (p.needVisitors && !p.events))
	return p, true
}

// partialGroups answers q from day partials, as statsGroups would; false
// when q is not one they answer, when no day of the range is closed, or
// when the range has too few visitors to estimate them.
func (db *DB) partialGroups(ctx context.Context, q StatsQuery) (map[string]*aggregate, []string, bool, error) {
	plan, ok := planPartials(&q)
	if !ok {
		return nil, nil, false, nil
	}
	loc := q.Zone
	if loc == nil {
		loc = time.UTC
	}
	days, ok := localDays(q.From, q.To, loc)
	if !ok {
		return nil, nil, false, nil
	}
	now := db.now()
	closed := 0
	for _, d := range days {
		if !d.end.Add(partialMargin).After(now) {
			closed++
		}
	}
	if closed == 0 {
		return nil, nil, false, nil
	}
	if plan.goals != nil {
		// Only the site's whole goal set has partials (partial_goals.go).
		dim, err := db.goalDimNow(ctx, q.Site)
		if err != nil || dim != plan.dim {
			return nil, nil, false, err
		}
	}
	groups := map[string]*aggregate{}
	var order []string
	add := func(basis string) (*basisAnswer, error) {
		ans, err := db.basisAnswer(ctx, q.Site, loc, days, plan.layout(), plan.keep, basis, now, closed == len(days))
		if err != nil {
			return nil, err
		}
		for i, k := range ans.keys {
			a := groups[k]
			if a == nil {
				a = &aggregate{}
				groups[k] = a
				order = append(order, k)
			}
			g := &ans.groups[i]
			if basis == basisEvents {
				a.pageviews += g.n[0]
				a.events += g.n[1]
			} else {
				a.visits += g.n[0]
				a.sVisits += g.n[0]
				a.sPageviews += g.n[1]
				a.sBounces += g.n[2]
				a.sDuration += g.n[3]
			}
			if plan.needVisitors && basis == plan.visitorBasis {
				a.visitors = g.visitors
			}
		}
		return ans, nil
	}
	var visitorAnswer *basisAnswer
	for _, b := range []struct {
		basis string
		need  bool
	}{{basisEvents, plan.events}, {basisVisits, plan.visits}} {
		if !b.need {
			continue
		}
		ans, err := add(b.basis)
		if err != nil {
			return nil, nil, false, err
		}
		if b.basis == plan.visitorBasis {
			visitorAnswer = ans
		}
	}
	if plan.needVisitors {
		if visitorAnswer == nil || visitorAnswer.total < db.hooks.exactVisitorsBelow {
			return nil, nil, false, nil
		}
		if q.estimated != nil {
			*q.estimated = true
		}
	}
	return groups, order, true, nil
}

// partialLayout is where a plan's dimensions sit in its group keys: what a
// merged answer of one basis depends on besides the site, zone and days.
type partialLayout struct {
	dim, unit            string
	dimAt, timeAt, nDims int // dimAt -1: dim is only filtered on
	filter               string
	// goals are the filters of a goal set's dim (named by its digest in
	// dim, so not part of a cache key).
	goals []QueryFilter
}

func (p partialPlan) layout() partialLayout {
	return partialLayout{dim: p.dim, unit: p.unit, dimAt: p.dimAt, timeAt: p.timeAt, nDims: p.nDims, filter: p.filter, goals: p.goals}
}

// basisAnswer is one basis's figures over a range of days, merged: per
// group key (in first-seen order), the sums and the estimated visitors,
// and the estimate of the whole range's visitors. Never modified once
// made (the report cache shares it).
type basisAnswer struct {
	keys   []string
	groups []basisGroup
	total  int64
}

type basisGroup struct {
	n        [4]float64
	visitors float64
}

// basisAnswer merges the day partials of basis over days into groups laid
// out as lay says, of the values keep passes (nil: all). With cacheable
// (every day closed) the answer comes from the report cache while none of
// the days' partials changed, and goes into it when computed; the count is
// taken before any read.
func (db *DB) basisAnswer(ctx context.Context, site string, loc *time.Location, days []localDay, lay partialLayout, keep valueFilter, basis string, now time.Time, cacheable bool) (*basisAnswer, error) {
	var key string
	var gen uint64
	if cacheable {
		key = reportKey(site, loc.String(), lay, basis, days)
		var err error
		if gen, err = db.changesGen(ctx, site, days[0].start, days[len(days)-1].end); err != nil {
			return nil, err
		}
		if r, ok := db.reports.get(key, gen); ok {
			return r.answer, nil
		}
	}
	blobs, err := db.dayPartials(ctx, site, loc, days, lay.dim, lay.goals, basis, false, now)
	if err != nil {
		return nil, err
	}
	ans := &basisAnswer{}
	at := map[string]int{}
	var unions []*sketchUnion
	var scratch [sketchM]uint8
	total := &visitorSketch{dense: make([]uint8, sketchM)}
	key1 := make([]string, lay.nDims)
	for i, b := range blobs {
		var failed error
		err := decodePartial(b, func(value string, n [4]float64, sk []byte) {
			if keep != nil && !keep(value) {
				return
			}
			if lay.timeAt >= 0 {
				key1[lay.timeAt] = days[i].label(lay.unit)
			}
			if lay.dimAt >= 0 {
				key1[lay.dimAt] = value
			}
			k := strings.Join(key1, keySep)
			j, ok := at[k]
			if !ok {
				j = len(ans.keys)
				at[k] = j
				ans.keys = append(ans.keys, k)
				ans.groups = append(ans.groups, basisGroup{})
				unions = append(unions, &sketchUnion{})
			}
			g := &ans.groups[j]
			for x := range n {
				g.n[x] += n[x]
			}
			if err := unions[j].add(sk, len(days)); err != nil {
				failed = err
			}
			if err := mergeEncoded(total, sk); err != nil {
				failed = err
			}
		})
		if err == nil {
			err = failed
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errBadPartial, err)
		}
	}
	for j, u := range unions {
		ans.groups[j].visitors = float64(u.estimate(&scratch))
	}
	ans.total = total.Estimate()
	if cacheable {
		db.reports.put(&cachedReport{key: key, gen: gen, answer: ans})
	}
	return ans, nil
}

// dayPartials returns the partial of each day for site, dim and basis:
// kept ones from day_partials, the others computed, and those of closed
// days (ended before now, by partialMargin) stored by a writer job that
// the query does not wait for.
//
// A goal set's partials (dim, goals: partial_goals.go) are stored only
// while the set is still the site's; a custom property's only when held
// (the warm-up's, named by the site's events) or its computed days show
// it (holdsValues).
func (db *DB) dayPartials(ctx context.Context, site string, loc *time.Location, days []localDay, dim string, goals []QueryFilter, basis string, held bool, now time.Time) ([][]byte, error) {
	return db.keptPartials(ctx, site, loc, days, dim, basis, held, now, func(days []localDay) ([][]byte, error) {
		return db.computePartials(ctx, site, loc, days, dim, goals, basis)
	})
}

// keptPartials is dayPartials with compute computing the partials of
// consecutive days (each day's encoded partial) that are not kept.
func (db *DB) keptPartials(ctx context.Context, site string, loc *time.Location, days []localDay, dim, basis string, held bool, now time.Time,
	compute func(days []localDay) ([][]byte, error)) ([][]byte, error) {
	zone := loc.String()
	// Taken before anything is read: a change to these days committed
	// after it refuses the store (partialGens). Changes to other days do
	// not: a live site's intake of today leaves the past days' stores be.
	gen := db.writer.gens.daysGen(site, days[0].start, days[len(days)-1].end)
	dayGens, err := db.storedDayGens(ctx, site, days)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(days))
	at := make(map[int64]int, len(days))
	for i, d := range days {
		at[d.start.UnixMilli()] = i
	}
	rows, err := db.read.QueryContext(ctx, `SELECT day_start, day_end, data FROM day_partials
		WHERE site_id = ? AND zone = ? AND dim = ? AND basis = ? AND day_start >= ? AND day_start <= ?`,
		site, zone, dim, basis, days[0].start.UnixMilli(), days[len(days)-1].start.UnixMilli())
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var start, end int64
		var data []byte
		if err := rows.Scan(&start, &end, &data); err != nil {
			rows.Close()
			return nil, err
		}
		if i, ok := at[start]; ok && days[i].end.UnixMilli() == end {
			if dayGens != nil {
				var ok bool
				if data, ok = openPartial(data, dayGens[i]); !ok {
					continue // another instance changed its day since
				}
			}
			out[i] = data
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	type stored struct {
		day  localDay
		data []byte
	}
	var store []stored
	lo, hi := -1, -1
	for i := range days {
		if out[i] == nil {
			if lo < 0 {
				lo = i
			}
			hi = i
		}
	}
	if lo >= 0 {
		// The days from the first missing to the last, kept ones among
		// them included: one read.
		blobs, err := compute(days[lo : hi+1])
		if err != nil {
			return nil, err
		}
		db.hooks.partialScans.Add(int64(hi + 1 - lo))
		held := held || holdsValues(dim, blobs)
		for k, b := range blobs {
			i := lo + k
			if out[i] != nil {
				continue
			}
			out[i] = b
			if held && !days[i].end.Add(partialMargin).After(now) && keepPartial(dim, b) {
				if dayGens != nil {
					b = sealPartial(b, dayGens[i])
				}
				store = append(store, stored{days[i], b})
			}
		}
	}
	if len(store) == 0 {
		return out, nil
	}
	j := db.writer.newJob(len(store), func(tx *writeTx) error {
		if tx.gens.daysGen(site, days[0].start, days[len(days)-1].end) != gen {
			return nil
		}
		if _, ok := db.Site(site); !ok {
			return nil
		}
		if isGoalDim(dim) || isFunnelDim(dim) {
			// A goal created or deleted since the read: the set is gone.
			goals, funnel, err := tx.goalDimsOf(context.Background(), site)
			if err != nil || dim != goals && dim != funnel {
				return err
			}
		}
		for _, s := range store {
			if _, err := tx.Exec(storePartialSQL, site, zone, dim, basis, s.day.start.UnixMilli(), s.day.end.UnixMilli(), s.data); err != nil {
				return err
			}
		}
		tx.MarkWritten()
		return nil
	})
	// A full queue or a closing database only leaves the days to compute
	// again next time.
	_ = db.writer.Enqueue(context.Background(), j, false)
	return out, nil
}
