package storage

import (
	"fmt"
	"time"

	"github.com/tally-analytics/tally/storage/internal/engine"
)

// This file holds how intake jobs share the writer's transactions: which
// jobs run merged, how a failed merged run is retried, and when the memo of
// visitors' newest sessions may stand in for the sessions table. Its tests
// are in intake_job_test.go; TestSessionsWhateverTheArrival
// (intake_sessions_test.go) checks the sessions that come out of any mix of
// merged runs, retries and other writes.

// ingestWork is one Ingest call's share of a writer batch: the part of an
// intake job. The writer hands the works of consecutive intake jobs to
// intake.runMerged together, so a visitor's session rows and the daily
// rollups are written once per batch rather than once per request.
type ingestWork struct {
	events   []IngestEvent
	dlq      []Quarantined
	received time.Time
	// stored is each event's raw as events.raw holds it (storedRaw),
	// compressed on the caller's goroutine rather than the writer's, and
	// receivedAt what events.received_at holds ('' where stored keeps it).
	stored     []any
	receivedAt []string
	// imported marks an import's work (import_events.go): its ids are checked
	// against imported_ids, and it uses no quota.
	imported bool

	// Outputs, valid once the job is committed.
	dup      []bool
	accepted int
	usage    map[string]int // site -> events accepted, for the quota book
	// traitsDropped are, per event, the traits its profile did not take.
	traitsDropped [][]string
}

// ingestJob returns the writer job that stores events and dlq, and the
// work that holds its outcome once the job is committed.
func (db *DB) ingestJob(events []IngestEvent, dlq []Quarantined, stats func(time.Duration)) (*ingestWork, *job) {
	w := &ingestWork{events: events, dlq: dlq, received: db.now().UTC(), dup: make([]bool, len(events)), stored: make([]any, len(events)),
		receivedAt: make([]string, len(events)), traitsDropped: make([][]string, len(events))}
	recv := FormatTime(w.received)
	for i := range events {
		r := recv
		if t := events[i].ReceivedAt; !t.IsZero() {
			r = FormatTime(t)
		}
		w.stored[i], w.receivedAt[i] = storedRaw(events[i].Raw, fieldsOf(&events[i]), FormatTime(events[i].TS), r)
	}
	_, users := profileCut(events, len(events))
	weight := len(events) + len(dlq) + profileWeight*users
	j := engine.NewPart(&db.intake, w, weight)
	j.Stats = stats
	return w, j
}

// MaxJobProfiles is the most users one intake job merges identifies of.
// Each profile the job touches is read and written whole, up to
// MaxProfileBytes each, so this bounds the profile bytes a job rewrites
// (512 KiB, about what its events' own bytes may be) however the job's
// identifies are spread over users; a request with identifies of more
// users is stored in more jobs (JobLength).
const MaxJobProfiles = 16

// profileWeight is what merging into one profile weighs in a job (the
// writer's batches hold at most maxBatchWeight): about what rewriting
// a profile at the cap costs, in events.
const profileWeight = 16

// JobLength is how many of events, from the first, the next writer job of
// a request takes: at most max, and identifies of at most MaxJobProfiles
// users (docs/intake.md#profile-caps).
func JobLength(events []IngestEvent, max int) int {
	n, _ := profileCut(events[:min(len(events), max)], MaxJobProfiles)
	return n
}

// profileCut returns how many of events, from the first, hold identifies
// of at most limit users, and how many users those are.
func profileCut(events []IngestEvent, limit int) (n, users int) {
	var seen map[[2]string]bool
	for i := range events {
		e := &events[i]
		if e.Type != "identify" || e.UserID == nil {
			continue
		}
		k := [2]string{e.SiteID, *e.UserID}
		if seen[k] {
			continue
		}
		if len(seen) == limit {
			return i, len(seen)
		}
		if seen == nil {
			seen = map[[2]string]bool{}
		}
		seen[k] = true
	}
	return len(events), len(seen)
}

// result is what Ingest answers for a committed work.
func (w *ingestWork) result() IngestResult {
	return IngestResult{Duplicate: w.dup, Accepted: w.accepted, TraitsDropped: w.traitsDropped}
}

// intake is the merge group of intake jobs (see mergeGroup), and keeps the
// memo of visitors' newest sessions that merged runs read and fill.
//
// A run stores all its works or fails as a whole. The writer then runs each
// work again alone, in a savepoint of its own, so one bad request (say,
// traits SQLite's json() refuses) fails only itself
// (TestMergedIngestIsolatesAFailingRequest); every work therefore starts
// its outputs over when it runs.
type intake struct {
	db   *DB
	memo latestSessions
}

