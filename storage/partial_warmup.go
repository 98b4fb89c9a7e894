package storage

import (
	"context"
	"log/slog"
	"sort"
	"time"
)

// The partials warm-up (docs/query-api.md#how-reports-stay-fast)
// computes the day partials of the reports a dashboard opens with for each
// site's last closed days, at start and half an hour after each local
// midnight of the site's time zone (when the day before is closed), and
// their merged answers over "7d" and "30d", so that the first report of
// the day is answered from the report cache instead of scanning.
// It reads on the read pool and stores each day's partial through the
// same short writer job a query queues, one day at a time, so intake never
// waits behind it for more than one small insert.

// warmDays is how many closed days before today the warm-up keeps: a
// "30d" report and "month" (today is computed at every query).
const warmDays = 31

// warmComparedDays is how many closed days the totals (no dimension) are
// kept for: a "30d" or "month" range and its previous period, which the
// dashboard's headline compares with (docs/dashboard.md).
const warmComparedDays = 62

// warmSet are the partials the warm-up computes: those of the reports of
// BenchmarkReads (docs/benchmarks.md#query-api) and of the
// dashboard's panels (docs/dashboard.md).
var warmSet = []struct{ dim, basis string }{
	{"", basisEvents}, {"", basisVisits},
	{"event:page", basisEvents},
	{"visit:source", basisVisits}, {"visit:entry_page", basisVisits}, {"visit:exit_page", basisVisits},
	{"visit:country", basisVisits}, {"visit:country", basisEvents},
	{"visit:utm_source", basisVisits}, {"visit:device", basisVisits}, {"visit:browser", basisVisits}, {"visit:os", basisVisits},
}

// warmRecheck bounds the loop's sleep, so that a new site or a changed
// time zone is warmed within it.
const warmRecheck = time.Hour

// partialDaysComputed counts the day partials computed by a scan rather
// than read kept (tests see that a warmed report reads only kept ones).
func (db *DB) partialDaysComputed() int64 { return db.hooks.partialScans.Load() }

