package storage

import (
	"hash/fnv"
	"slices"
)

// lockRun takes, before a run writes anything, a transaction-scoped
// advisory lock for every row key two instances could both write: each
// event id (event_ids), visitor (sessions, identity links), user
// (profiles) and new credential. They are taken in one statement, in
// ascending order, so two instances' runs wait on each other there and
// never deadlock later on rows they both touch (README "Storage", "On
// PostgreSQL"). The rollups need none: each instance writes its own slot.
func (pgDialect) lockRun(tx *writeTx, works []*ingestWork) error {
	var keys []int64
	add := func(kind byte, a, b string) {
		h := fnv.New64a()
		h.Write([]byte{kind})
		h.Write([]byte(a))
		h.Write([]byte{0})
		h.Write([]byte(b))
		keys = append(keys, int64(h.Sum64()))
	}
	for _, w := range works {
		for i := range w.events {
			e := &w.events[i]
			add('e', e.SiteID, e.ID)
			add('v', e.SiteID, e.AnonID)
			if e.UserID != nil {
				add('u', e.SiteID, *e.UserID)
			}
			if e.Credential != "" {
				add('c', e.Credential, "")
			}
		}
		for _, q := range w.dlq {
			add('d', q.SiteID, q.ID)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	// unnest yields the array's order; a sort in SQL could run after the
	// locks are taken.
	_, err := tx.Exec(`SELECT count(pg_advisory_xact_lock(k)) FROM unnest(?::bigint[]) k`, keys)
	return err
}
