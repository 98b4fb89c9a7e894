package storage

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// eraseChunk bounds the rows one writer job of an erasure deletes (events,
// sessions, DLQ rows, links and profiles), so that intake runs between the
// jobs; like siteDeleteChunk, a few milliseconds of the writer.
const eraseChunk = 250

// eraseSweepChunk is how many rowids of events, sessions and DLQ one sweep
// job scans for rows the subject sent while the erasure ran.
const eraseSweepChunk = 2000

// erasePhase is where an erasure stands.
type erasePhase int

const (
	// phaseWalk empties the subject's anon ids one by one: events,
	// sessions and DLQ rows.
	phaseWalk erasePhase = iota
	// phaseSweep scans the rows written since the erasure began, for
	// those of anon ids the walk had already passed.
	phaseSweep
	// phaseLinks deletes the links (and, for an anon id, the profiles of
	// the users linked to it) and the DLQ rows tagged with the user.
	phaseLinks
)

// eraser is one erasure in progress. Its jobs run one after another on the
// writer goroutine, so its fields need no lock.
type eraser struct {
	db     *DB
	site   string
	s      Subject
	phase  erasePhase
	counts SubjectCounts

	// lt is where the subject's links are (intake_links.go), as the erasure
	// began: if the old table held some then, it is read to the end.
	lt linkTables
	// linkCursor is the anon id of the last link emptied (user subjects),
	// and walked how many links the walk has passed.
	linkCursor string
	walked     int

	// jobs counts the writer jobs the erasure has begun: every one before
	// the current one has committed, and while it is the first, nothing
	// but the erasure has written since it began.
	jobs int
	// done says that only the last job's work is left.
	done bool
	// dlq counts the DLQ rows deleted (which the answer does not count).
	dlq int64

	// Rows written after the erasure began have rowids above these floors
	// (the lowest table maximum seen after any of its jobs), and the sweep
	// has scanned up to them.
	floors [3]int64
	// settled is, on PostgreSQL, where every row at or below is committed
	// or rolled back for good (eraseSettle, gdpr_erase_pg.go), as of the start
	// of job settledJob; the sweep scans no further. -1 on SQLite, whose
	// one writer commits in rowid order.
	settled    [3]int64
	settledJob int
	// stalled: the sweep reached a settled mark older than the job, so the
	// job ends and the next one settles again first.
	stalled bool
}

// sweepTable is a table the sweep scans, by its rowid (named rowid).
type sweepTable struct{ table, rowid string }

// sweepTables are scanned by the sweep, with the floors index of each: the
// DLQ's insertion order is the dialect's (dlqSeq).
func (e *eraser) sweepTables() [3]sweepTable {
	return [3]sweepTable{{"events", "seq"}, {"sessions", "id"}, {"dlq", e.db.d.dlqSeq()}}
}

// EraseSubject hard-deletes the subject's rows of events, sessions,
// user_profiles and identity_links, and the DLQ rows tagged with the
// subject, and subtracts the erased events and sessions from the daily
// rollups (deleting the rollup rows that reach zero), so counts stay exact.
//
// Every subject is erased in steps of at most eraseChunk rows each, a few
// milliseconds apiece, run by writer jobs (job). A subject with at most
// eraseWholeRows rows and eraseChunk links (nearly every one) is erased in
// one transaction with its audit row (docs/gdpr.md): no reader sees it
// half gone. A larger one's jobs take more steps only while no other job
// waits for the writer, up to eraseJobRows rows (a heavy user's whole
// erasure), and commit as soon as one does, with a rest as long as the job
// after it, so that a subject with a million events cannot hold the writer
// for seconds. The steps go first through the subject's anon ids one by
// one (events, sessions, DLQ rows), then, if an earlier job has committed,
// a sweep of the rows written meanwhile, then the links, and last the
// deletion of what is left (the profile, the remaining links and anything
// sent since) with the gdpr.delete audit row and the total counts, in the
// job of the last steps when nobody waits then, else in a job of its own.
// Links go last, so an erasure cut short (crash, shutdown, failed job)
// leaves a subject that still resolves and a repeat finishes it; that
// repeat's counts and audit row cover only what it deleted itself. It runs
// to the end even if ctx is cancelled. A repeat on a purged subject finds
// nothing and returns zero counts.
func (db *DB) EraseSubject(ctx context.Context, actor Actor, site *Site, s Subject) (SubjectCounts, error) {
	ctx = context.WithoutCancel(ctx)
	e := newEraser(db, site.ID, s)
	audit := func(tx *eraseTx) error {
		tx.OnCommit(db.intake.forget) // the subject's anon ids leave memory too
		return db.audit(tx.writeTx, site.WorkspaceID, actor, "gdpr.delete", site.ID, map[string]any{
			"subject_kind": s.kind(), "subject_hash": s.hash(), "counts": e.counts})
	}
	for {
		if err := db.d.eraseSettle(ctx, e); err != nil {
			return SubjectCounts{}, err
		}
		var held time.Duration
		var finished, busy bool
		err := db.writer.doOwn(ctx, func(tx *writeTx) error {
			db.hooks.eraseJobs.Add(1)
			if err := db.checkSite(site); err != nil {
				return err
			}
			start := time.Now()
			var err error
			finished, busy, err = e.job(tx, db.writer.Waiting, audit)
			held = time.Since(start)
			return err
		})
		if err != nil {
			return SubjectCounts{}, err
		}
		if finished {
			db.d.eraseVacuum(ctx, db)
			return e.counts, nil
		}
		if !busy && !db.writer.Busy() {
			continue // nobody waited for the writer: nobody to make room for
		}
		// Other jobs waited (when the job ended, or since: during its
		// commit): rest as long as the job held the writer, so
		// that they commit on their own and the erasure takes at most half
		// of the writer's time (and half as many WAL frames wait for each
		// checkpoint). With 300,000 events this took the p99 of another
		// site's single events during the erasure from 21-37 ms to 10-12
		// ms, for an erasure of 9 s instead of 5 (docs/gdpr.md).
		db.hooks.eraseRests.Add(1)
		time.Sleep(held)
	}
}

