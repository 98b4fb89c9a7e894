package storage

import (
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
)

// lockRun takes, before a run writes anything, a transaction-scoped
// advisory lock for every row key two instances could both write: each
// visitor (sessions, identity links), user (profiles), DLQ row and
// credential not yet in the credentials table, and with ids each event id
// (event_ids). They are taken in one statement, in ascending order, so
// two instances' runs wait on each other there and never deadlock later
// on rows they both touch (docs/postgresql.md#on-postgresql). The rollups
// need none: each instance writes its own slot.
//
// The ids need no lock in a run that is its transaction's whole content
// (runMerged's alone): its one dedup statement inserts them in ascending
// order (flushRows), so of two runs sharing ids the one that waits on the
// other's holds none of the ids it waits for, and its only other holds are
// these locks, which the other already has. A transaction of several
// units makes one dedup statement per unit, whose orders do not agree:
// LockAll takes their ids here first (ids set). An import's ids are always
// locked: it checks imported_ids row by row.
func (d pgDialect) lockRun(tx *writeTx, works []*ingestWork, ids bool) error {
	var keys []int64
	add := func(kind byte, a, b string) {
		keys = append(keys, runLockKey(kind, a, b))
	}
	var creds []string
	for _, w := range works {
		for i := range w.events {
			e := &w.events[i]
			if ids || w.imported {
				add('e', e.SiteID, e.ID)
			}
			add('v', e.SiteID, e.AnonID)
			if e.UserID != nil {
				add('u', e.SiteID, *e.UserID)
			}
			if e.Credential != "" && !d.creds.known(e.Credential) && !slices.Contains(creds, e.Credential) {
				creds = append(creds, e.Credential)
			}
		}
		for _, q := range w.dlq {
			add('d', q.SiteID, q.ID)
		}
	}
	newCreds, err := d.creds.missing(tx, creds)
	if err != nil {
		return err
	}
	for _, c := range newCreds {
		add('c', c, "")
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	// unnest yields the array's order; a sort in SQL could run after the
	// locks are taken.
	_, err = tx.Exec(`SELECT count(pg_advisory_xact_lock(k)) FROM unnest(?::bigint[]) k`, keys)
	return err
}

// runLockKey is the advisory lock key of a row of kind keyed by a and b.
func runLockKey(kind byte, a, b string) int64 {
	h := fnv.New64a()
	h.Write([]byte{kind})
	h.Write([]byte(a))
	h.Write([]byte{0})
	h.Write([]byte(b))
	return int64(h.Sum64())
}

// knownCredentials are the credentials an instance has found committed
// in the credentials table. A credential's row is never deleted nor its
// code changed, so once seen there it needs no lock again: runs only read
// its code. Only a credential's first uses, where two instances could
// both insert its row (one would then fail on the unique index, or wait
// for the other outside lockRun's order), take its lock. Locking every
// event's credential made every two runs of one key wait on each other:
// two instances mostly took turns (docs/benchmarks.md#postgresql).
type knownCredentials struct {
	mu sync.Mutex
	m  map[string]bool
}

// known reports whether cred's row was seen committed.
func (k *knownCredentials) known(cred string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.m[cred]
}

// missing returns those of creds the credentials table lacks, and
// remembers the others as known once tx commits: an earlier work of the
// same transaction may have inserted one, and a rollback would undo it. A
// row committed after this statement's snapshot is missed only to be
// locked needlessly once.
func (k *knownCredentials) missing(tx *writeTx, creds []string) ([]string, error) {
	if len(creds) == 0 {
		return nil, nil
	}
	rows, err := tx.Query(`SELECT credential FROM credentials WHERE credential = ANY(?::text[])`, creds)
	if err != nil {
		return nil, fmt.Errorf("known credentials: %w", err)
	}
	defer rows.Close()
	found := map[string]bool{}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, fmt.Errorf("known credentials: %w", err)
		}
		found[c] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("known credentials: %w", err)
	}
	var out []string
	for _, c := range creds {
		if !found[c] {
			out = append(out, c)
		}
	}
	if len(found) > 0 {
		tx.OnCommit(func() {
			k.mu.Lock()
			defer k.mu.Unlock()
			if k.m == nil {
				k.m = map[string]bool{}
			}
			for c := range found {
				k.m[c] = true
			}
		})
	}
	return out, nil
}
