package storage

import (
	"context"
	"encoding/binary"
	"time"
)

// Visit reach (docs/query-api.md#how-reports-stay-fast): the query API
// reads a range's events through the visits that overlap it, found by
// their start (sessions_site_start). A visit has no bound on its length (a
// run of events with no gap over 30 minutes), so the visits that started
// before the range and still run into it are found from the reach of each
// earlier UTC hour: the latest end of the visits starting in it. Kept per
// UTC day in day_partials (basis "reach"), where every writer job that
// changes a visit deletes the row of the visit's start day, as for the
// other partials, so a kept reach is never short.

const (
	basisReach = "reach"
	reachZone  = "UTC"
	hourMS     = int64(time.Hour / time.Millisecond)
)

// visitTimeArg is t as the sessions' time columns that their indexes key
// hold it (started_ms, ended_ms: docs/intake.md#visits, Stored form).
func visitTimeArg(t time.Time) any { return t.UnixMilli() }

// reachSQL reads the latest end of the visits starting in each UTC hour
// (floored: a start before 1970 is negative) of a site's range of starts,
// through sessions_site_start.
const reachSQL = `SELECT started_ms - ((started_ms % 3600000) + 3600000) % 3600000, MAX(ended_ms)
	FROM sessions WHERE site_id = ? AND started_ms >= ? AND started_ms < ? GROUP BY 1`

// encodeReach writes a day's 24 hourly reaches: for each hour, 0 when no
// visit starts in it, else 1 + its latest end in ms after the hour's
// start.
func encodeReach(dayStart int64, reach [24]int64) []byte {
	var b []byte
	for h, r := range reach {
		if r == 0 {
			b = binary.AppendUvarint(b, 0)
			continue
		}
		b = binary.AppendUvarint(b, uint64(r-(dayStart+int64(h)*hourMS))+1)
	}
	return b
}

// decodeReach reads what encodeReach wrote; false when b is malformed.
func decodeReach(dayStart int64, b []byte) ([24]int64, bool) {
	var reach [24]int64
	for h := range reach {
		x, k := binary.Uvarint(b)
		if k <= 0 {
			return reach, false
		}
		b = b[k:]
		if x > 0 {
			reach[h] = dayStart + int64(h)*hourMS + int64(x-1)
		}
	}
	return reach, len(b) == 0
}

// visitLookback returns the earliest start a visit of site that runs into
// from can have: every visit starting before it ended before from. It is
// from itself when no earlier visit reaches from.
func (db *DB) visitLookback(ctx context.Context, site string, from time.Time) (time.Time, error) {
	first, ok, err := db.FirstVisit(ctx, site)
	if err != nil || !ok || !first.Before(from) {
		return from, err
	}
	fromMS := from.UnixMilli()
	day0 := first.UTC().Truncate(24 * time.Hour).UnixMilli()
	// Through the UTC day holding from's last millisecond before it.
	dayN := time.UnixMilli(fromMS - 1).UTC().Truncate(24 * time.Hour).UnixMilli()
	n := int((dayN-day0)/dayMS) + 1
	gen := db.writer.gens.daysGen(site, time.UnixMilli(day0), time.UnixMilli(dayN+dayMS))
	var dayGens []uint64
	if db.writer.gens.stored != nil {
		utcDays := make([]localDay, n)
		for i := range utcDays {
			utcDays[i] = localDay{start: time.UnixMilli(day0 + int64(i)*dayMS), end: time.UnixMilli(day0 + int64(i+1)*dayMS)}
		}
		if dayGens, err = db.storedDayGens(ctx, site, utcDays); err != nil {
			return from, err
		}
	}
	reach := make([][24]int64, n)
	kept := make([]bool, n)
	rows, err := db.read.QueryContext(ctx, `SELECT day_start, data FROM day_partials
		WHERE site_id = ? AND zone = ? AND dim = '' AND basis = ? AND day_start >= ? AND day_start <= ?`,
		site, reachZone, basisReach, day0, dayN)
	if err != nil {
		return from, err
	}
	for rows.Next() {
		var start int64
		var data []byte
		if err := rows.Scan(&start, &data); err != nil {
			rows.Close()
			return from, err
		}
		i := int((start - day0) / dayMS)
		if (start-day0)%dayMS != 0 || i < 0 || i >= n {
			continue
		}
		if dayGens != nil {
			var ok bool
			if data, ok = openPartial(data, dayGens[i]); !ok {
				continue // another instance changed its day since
			}
		}
		// A malformed row is computed again, as a missing one.
		reach[i], kept[i] = decodeReach(start, data)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return from, err
	}
	lo, hi := -1, -1
	for i := range kept {
		if !kept[i] {
			if lo < 0 {
				lo = i
			}
			hi = i
		}
	}
	if lo >= 0 {
		// The missing days from the first to the last in one read of their
		// visits' start and end (kept days between them are read again).
		start, end := day0+int64(lo)*dayMS, day0+int64(hi+1)*dayMS
		rows, err := db.read.QueryContext(ctx, reachSQL, site, visitTimeArg(time.UnixMilli(start)), visitTimeArg(time.UnixMilli(end)))
		if err != nil {
			return from, err
		}
		fresh := make([][24]int64, hi-lo+1)
		for rows.Next() {
			var hour, last int64
			if err := rows.Scan(&hour, &last); err != nil {
				rows.Close()
				return from, err
			}
			i := int((hour - start) / dayMS)
			if hour < start || i >= len(fresh) {
				continue
			}
			h := (hour - start - int64(i)*dayMS) / hourMS
			fresh[i][h] = max(fresh[i][h], last)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return from, err
		}
		now := db.now().UnixMilli()
		var store []int
		for k := range fresh {
			i := lo + k
			if kept[i] {
				continue
			}
			reach[i] = fresh[k]
			if day0+int64(i+1)*dayMS+partialMargin.Milliseconds() <= now {
				store = append(store, i)
			}
		}
		db.storeReach(site, gen, dayGens, day0, reach, store)
	}
	for i := range reach {
		for h, r := range reach[i] {
			hourStart := day0 + int64(i)*dayMS + int64(h)*hourMS
			if hourStart >= fromMS {
				break
			}
			if r >= fromMS {
				return time.UnixMilli(hourStart).UTC(), nil
			}
		}
	}
	return from, nil
}

// storeReach keeps the reach of the days at idx by a writer job the query
// does not wait for, unless a change to site's visits committed since gen.
// Where several instances write, each is sealed with its day's count in
// dayGens (sealPartial).
func (db *DB) storeReach(site string, gen uint64, dayGens []uint64, day0 int64, reach [][24]int64, idx []int) {
	if len(idx) == 0 {
		return
	}
	j := db.writer.newJob(len(idx), func(tx *writeTx) error {
		if tx.gens.daysGen(site, time.UnixMilli(day0), time.UnixMilli(day0+int64(len(reach))*dayMS)) != gen {
			return nil
		}
		if _, ok := db.Site(site); !ok {
			return nil
		}
		for _, i := range idx {
			start := day0 + int64(i)*dayMS
			data := encodeReach(start, reach[i])
			if dayGens != nil {
				data = sealPartial(data, dayGens[i])
			}
			if _, err := tx.Exec(storePartialSQL, site, reachZone, "", basisReach, start, start+dayMS, data); err != nil {
				return err
			}
		}
		tx.MarkWritten()
		return nil
	})
	// A full queue or a closing database only leaves the days to compute
	// again next time.
	_ = db.writer.Enqueue(context.Background(), j, false)
}