// newEraser is an erasure of s on site, not yet begun.
func newEraser(db *DB, site string, s Subject) *eraser {
	return &eraser{db: db, site: site, s: s, lt: db.links(), floors: [3]int64{-1, -1, -1}, settled: [3]int64{-1, -1, -1}}
}

// eraseDialect is what an erasure does differently per backend (docs/gdpr.md);
// the dialect embeds it. SQLite's methods are here, PostgreSQL's in
// gdpr_erase_pg.go.
type eraseDialect interface {
	// eraseSettle runs before each writer job of e, outside it: on
	// PostgreSQL it waits until the rows the next job may scan are all
	// committed or rolled back (settled, floors).
	eraseSettle(ctx context.Context, e *eraser) error
	// unroll subtracts rows (each the key columns of r.table, then its
	// amounts) from r.table, deleting the rows it would leave empty.
	unroll(tx *eraseTx, r rollupTable, rows [][]any) error
	// eraseVacuum runs after an erasure's last job: on PostgreSQL it
	// prunes the erased rows' bytes from the tables' pages.
	eraseVacuum(ctx context.Context, db *DB)
	// linkCreatedMS is a link's created_at as Unix ms.
	linkCreatedMS() string
	// someRows matches the rows of table that cond (which may end in a
	// LIMIT) matches in from (table, with a hint), each named by handle.
	someRows(table, handle, from, cond string) string
}

// eraseSettle: SQLite's one writer commits in rowid order, so the highest
// rowid after a job is a floor at once.
func (sqliteDialect) eraseSettle(context.Context, *eraser) error { return nil }

// eraseVacuum: secure_delete overwrites each deleted row as it goes.
func (sqliteDialect) eraseVacuum(context.Context, *DB) {}

func (sqliteDialect) linkCreatedMS() string { return linkCreatedMS }

func (sqliteDialect) someRows(_, handle, from, cond string) string {
	return handle + ` IN (SELECT ` + handle + ` FROM ` + from + ` WHERE ` + cond + `)`
}

// eraseWholeRows is the most events, sessions and DLQ rows a subject may
// have to be erased in one transaction whether or not others wait: a few
// milliseconds of the writer, like a site delete's chunk.
const eraseWholeRows = 1000

// mayBeWhole reports whether the subject may still be one erased in one
// transaction: the erasure is in its first job and has deleted at most
// eraseWholeRows rows of events, sessions and DLQ, and passed or deleted
// at most eraseChunk links.
func (e *eraser) mayBeWhole() bool {
	return e.jobs == 1 && e.counts.Events+e.counts.Sessions+e.dlq <= eraseWholeRows &&
		e.walked <= eraseChunk && e.counts.IdentityLinks <= eraseChunk
}