// WarmPartials runs the warm-up until ctx ends: every site at once, then
// each site again at its next local midnight plus the session gap.
// A site whose round failed is logged and tried again within warmRecheck.
func (db *DB) WarmPartials(ctx context.Context, log *slog.Logger) {
	type plan struct {
		due  time.Time
		zone string
	}
	next := map[string]plan{}
	for {
		now := db.now()
		wake := now.Add(warmRecheck)
		for _, z := range db.siteZones() {
			site, loc := z.site, z.loc
			p, seen := next[site]
			due := p.due
			if !seen || !due.After(now) || p.zone != loc.String() {
				due = nextWarm(now, loc)
				if err := db.warmRound(ctx, site, loc, now); err != nil {
					if ctx.Err() != nil {
						return
					}
					if log != nil {
						log.Warn("partials warm-up", "err", err.Error())
					}
					due = now.Add(warmRecheck)
				}
				next[site] = plan{due, loc.String()}
			}
			if due.Before(wake) {
				wake = due
			}
		}
		t := time.NewTimer(wake.Sub(db.now()))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// warmRound warms site's partials, unless another instance is warming it:
// one instance warms a site at a time, and the others skip it until its
// next day (docs/postgresql.md#on-postgresql).
func (db *DB) warmRound(ctx context.Context, site string, loc *time.Location, now time.Time) error {
	_, err := db.Leader(ctx, "partials-warmup:"+site, func() error { return db.warmSite(ctx, site, loc, now) })
	return err
}

// siteZone is a site and its time zone.
type siteZone struct {
	site string
	loc  *time.Location
}

// siteZones lists the sites the warm-up covers, each with its time zone
// (a site whose zone no longer loads is left out).
func (db *DB) siteZones() []siteZone {
	var out []siteZone
	for _, site := range db.siteIDs() {
		s, ok := db.Site(site)
		if !ok {
			continue
		}
		loc, err := LoadTimeZone(s.TimeZone)
		if err != nil {
			continue
		}
		out = append(out, siteZone{site, loc})
	}
	return out
}

// nextWarm is when the warm-up next runs for a site in loc after now:
// the next local midnight plus partialMargin, when the day before closes.
func nextWarm(now time.Time, loc *time.Location) time.Time {
	l := now.In(loc)
	t := time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, loc).Add(partialMargin)
	for !t.After(now) {
		l = t.In(loc)
		t = time.Date(l.Year(), l.Month(), l.Day()+1, 0, 0, 0, 0, loc).Add(partialMargin)
	}
	return t
}

// siteIDs lists every site's id, in order.
func (db *DB) siteIDs() []string {
	db.tenants.mu.RLock()
	ids := make([]string, 0, len(db.sites))
	for id := range db.sites {
		ids = append(ids, id)
	}
	db.tenants.mu.RUnlock()
	sort.Strings(ids)
	return ids
}

// warmSite computes the kept partials of site's last warmDays closed days
// that are missing (warmSet's, then the dashboard's default property's,
// its goals' and its default funnel's), and the visit reach of the days
// before them.
func (db *DB) warmSite(ctx context.Context, site string, loc *time.Location, now time.Time) error {
	today := startOfDay(now, loc)
	all, ok := localDays(today.AddDate(0, 0, -warmComparedDays), today, loc)
	if !ok {
		return nil
	}
	var compared []localDay
	for _, d := range all {
		if !d.end.Add(partialMargin).After(now) {
			compared = append(compared, d)
		}
	}
	if len(compared) == 0 {
		return nil
	}
	days := compared[max(len(compared)-warmDays, 0):]
	// The reach of every closed day first, so that each day's event reads
	// below find them kept.
	if _, err := db.visitLookback(ctx, site, today); err != nil {
		return err
	}
	if err := db.writer.do(ctx, func(*writeTx) error { return nil }); err != nil {
		return err
	}
	for _, p := range warmSet {
		pdays := days
		if p.dim == "" {
			pdays = compared
		}
		for _, d := range pdays {
			if err := ctx.Err(); err != nil {
				return err
			}
			if _, err := db.dayPartials(ctx, site, loc, []localDay{d}, p.dim, nil, p.basis, false, now); err != nil {
				return err
			}
		}
	}
	// The property the dashboard shows by default, over the same days:
	// computing it costs the most of any panel (every event's JSON is
	// read), and a property of many values is computed but not kept
	// (keepPartial). The site's events name it, so its days without
	// events are kept too (holdsValues).
	names, err := db.PropertyNames(ctx, site, PropertyNamesMaxRows)
	if err != nil {
		return err
	}
	if prop := DefaultProperty(names); prop != "" {
		for _, d := range days {
			if err := ctx.Err(); err != nil {
				return err
			}
			if _, err := db.dayPartials(ctx, site, loc, []localDay{d}, PropPrefix+prop, nil, basisEvents, true, now); err != nil {
				return err
			}
		}
	}
	// The site's goals, as the dashboard's goal panel lists them (all of
	// them): one read per day for all goals (partial_goals.go).
	goals, err := db.Goals(ctx, site)
	if err != nil {
		return err
	}
	var goalLayout *partialLayout
	if len(goals) > 0 {
		gf := siteGoalFilters(goals)
		goalLayout = &partialLayout{dim: goalSetDim(gf), dimAt: 0, timeAt: -1, nDims: 1, goals: gf}
		for _, d := range days {
			if err := ctx.Err(); err != nil {
				return err
			}
			if _, err := db.dayPartials(ctx, site, loc, []localDay{d}, goalLayout.dim, gf, basisEvents, false, now); err != nil {
				return err
			}
		}
	}
	// And its default funnel (the goals in their order, up to 8).
	if steps := defaultFunnelSteps(goals); steps != nil {
		fq := &FunnelQuery{Site: site, Zone: loc, Steps: steps}
		m, err := db.funnelMatcher(fq)
		if err != nil {
			return err
		}
		for _, d := range days {
			if err := ctx.Err(); err != nil {
				return err
			}
			if _, err := db.funnelDayPartials(ctx, fq, m, loc, []localDay{d}, now); err != nil {
				return err
			}
		}
	}
	if err := db.writer.do(ctx, func(*writeTx) error { return nil }); err != nil {
		return err
	}
	// The merged answers of "7d" and "30d" (the days before today) into
	// the report cache, by the dimension alone or, without one, by
	// nothing and by day: the first view of the day is then warm too.
	for _, n := range []int{7, 30} {
		rng, ok := localDays(today.AddDate(0, 0, -n), today, loc)
		if !ok || rng[len(rng)-1].end.Add(partialMargin).After(now) {
			continue
		}
		for _, p := range warmSet {
			layouts := []partialLayout{{dim: p.dim, dimAt: 0, timeAt: -1, nDims: 1}}
			if p.dim == "" {
				layouts = []partialLayout{{dimAt: -1, timeAt: -1}, {unit: "day", dimAt: -1, timeAt: 0, nDims: 1}}
			}
			for _, lay := range layouts {
				if _, err := db.basisAnswer(ctx, site, loc, rng, lay, nil, p.basis, now, true); err != nil {
					return err
				}
			}
		}
		if goalLayout != nil {
			if _, err := db.basisAnswer(ctx, site, loc, rng, *goalLayout, nil, basisEvents, now, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// WarmPartialsOnce runs one round of the warm-up over every site now, and
// waits until its partials are stored (benchmarks time it).
func (db *DB) WarmPartialsOnce(ctx context.Context) error {
	now := db.now()
	for _, z := range db.siteZones() {
		if err := db.warmSite(ctx, z.site, z.loc, now); err != nil {
			return err
		}
	}
	return db.writer.do(ctx, func(*writeTx) error { return nil })
}
