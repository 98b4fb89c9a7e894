package storage

import (
	"cmp"
	"context"
	"database/sql"
	"slices"
	"time"
)

// pgChanges keeps the change counts of day partials in partial_changes,
// where every instance's writes count
// (docs/query-api.md#how-reports-stay-fast): a row per site, UTC hour and
// instance slot, so that two instances never update one row (a generation per
// site and hour would be a row every instance's every commit updates). utc_hour
// holds the hour times changeSlots plus the slot; an instance's writes are its
// writer's, one transaction at a time, so its rows are never contended. Readers
// sum the rows of a range's hours over the slots.
type pgChanges struct {
	read *sql.DB
	slot int64
	now  func() time.Time
}

// changeSlots is how many slots an hour's rows may have: the rollup slots'
// bound (maxSlots), so every instance has its own.
const changeSlots = maxSlots

// wideHour is the hour under which a change of every day of a site is
// counted, summed into every range.
const wideHour = -(int64(1) << 50)

// changeSkew is how far another instance's clock may be ahead of this
// one's as far as closing days goes (below).
const changeSkew = time.Minute

// bump counts the change. Only the hours that a kept partial or cached
// report may already cover are counted: those that started more than
// partialMargin (less changeSkew) ago. A day is kept, and a range cached,
// only partialMargin after its end, so a change of a later hour cannot be
// in any, and a partial or report computed after it reads it. So today's
// intake, in its first half hour of each hour, writes no row at all.
func (c *pgChanges) bump(tx *writeTx, site, span string) error {
	var hours []int64
	lo, hi, ok := utcSpan(span)
	if !ok { // "" or not a span: every day of the site
		hours = []int64{wideHour}
	} else {
		cut := c.now().Add(-partialMargin + changeSkew).UnixMilli()
		for t := lo; t < hi && t < cut; t += hourMS {
			hours = append(hours, floorDiv(t, hourMS))
		}
	}
	if len(hours) == 0 {
		return nil
	}
	keys := make([]int64, len(hours))
	for i, h := range hours {
		keys[i] = h*changeSlots + c.slot // ascending: intake_lock_order.go
	}
	_, err := tx.Exec(`INSERT INTO partial_changes(site_id, utc_hour, gen) SELECT ?, h, 1 FROM unnest(?::bigint[]) h
		ON CONFLICT (site_id, utc_hour) DO UPDATE SET gen = partial_changes.gen + 1`, site, keys)
	return err
}

// changeRows reads the counts of site (and of every site) over the hours
// of [from, to) and the wide ones, handing each row's hour and count to
// each.
func (c *pgChanges) changeRows(ctx context.Context, site string, from, to time.Time, each func(hour int64, gen uint64)) error {
	lo := floorDiv(from.UnixMilli(), hourMS)
	hi := floorDiv(to.UnixMilli()-1, hourMS) + 1
	rows, err := c.read.QueryContext(ctx, `SELECT utc_hour, gen FROM partial_changes
		WHERE site_id IN (?, '') AND (utc_hour >= ? AND utc_hour < ? OR utc_hour >= ? AND utc_hour < ?)`,
		site, lo*changeSlots, hi*changeSlots, wideHour*changeSlots, (wideHour+1)*changeSlots)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var key int64
		var gen uint64
		if err := rows.Scan(&key, &gen); err != nil {
			return err
		}
		each(floorDiv(key, changeSlots), gen)
	}
	return rows.Err()
}

func (c *pgChanges) sum(ctx context.Context, site string, from, to time.Time) (uint64, error) {
	var n uint64
	err := c.changeRows(ctx, site, from, to, func(_ int64, gen uint64) { n += gen })
	return n, err
}

func (c *pgChanges) dayGens(ctx context.Context, site string, days []localDay) ([]uint64, error) {
	gens := make([]uint64, len(days))
	err := c.changeRows(ctx, site, days[0].start, days[len(days)-1].end, func(h int64, gen uint64) {
		if h == wideHour {
			for i := range gens {
				gens[i] += gen
			}
			return
		}
		// Every day that overlaps the hour (a local day need not start on
		// a UTC hour); days are in order.
		i, _ := slices.BinarySearchFunc(days, h*hourMS, func(d localDay, ms int64) int { return cmp.Compare(d.end.UnixMilli(), ms+1) })
		for ; i < len(days) && days[i].start.UnixMilli() < (h+1)*hourMS; i++ {
			gens[i] += gen
		}
	})
	return gens, err
}