// step runs one step of the erasure as a job of its own (tests run an
// erasure step by step with it) and reports whether only the last job is
// left.
func (e *eraser) step(tx *writeTx) (done bool, err error) {
	e.jobs++
	err = runErase(e.db, tx, func(tx *eraseTx) error {
		if e.done, err = e.advance(tx); err != nil {
			return err
		}
		return e.lowerFloors(tx)
	})
	return e.done, err
}

// eraseJobRows is the most rows (events, sessions, DLQ rows, links) one
// writer job of a large erasure deletes while no other job waits for the
// writer: twice what a small subject's one transaction may hold, so that a
// heavy user (about 200 devices, 1,000 events and 200 sessions:
// docs/benchmarks.md#reads) is erased in one transaction and one commit.
const eraseJobRows = 2 * eraseWholeRows

// job is one writer job of an erasure: a step, then more in the same
// transaction. The first job takes its steps whatever other jobs do while
// the subject may still be one erased whole (mayBeWhole), so such a
// subject is erased in one transaction; from then on, a job takes another
// step only while no other job waits for the writer (waiting) and the rows
// it deleted leave room for one within eraseJobRows. At its end come the
// rollup subtractions of all its steps (flush). A job that arrives
// meanwhile waits for the step under way, those subtractions and the
// commit: at most eraseJobRows rows' worth, or in the first job a whole
// subject's and a step. When the steps are done and nobody waits, the job
// also runs the last job's work and final (the audit row); when the steps
// were done by an earlier job, it runs only those. It reports whether the
// erasure is finished, and whether other jobs wait (busy) once its work is
// done.
func (e *eraser) job(tx *writeTx, waiting func() bool, final func(*eraseTx) error) (finished, busy bool, err error) {
	e.jobs++
	err = runErase(e.db, tx, func(tx *eraseTx) error {
		for !e.done {
			var err error
			if e.done, err = e.advance(tx); err != nil {
				return err
			}
			if e.db.hooks.eraseStep != nil {
				e.db.hooks.eraseStep(e, tx)
			}
			if e.stalled {
				e.stalled = false
				return e.lowerFloors(tx)
			}
			if e.mayBeWhole() {
				continue
			}
			if busy = waiting(); busy || (!e.done && tx.rows+eraseChunk > eraseJobRows) {
				return e.lowerFloors(tx)
			}
		}
		if err := e.last(tx); err != nil {
			return err
		}
		finished = true
		return final(tx)
	})
	if err != nil {
		return false, false, err
	}
	return finished, busy || waiting(), nil
}

// advance is step's work.
func (e *eraser) advance(tx *eraseTx) (done bool, err error) {
	switch e.phase {
	case phaseWalk:
		err = e.walk(tx)
	case phaseSweep:
		var caughtUp bool
		caughtUp, err = e.sweep(tx, eraseSweepChunk)
		if err == nil && caughtUp {
			e.phase = phaseLinks
		}
	case phaseLinks:
		done, err = e.links(tx)
	}
	return done, err
}

// lowerFloors records the tables' highest rowids at the end of a job that
// leaves work for the next. SQLite gives a new row the highest rowid plus
// one, so anything written later lands above the lowest of these, even
// where the erasure deleted the top rows (the sweep then scans a few
// emptied rowids again). Within a job nothing else writes, so once per job
// is enough.
func (e *eraser) lowerFloors(tx *eraseTx) error {
	for i, t := range e.sweepTables() {
		var top int64
		if err := tx.QueryRow(`SELECT COALESCE(MAX(` + t.rowid + `), 0) FROM ` + t.table).Scan(&top); err != nil {
			return err
		}
		if e.floors[i] < 0 || top < e.floors[i] {
			e.floors[i] = top
		}
	}
	return nil
}

// eraseWalkLinks is how many of a user's links one walk job takes as its
// window: each costs an index lookup per table, so that anon ids with
// nothing left (say, thousands forged by someone who knows the site id)
// cost little.
const eraseWalkLinks = 1000

