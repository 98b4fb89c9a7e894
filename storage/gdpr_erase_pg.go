package storage

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// eraseSettlePoll is how often eraseSettle looks whether the transactions
// it waits for have ended: intake's last milliseconds.
const eraseSettlePoll = 5 * time.Millisecond

// eraseSettle makes the rows the next job may scan final (docs/gdpr.md, On
// PostgreSQL). Sequences are not commit-ordered across instances: a row
// numbered below the highest visible one may still be in a transaction of
// another instance, and would be missed by a walk or sweep that passed its
// number. Before an erasure's first job and each job of its sweep, it reads
// each table's highest visible number and then which transactions hold a write
// lock on the table, and waits until those have ended. A transaction takes its
// lock on the table before it draws a number from the sequence and keeps it to
// its end, and a number drawn after the read is above the highest visible one,
// so once they have ended every row at or below it is committed or rolled back
// for good. The first job's walk then sees every row numbered up to the floors,
// and the sweep scans the rest, up to the mark settled before its job. It waits
// outside any transaction, so it holds nothing another instance could wait
// for.
func (pgDialect) eraseSettle(ctx context.Context, e *eraser) error {
	if e.jobs > 0 && e.phase != phaseSweep {
		return nil
	}
	tables := e.sweepTables()
	var tops [3]int64
	var held string
	q := `SELECT (SELECT COALESCE(MAX(seq), 0) FROM events), (SELECT COALESCE(MAX(id), 0) FROM sessions),
		(SELECT COALESCE(MAX(seq), 0) FROM dlq),
		(SELECT COALESCE(string_agg(DISTINCT virtualtransaction, ','), '') FROM pg_locks
			WHERE locktype = 'relation' AND mode = 'RowExclusiveLock' AND pid <> pg_backend_pid()
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND relation IN ('events'::regclass, 'sessions'::regclass, 'dlq'::regclass))`
	if tables[2].rowid != "seq" {
		return fmt.Errorf("erase: the DLQ's sweep column is %s, want seq", tables[2].rowid)
	}
	// One statement: its snapshot, taken first, gives the maxima; the
	// locks are read after it.
	if err := e.db.read.QueryRowContext(ctx, q).Scan(&tops[0], &tops[1], &tops[2], &held); err != nil {
		return fmt.Errorf("erase: settle: %w", err)
	}
	// Each transaction holds the lock of its own virtual id to its end.
	for held != "" {
		if e.db.hooks.eraseSettleWaits != nil {
			e.db.hooks.eraseSettleWaits()
		}
		time.Sleep(eraseSettlePoll)
		if err := e.db.read.QueryRowContext(ctx, `SELECT COALESCE(string_agg(virtualxid, ','), '') FROM pg_locks
			WHERE locktype = 'virtualxid' AND virtualxid = ANY(string_to_array(?, ','))`, held).Scan(&held); err != nil {
			return fmt.Errorf("erase: settle: %w", err)
		}
	}
	e.settled, e.settledJob = tops, e.jobs+1
	if e.jobs == 0 {
		e.floors = tops
	}
	return nil
}

