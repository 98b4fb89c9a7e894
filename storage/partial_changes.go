package storage

import (
	"context"
	"encoding/binary"
	"time"
)

// storedChanges keeps the change counts of day partials in the database,
// where several instances write it (docs/query-api.md#how-reports-stay-fast):
// each instance's partialGens only sees its own writer's commits. nil on
// SQLite, whose one writer's counts are the whole truth.
type storedChanges interface {
	// bump counts, in tx, a change of site's partials of the UTC date or
	// hour span ("" for all its days; site "" for every site).
	bump(tx *writeTx, site, span string) error
	// sum is a count that moves whenever a change of site's partials of
	// any UTC hour of [from, to) commits.
	sum(ctx context.Context, site string, from, to time.Time) (uint64, error)
	// dayGens is, for each of days, such a count over the day.
	dayGens(ctx context.Context, site string, days []localDay) ([]uint64, error)
}

// changesGen is the count of changes of site's partials over [from, to):
// this instance's (partialGens) plus, where other instances write too,
// theirs, so that a cached report is served only while no instance
// changed its days.
func (db *DB) changesGen(ctx context.Context, site string, from, to time.Time) (uint64, error) {
	g := db.writer.gens
	n := g.daysGen(site, from, to)
	if g.stored == nil {
		return n, nil
	}
	m, err := g.stored.sum(ctx, site, from, to)
	return n + m, err
}

// storedDayGens is, where other instances write too, each day's count of
// changes as the database has it, read before the partials: a kept
// partial carries the count of its day when its reads began
// (sealPartial), so a partial whose day another instance changed
// meanwhile is computed again, whichever committed first. nil otherwise.
func (db *DB) storedDayGens(ctx context.Context, site string, days []localDay) ([]uint64, error) {
	if db.writer.gens.stored == nil {
		return nil, nil
	}
	return db.writer.gens.stored.dayGens(ctx, site, days)
}

// sealPartial is a partial as kept where several instances write: its
// day's count of changes (storedDayGens) when its reads began, then the
// partial.
func sealPartial(data []byte, gen uint64) []byte {
	return append(binary.AppendUvarint(nil, gen), data...)
}

// openPartial is the partial sealed in data, if its count is gen (no
// change of its day committed since its reads began).
func openPartial(data []byte, gen uint64) ([]byte, bool) {
	g, n := binary.Uvarint(data)
	if n <= 0 || g != gen {
		return nil, false
	}
	return data[n:], true
}