// walk empties anon ids of the subject until eraseChunk rows are spent.
// A user's anon ids are walked in windows of eraseWalkLinks links, in anon
// id order, which the (site_id, user_id, anon_id) index gives without
// sorting; each job deletes the window's events, then its sessions, then
// its DLQ rows, one statement each, until its budget is spent, and the next
// job starts again at the same window until it is empty. A link added
// while the walk runs may sort before the cursor: when the walk reaches the
// end and the user has more links than it passed, it walks them all again
// (anon ids already emptied cost an index search each), so the devices
// linked meanwhile are emptied too.
func (e *eraser) walk(tx *eraseTx) error {
	if e.s.UserID == "" {
		n, err := e.eraseAnon(tx, e.s.AnonID, eraseChunk)
		if err == nil && n < eraseChunk {
			// No sweep: the last job erases by the anon id whatever it
			// sent meanwhile.
			e.phase = phaseLinks
		}
		return err
	}
	var links int
	var hi string
	st, err := tx.stmt(`SELECT COUNT(*), COALESCE(MAX(anon_id), '') FROM (SELECT anon_id FROM ` + e.lt.byUser("") + `
		WHERE site_id = ?1 AND user_id = ?2 AND anon_id > ?3 ORDER BY anon_id LIMIT ?4) w`)
	if err != nil {
		return err
	}
	if err := st.QueryRow(e.site, e.s.UserID, e.linkCursor, eraseWalkLinks).Scan(&links, &hi); err != nil {
		return err
	}
	budget := int64(eraseChunk)
	window := `site_id = ?1 AND anon_id IN (SELECT anon_id FROM ` + e.lt.byUser("") + `
		WHERE site_id = ?1 AND user_id = ?2 AND anon_id > ?3 AND anon_id <= ?4)`
	for _, t := range e.tables() {
		if links == 0 {
			break
		}
		n, err := t.erase(tx, window+` LIMIT ?5`, e.site, e.s.UserID, e.linkCursor, hi, budget)
		if err != nil {
			return err
		}
		*t.count += n
		if budget -= n; budget == 0 {
			return nil // the next job starts again at this window
		}
	}
	if links > 0 {
		e.linkCursor = hi
		e.walked += links
	}
	if links < eraseWalkLinks {
		var now int
		if err := tx.QueryRow(`SELECT COUNT(*) FROM `+e.lt.byUser("")+` WHERE site_id = ?1 AND user_id = ?2`,
			e.site, e.s.UserID).Scan(&now); err != nil {
			return err
		}
		if now > e.walked {
			e.linkCursor, e.walked = "", 0 // links were added: once more from the start
			return nil
		}
		e.phase = phaseSweep
		if e.jobs == 1 {
			// Nothing but this job has written since the erasure began:
			// there is nothing to sweep.
			e.phase = phaseLinks
		}
	}
	return nil
}

// eraseTable is a table the walk and the sweep delete from: erase deletes
// the rows that cond matches (cond may end in a LIMIT) and count is where
// the erasure counts them.
type eraseTable struct {
	erase func(tx *eraseTx, cond string, args ...any) (int64, error)
	count *int64
}

// tables are events, sessions and dlq, in the order of sweepTables.
func (e *eraser) tables() [3]eraseTable {
	return [3]eraseTable{{eraseEvents, &e.counts.Events}, {eraseSessions, &e.counts.Sessions}, {eraseDLQ, &e.dlq}}
}

// eraseAnon deletes up to limit of the anon id's events, sessions and DLQ
// rows (all of them when limit is negative) and returns how many went.
func (e *eraser) eraseAnon(tx *eraseTx, anon string, limit int64) (int64, error) {
	var total int64
	for _, t := range e.tables() {
		cond, args := `site_id = ?1 AND anon_id = ?2`, []any{e.site, anon}
		if limit >= 0 {
			if total >= limit {
				break
			}
			cond += ` LIMIT ?3`
			args = append(args, limit-total)
		}
		n, err := t.erase(tx, cond, args...)
		if err != nil {
			return 0, err
		}
		*t.count += n
		total += n
	}
	return total, nil
}

// sweepMatch matches a row of table belonging to the subject, by its own
// columns and the links still present.
func (e *eraser) sweepMatch(table string) string {
	if e.s.UserID == "" {
		return `anon_id = ?2`
	}
	linked := e.lt.linked(table)
	if table == "dlq" {
		return `(user_id = ?2 OR ` + linked + `)`
	}
	return linked
}