// unroll subtracts the erased rows from the instance's own slot, and
// deletes a key's slot rows when the subtraction takes their sum to zero,
// so that no page path or referrer host of the subject stays behind in a
// slot row the view hides (docs/postgresql.md#on-postgresql). The key's
// slot rows are locked first (FOR UPDATE, in key order like intake's
// updates) and only those are deleted: a slot row another instance
// inserts meanwhile keeps its count.
func (pgDialect) unroll(tx *eraseTx, r rollupTable, rows [][]any) error {
	stored := r.table + "_slots"
	match := make([]string, len(r.keys))
	for i, k := range r.keys {
		match[i] = fmt.Sprintf("%s = ?%d", k, i+1)
	}
	where := strings.Join(match, " AND ")
	lock, err := tx.stmt(`SELECT slot, ` + r.amounts[0] + ` FROM ` + stored + ` WHERE ` + where + ` ORDER BY slot FOR UPDATE`)
	if err != nil {
		return fmt.Errorf("unroll %s: %w", r.table, err)
	}
	del, err := tx.stmt(`DELETE FROM ` + stored + ` WHERE ` + where + fmt.Sprintf(` AND slot = ANY(?%d)`, len(r.keys)+1))
	if err != nil {
		return fmt.Errorf("unroll %s: %w", r.table, err)
	}
	add, err := tx.stmt(rollupUpsert(stored, r.keys, r.amounts, "slot", fmt.Sprint(tx.db.pg.slot)))
	if err != nil {
		return fmt.Errorf("unroll %s: %w", r.table, err)
	}
	for _, row := range rows {
		keys := row[:len(r.keys)]
		locked, err := lock.Query(keys...)
		if err != nil {
			return fmt.Errorf("unroll %s: %w", r.table, err)
		}
		var slots []int64
		var sum int64
		for locked.Next() {
			var slot, first int64
			if err := locked.Scan(&slot, &first); err != nil {
				locked.Close()
				return fmt.Errorf("unroll %s: %w", r.table, err)
			}
			slots, sum = append(slots, slot), sum+first
		}
		locked.Close()
		if err := locked.Err(); err != nil {
			return fmt.Errorf("unroll %s: %w", r.table, err)
		}
		if sum-row[len(r.keys)].(int64) <= 0 {
			if len(slots) > 0 {
				if _, err := del.Exec(append(append([]any{}, keys...), slots)...); err != nil {
					return fmt.Errorf("unroll %s: %w", r.table, err)
				}
			}
			continue
		}
		args := append([]any{}, keys...)
		for _, a := range row[len(r.keys):] {
			args = append(args, -a.(int64))
		}
		if _, err := add.Exec(args...); err != nil {
			return fmt.Errorf("unroll %s: %w", r.table, err)
		}
	}
	return nil
}

// eraseVacuumTables held the subject's rows (the slot rows held its page
// paths and referrer hosts).
const eraseVacuumTables = `events, event_pages, sessions, dlq, identity_links, user_profiles,
	daily_events_slots, daily_dimensions_slots, daily_sessions_slots`

// eraseVacuum prunes the erased rows from the tables' pages and their
// index entries (INDEX_CLEANUP ON: PostgreSQL would otherwise skip the
// indexes when few pages changed), as SQLite's secure_delete does at each
// deletion (docs/gdpr.md). VACUUM cannot remove a row that a transaction
// older than the erasure may still read, and the bytes stay in WAL and
// backups for as long as the operator keeps them. A failure only leaves
// the bytes to autovacuum: the rows are gone from every read already, so
// it is logged, not answered.
//
// PARALLEL 0: left to itself, PostgreSQL starts a worker per index beyond
// the first for events and sessions, which only slowed it here: an
// erasure's few dead rows leave each index a plain scan, shorter than a
// worker's start. At 1M events (docs/postgresql.md#reads-at-10m, load 15
// on 2 cores, interleaved) the VACUUM took 1.8-3.1 s with the workers,
// 1.1-1.7 s without; the rows pruned are the same.
func (pgDialect) eraseVacuum(ctx context.Context, db *DB) {
	if _, err := db.read.ExecContext(ctx, `VACUUM (INDEX_CLEANUP ON, PARALLEL 0) `+eraseVacuumTables); err != nil && db.writer.log != nil {
		db.writer.log.Warn("vacuum after erasure failed; autovacuum will prune the erased rows", "err", err)
	}
}

// linkCreatedMS: PostgreSQL's links were always created as Unix ms.
func (pgDialect) linkCreatedMS() string { return "created_at" }

// someRows names the rows by ctid, gathered first (an array, computed
// once): a plan PostgreSQL cannot turn into a search of the whole table
// per row, which it chose for an IN subquery over tables without
// statistics yet (20 s for a user's 50,000 links, docs/gdpr.md).
func (pgDialect) someRows(table, _, _, cond string) string {
	return `ctid = ANY(ARRAY(SELECT ctid FROM ` + table + ` WHERE ` + cond + `))`
}