// runMerged stores the works in parts (each an *ingestWork) in tx as one
// unit: their events and DLQ rows, then the sessions and rollups of them
// all at once.
func (in *intake) runMerged(tx *writeTx, parts []any, alone bool) error {
	db := in.db
	run := &ingestRun{db: db, tx: tx, days: map[dayKey]int{}, usage: map[[2]string]int{}, dims: map[dimKey]int{},
		sessDays: map[[2]string]*sessionDelta{}, groups: map[[2]string][]*IngestEvent{}, linked: map[[3]string]bool{},
		hours: map[[2]string]bool{}}
	// The memo holds only while no other writer can change a session
	// between two transactions: on PostgreSQL other instances can, and a
	// run reads all its visitors' sessions in one statement instead
	// (intake_sessions_pg.go).
	if alone && db.d.SoleWriter() {
		if !in.memo.current(tx) {
			in.memo.clear()
		}
		run.memo = &in.memo
	}
	works := make([]*ingestWork, len(parts))
	for i, p := range parts {
		works[i] = p.(*ingestWork)
	}
	// An alone run's ids need no lock: its one dedup statement takes them
	// in order (flushRows). Otherwise LockAll took them.
	if err := db.d.lockRun(tx, works, false); err != nil {
		return fmt.Errorf("lock the run's rows: %w", err)
	}
	wrote := false
	for _, p := range parts {
		w := p.(*ingestWork)
		clear(w.dup)
		clear(w.traitsDropped)
		w.accepted = 0
		w.usage = map[string]int{}
		if err := run.add(w); err != nil {
			return err
		}
		wrote = wrote || w.accepted > 0 || len(w.dlq) > 0
	}
	// On PostgreSQL the works' events are written now, at once.
	if err := run.flushRows(); err != nil {
		return err
	}
	for _, w := range works {
		wrote = wrote || w.accepted > 0
	}
	if err := run.finish(); err != nil {
		return err
	}
	if wrote {
		tx.MarkWritten() // a run of duplicates only may write no page
	}
	if alone && db.d.SoleWriter() {
		// Even with nothing to add, the memo stays current past this
		// transaction.
		latest, seq := run.latest, tx.Seq
		tx.OnCommit(func() { in.memo.put(latest, seq) })
	}
	return db.share().spend(tx, works)
}

// lockAll locks the rows of every part before the first writes (see
// preLocker); runMerged's own lockRun then takes locks the transaction
// already holds.
func (in *intake) lockAll(tx *writeTx, parts []any) error {
	works := make([]*ingestWork, len(parts))
	for i, p := range parts {
		works[i] = p.(*ingestWork)
	}
	return in.db.d.lockRun(tx, works, true)
}

// latestSessions remembers each recent visitor's newest session as last
// committed, so that an event arriving in order (the usual case) joins it
// without reading the sessions table. Only the writer goroutine uses it.
//
// The rule that keeps it equal to the table: it is filled only after the
// commit of a run that was its transaction's whole content (alone), and
// read only by such a run whose transaction directly follows the one that
// last filled it. Any other transaction in between (an erasure, a site
// delete, a mixed batch, a retried run, a failed commit) may have changed
// sessions behind its back, so the next run that would read it empties it
// instead (TestSessionsAfterOtherWritesInTheSameCommit,
// TestSessionsMemoAfterARetriedRun).
type latestSessions struct {
	m   map[string]session // site + "\x00" + anon id -> newest session
	seq uint64             // the transaction (writeTx.seq) that last filled m
}

// latestSessionsMax bounds the memo (about 400 bytes an entry with its visit,
// 150 before visits); when full it starts over, which costs one read per
// visitor.
const latestSessionsMax = 100_000

// current reports whether no transaction came between the one that last
// filled the memo and tx.
func (l *latestSessions) current(tx *writeTx) bool {
	return l.seq == tx.Seq-1
}

// get returns the memo's newest session of the visitor key. A nil memo, as
// a run that may not trust it has, knows none.
func (l *latestSessions) get(key string) (session, bool) {
	if l == nil {
		return session{}, false
	}
	s, ok := l.m[key]
	return s, ok
}

// put records newest, committed by transaction seq.
func (l *latestSessions) put(newest map[string]session, seq uint64) {
	if l.m == nil || len(l.m)+len(newest) > latestSessionsMax {
		l.m = make(map[string]session, len(newest))
	}
	for k, s := range newest {
		l.m[k] = s
	}
	l.seq = seq
}

func (l *latestSessions) clear() { l.m = nil }

// forget empties the memo at once. Erasure, site deletion and reset call
// it when they commit: the next run would empty it anyway (it is no longer
// current), but until then it would keep the ids of the visitors whose
// data just went, in memory, on an idle server for as long as it runs.
func (in *intake) forget() { in.memo.clear() }