// sweep scans up to chunk rowids of each table above its floor (all of
// them when chunk is negative) and erases the subject's rows among them:
// those sent to anon ids the walk had already passed. It reports whether
// it reached the end of every table. On PostgreSQL a bounded sweep goes
// no further than the settled mark (rows above it may belong to
// transactions still running): reaching one settled at this job's start
// is the end; reaching an older one stalls the job, so that the next
// settles first.
func (e *eraser) sweep(tx *eraseTx, chunk int64) (caughtUp bool, err error) {
	caughtUp = true
	for i, t := range e.sweepTables() {
		var top int64
		if err := tx.QueryRow(`SELECT COALESCE(MAX(` + t.rowid + `), 0) FROM ` + t.table).Scan(&top); err != nil {
			return false, err
		}
		if chunk >= 0 && e.settled[i] >= 0 && e.settled[i] < top {
			top = e.settled[i]
			if e.settledJob != e.jobs && e.floors[i]+chunk >= top {
				caughtUp, e.stalled = false, true
			}
		}
		hi := top
		if chunk >= 0 && e.floors[i]+chunk < top {
			hi, caughtUp = e.floors[i]+chunk, false
		}
		if hi <= e.floors[i] {
			continue
		}
		// +site_id keeps SQLite on the rowid range rather than the
		// site's index, which would walk all of the site's rows.
		cond := t.rowid + ` > ?3 AND ` + t.rowid + ` <= ?4 AND ` + e.db.d.NoIndex("site_id") + ` = ?1 AND ` + e.sweepMatch(t.table)
		et := e.tables()[i]
		n, err := et.erase(tx, cond, e.site, e.s.id(), e.floors[i], hi)
		if err != nil {
			return false, err
		}
		*et.count += n
		e.floors[i] = hi
	}
	return caughtUp, nil
}

// links deletes up to eraseChunk of the subject's links, with, for an anon
// id, the profiles of the users they link, and the DLQ rows tagged with a
// user subject. It reports whether none are left.
func (e *eraser) links(tx *eraseTx) (done bool, err error) {
	if e.s.UserID != "" {
		d := e.db.d
		n, err := deleteRows(tx, "dlq", d.someRows("dlq", d.dlqSeq(), "dlq", `site_id = ?1 AND user_id = ?2 LIMIT ?3`), e.site, e.s.UserID, eraseChunk)
		e.dlq += n
		if err != nil || n == eraseChunk {
			return false, err
		}
		n, err = deleteRows(tx, "identity_links", `site_id = ?1 AND user_id = ?2 AND `+d.someRows("identity_links", "anon_id",
			"identity_links"+d.IndexedBy("identity_links_user"), `site_id = ?1 AND user_id = ?2 LIMIT ?3`),
			e.site, e.s.UserID, eraseChunk)
		e.counts.IdentityLinks += n
		if err != nil || !e.lt.old || n == eraseChunk {
			return n < eraseChunk, err
		}
		m, err := deleteRows(tx, oldLinksTable, `rowid IN (SELECT rowid FROM `+oldLinksTable+` INDEXED BY identity_links_site_user
			WHERE site_id = ?1 AND user_id = ?2 LIMIT ?3)`, e.site, e.s.UserID, eraseChunk-n)
		e.counts.IdentityLinks += m
		return n+m < eraseChunk, err
	}
	rows, err := tx.Query(`SELECT user_id FROM `+e.lt.any("")+` WHERE site_id = ? AND anon_id = ? LIMIT ?`, e.site, e.s.AnonID, eraseChunk)
	if err != nil {
		return false, err
	}
	var users []string
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			rows.Close()
			return false, err
		}
		users = append(users, u)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, err
	}
	for _, u := range users {
		n, err := deleteRows(tx, "user_profiles", `site_id = ?1 AND user_id = ?2`, e.site, u)
		if err != nil {
			return false, err
		}
		e.counts.UserProfiles += n
		n, err = e.deleteLinks(tx, false, `site_id = ?1 AND anon_id = ?2 AND user_id = ?3`, e.site, e.s.AnonID, u)
		if err != nil {
			return false, err
		}
		e.counts.IdentityLinks += n
	}
	return len(users) < eraseChunk, nil
}

// deleteLinks deletes the links matched by where from the table, and from
// the old one while it may hold some (intake_links.go), each searched by user
// when byUser (see linkTables.deleteFrom).
func (e *eraser) deleteLinks(tx *eraseTx, byUser bool, where string, args ...any) (int64, error) {
	var total int64
	for _, table := range e.lt.deleteFrom(byUser) {
		n, err := deleteRows(tx, table, where, args...)
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// finish is the erasure's last job: whatever the subject sent since the
// previous jobs, then the profile, the remaining links and DLQ rows. Each
// is at most a few rows, unless the subject keeps writing faster than the
// erasure advances.
func (e *eraser) finish(tx *writeTx) error {
	e.jobs++
	return runErase(e.db, tx, e.last)
}

// last is finish's work.
func (e *eraser) last(tx *eraseTx) error {
	if e.s.AnonID != "" {
		if _, err := e.eraseAnon(tx, e.s.AnonID, -1); err != nil {
			return err
		}
	} else if e.jobs > 1 { // in the first job nothing else was written
		if _, err := e.sweep(tx, -1); err != nil {
			return err
		}
	}
	for _, d := range []struct {
		table, where string
		n            *int64
	}{
		{"dlq", e.s.dlqWhere(e.db.d, e.lt), &e.dlq},
		{"user_profiles", e.s.profileWhere(e.lt), &e.counts.UserProfiles},
	} {
		n, err := deleteRows(tx, d.table, d.where, e.site, e.s.id())
		if err != nil {
			return err
		}
		*d.n += n
	}
	n, err := e.deleteLinks(tx, e.s.UserID != "", e.s.linkWhere(), e.site, e.s.id())
	e.counts.IdentityLinks += n
	return err
}

// eraseTx is one writer job of an erasure: its transaction, the statements
// it prepared, and the rollup subtractions it owes. Its statements are
// prepared once per job, not once per device or rollup row, and the
// subtractions of everything the job deleted are summed before they are
// applied (flush), so a rollup row shared by many of a user's devices (a
// day, a page) is updated once per job (docs/benchmarks.md#reads).
type eraseTx struct {
	*writeTx
	db       *DB
	stmts    map[string]*sql.Stmt
	bound    map[*sql.Stmt]*sql.Stmt
	days     map[dayKey]int64
	dims     map[dimKey]int64
	sessions map[[2]string]*sessionDelta
	// rows counts the rows the job deleted.
	rows int64
}

// runErase runs f as a job of an erasure on tx and applies what it owes to
// the rollups, in the same transaction.
func runErase(db *DB, tx *writeTx, f func(*eraseTx) error) error {
	et := &eraseTx{writeTx: tx, db: db, stmts: map[string]*sql.Stmt{}, bound: map[*sql.Stmt]*sql.Stmt{}, days: map[dayKey]int64{},
		dims: map[dimKey]int64{}, sessions: map[[2]string]*sessionDelta{}}
	defer func() {
		for _, st := range et.stmts {
			st.Close()
		}
	}()
	if err := f(et); err != nil {
		return err
	}
	return et.flush()
}

// stmtOf returns st, prepared on the write connection, bound to the job's
// transaction, once per job.
func (tx *eraseTx) stmtOf(st *sql.Stmt) *sql.Stmt {
	b, ok := tx.bound[st]
	if !ok {
		b = tx.Stmt(st)
		tx.bound[st] = b
	}
	return b
}

// stmt returns query prepared in the job's transaction, once per job.
func (tx *eraseTx) stmt(query string) (*sql.Stmt, error) {
	if st, ok := tx.stmts[query]; ok {
		return st, nil
	}
	st, err := tx.Prepare(query)
	if err != nil {
		return nil, err
	}
	tx.stmts[query] = st
	return st, nil
}

// deleteRows deletes the rows of table matched by where.
func deleteRows(tx *eraseTx, table, where string, args ...any) (int64, error) {
	st, err := tx.stmt(`DELETE FROM ` + table + ` WHERE ` + where)
	if err != nil {
		return 0, fmt.Errorf("erase %s: %w", table, err)
	}
	res, err := st.Exec(args...)
	if err != nil {
		return 0, fmt.Errorf("erase %s: %w", table, err)
	}
	n, err := res.RowsAffected()
	tx.rows += n
	return n, err
}

// eraseEventsSelect reads what eraseEvents needs of each event it
// deletes: its rowid and what the rollups count it under.
const eraseEventsSelect = `SELECT seq, site_id, substr(ts, 1, 10), type, url, referrer, COALESCE(country, ''), COALESCE(browser, ''),
	COALESCE(os, ''), COALESCE(device_type, '') FROM events WHERE `

// eraseEvents deletes the events that cond matches and owes their
// subtraction from daily_events and daily_dimensions (see flush). It
// reads them first and deletes them by rowid, rather than with one
// DELETE ... RETURNING: SQLite runs RETURNING as a trigger, which reads
// every column of each row, keeps the answer in a temporary table and
// makes the statement copy each page it changes into a statement journal;
// on a heavy user's events the two statements took 20% less time.
func eraseEvents(tx *eraseTx, cond string, args ...any) (int64, error) {
	st, err := tx.stmt(eraseEventsSelect + cond)
	if err != nil {
		return 0, fmt.Errorf("erase events: %w", err)
	}
	rows, err := st.Query(args...)
	if err != nil {
		return 0, fmt.Errorf("erase events: %w", err)
	}
	var seqs []any
	for rows.Next() {
		var seq int64
		var site, day, typ, country, browser, os, device string
		var u, ref *string
		if err := rows.Scan(&seq, &site, &day, &typ, &u, &ref, &country, &browser, &os, &device); err != nil {
			rows.Close()
			return 0, err
		}
		seqs = append(seqs, seq)
		tx.days[dayKey{site, day, typ}]++
		if typ == "pageview" {
			for d, v := range dimensionValues(u, ref, country, browser, os, device) {
				tx.dims[dimKey{site, day, Dimensions[d], v}]++
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("erase events: %w", err)
	}
	return deleteRowids(tx, "events", "seq", seqs)
}

// eraseSessionsSelect reads what eraseSessions needs of each session it
// deletes.
const eraseSessionsSelect = `SELECT id, site_id, started_ms, ended_ms, event_count FROM sessions WHERE `

// eraseSessions deletes the sessions that cond matches and owes their
// subtraction from daily_sessions (see flush), read first and deleted
// by rowid like eraseEvents.
func eraseSessions(tx *eraseTx, cond string, args ...any) (int64, error) {
	st, err := tx.stmt(eraseSessionsSelect + cond)
	if err != nil {
		return 0, fmt.Errorf("erase sessions: %w", err)
	}
	rows, err := st.Query(args...)
	if err != nil {
		return 0, fmt.Errorf("erase sessions: %w", err)
	}
	var ids []any
	for rows.Next() {
		var id int64
		var site string
		var start, end, count int64
		if err := rows.Scan(&id, &site, &start, &end, &count); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
		s, en := msTime(start), msTime(end)
		key := [2]string{site, FormatTime(s)[:10]}
		d := tx.sessions[key]
		if d == nil {
			d = &sessionDelta{}
			tx.sessions[key] = d
		}
		d.sessions++
		d.durationMS += en.Sub(s).Milliseconds()
		d.events += count
		if count == 1 {
			d.bounces++
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("erase sessions: %w", err)
	}
	return deleteRowids(tx, "sessions", "id", ids)
}

// eraseDLQ deletes the DLQ rows that cond matches.
func eraseDLQ(tx *eraseTx, cond string, args ...any) (int64, error) {
	d := tx.db.d
	return deleteRows(tx, "dlq", d.someRows("dlq", d.dlqSeq(), "dlq", cond), args...)
}

// deleteBatches are the sizes of deleteRowids' statements: the smaller for
// the few rows of most subjects, the larger a step's worth.
var deleteBatches = [2]int{16, eraseChunk}

// deleteRowids deletes the rows of table whose rowid (named rowid) is one
// of ids, a batch of rowids per statement (unused places are NULLs, which
// match no row).
func deleteRowids(tx *eraseTx, table, rowid string, ids []any) (int64, error) {
	var total int64
	for len(ids) > 0 {
		size := deleteBatches[1]
		if len(ids) <= deleteBatches[0] {
			size = deleteBatches[0]
		}
		n := min(len(ids), size)
		args := make([]any, size)
		copy(args, ids[:n])
		m, err := deleteRows(tx, table, rowid+` IN (?`+strings.Repeat(`, ?`, size-1)+`)`, args...)
		if err != nil {
			return total, err
		}
		total += m
		ids = ids[n:]
	}
	return total, nil
}

// flush subtracts the erased events and sessions from the rollups, so every
// count is exact again, and deletes the rollup rows left empty: an erased
// page's path or referrer host must not stay behind at count 0. It runs
// once at the end of a job, with what all its steps deleted summed per
// rollup row: a heavy user's steps in one job share about a quarter of
// their rollup rows (2,290 rows subtracted step by step, 1,669 summed).
func (tx *eraseTx) flush() error {
	// The partials of the erased rows' days go too, so that their
	// sketches are computed again from the remaining events.
	touched := map[[2]string]bool{}
	for k := range tx.days {
		touched[[2]string{k.site, k.day}] = true
	}
	for k := range tx.sessions {
		touched[k] = true
	}
	if len(touched) > 0 {
		dp, err := tx.stmt(dropPartialsSQL)
		if err != nil {
			return fmt.Errorf("erase day partials: %w", err)
		}
		if err := dropDays(tx.writeTx, func(args ...any) error { _, err := dp.Exec(args...); return err }, touched); err != nil {
			return fmt.Errorf("erase day partials: %w", err)
		}
	}
	// Each table's rows in the order of their keys (intake_lock_order.go).
	days := make([][]any, 0, len(tx.days))
	for _, k := range sortedKeys(tx.days, compareDayKeys) {
		days = append(days, []any{k.site, k.day, k.typ, tx.days[k]})
	}
	dims := make([][]any, 0, len(tx.dims))
	for _, k := range sortedKeys(tx.dims, compareDimKeys) {
		dims = append(dims, []any{k.site, k.day, k.dim, k.value, tx.dims[k]})
	}
	sessions := make([][]any, 0, len(tx.sessions))
	for _, k := range sortedKeys(tx.sessions, comparePairs) {
		d := tx.sessions[k]
		sessions = append(sessions, []any{k[0], k[1], d.sessions, d.durationMS, d.events, d.bounces})
	}
	for i, subtraction := range [][][]any{days, dims, sessions} {
		if err := tx.db.d.unroll(tx, rollupTables[i], subtraction); err != nil {
			return err
		}
	}
	return nil
}

// rollupTable is a rollup flush subtracts from: its key columns, and
// the columns it subtracts a row's amounts from, in their order. A row
// stays while the first of those stays above zero, and is deleted when the
// subtraction would take it to zero or below (a count, or a day's
// sessions).
type rollupTable struct {
	table   string
	keys    []string
	amounts []string
}

// rollupTables are the rollups flush subtracts from, in its order.
var rollupTables = []rollupTable{
	{"daily_events", []string{"site_id", "day", "type"}, []string{"count"}},
	{"daily_dimensions", []string{"site_id", "day", "dimension", "value"}, []string{"count"}},
	{"daily_sessions", []string{"site_id", "day"}, []string{"sessions", "duration_ms", "events", "bounces"}},
}

// unrollStmts are unroll's statements, prepared once on the write
// connection at open: per rollup table, the subtraction and the deletion.
type unrollStmts map[string][2]*sql.Stmt

func prepareUnroll(ctx context.Context, write *sql.DB) (unrollStmts, error) {
	out := unrollStmts{}
	for _, r := range rollupTables {
		var st [2]*sql.Stmt
		for i, q := range unrollSQL(r) {
			var err error
			if st[i], err = write.PrepareContext(ctx, q); err != nil {
				return nil, fmt.Errorf("prepare unroll %s: %w", r.table, err)
			}
		}
		out[r.table] = st
	}
	return out, nil
}

// unroll subtracts rows (each the key columns of r.table, then its
// amounts) from r.table, and deletes the rows it would leave empty. Each
// row is one search of the table's primary key: the subtraction updates
// the row only if it stays above zero, and only a row it left alone is
// deleted (or was not there). Two statements per row, an UPDATE that
// always subtracts then a DELETE of the row if left empty, searched each
// row twice; batches of a hundred rows per statement (an UPDATE ... FROM
// a list of VALUES) spent as much again on the list's temporary tables and
// on a statement journal: on a heavy user's 1,355 rows of
// daily_dimensions this takes half the time of those batches (docs/gdpr.md).
func (sqliteDialect) unroll(tx *eraseTx, r rollupTable, rows [][]any) error {
	st := tx.db.unroll[r.table]
	up, del := tx.stmtOf(st[0]), tx.stmtOf(st[1])
	for _, row := range rows {
		res, err := up.Exec(row...)
		if err != nil {
			return fmt.Errorf("unroll %s: %w", r.table, err)
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			if err != nil {
				return fmt.Errorf("unroll %s: %w", r.table, err)
			}
			continue
		}
		if _, err := del.Exec(row[:len(r.keys)]...); err != nil {
			return fmt.Errorf("unroll %s: %w", r.table, err)
		}
	}
	return nil
}

// unrollSQL is unroll's two statements for r, each searching one row by
// the table's primary key: the subtraction of a row's amounts if the first
// stays above zero, and the deletion.
func unrollSQL(r rollupTable) [2]string {
	match := make([]string, len(r.keys))
	for i, k := range r.keys {
		match[i] = fmt.Sprintf("%s = ?%d", k, i+1)
	}
	set := make([]string, len(r.amounts))
	for i, a := range r.amounts {
		set[i] = fmt.Sprintf("%s = %s - ?%d", a, a, len(r.keys)+1+i)
	}
	where := strings.Join(match, " AND ")
	return [2]string{
		`UPDATE ` + r.table + ` SET ` + strings.Join(set, ", ") + ` WHERE ` + where + fmt.Sprintf(" AND %s > ?%d", r.amounts[0], len(r.keys)+1),
		`DELETE FROM ` + r.table + ` WHERE ` + where,
	}
}
