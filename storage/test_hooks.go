package storage

import (
	"sync/atomic"
	"time"
)

// testHooks are what tests set and read on a DB to see how work is cut
// and what it reads, without timing it: counters the code bumps, funcs it
// calls when set, and the knobs tests lower. Production code never reads a
// counter here to decide anything; a nil func is no call.
type testHooks struct {
	// sessionRowsRead counts the sessions rows intake has read, so that
	// tests can see the writer's reads stay bounded without timing them.
	sessionRowsRead atomic.Int64
	// profileRunBytes, when set by a test, is told the bytes of profile
	// traits each intake run that merged identifies read and wrote, so
	// that tests can see the runs stay bounded without timing them.
	profileRunBytes func(read, written int64)
	// siteDeleteJob, when set by a test, is told the rows of each table
	// every writer job of deleteSite removed (final for its last job), so
	// that tests can see the jobs stay bounded without timing them.
	siteDeleteJob func(table string, rows int64, final bool)
	// sourcemapJobBytes, when set by a test, is told the bytes of map each
	// writer job of a sourcemap upload, delete or prune wrote or freed, so
	// that tests can see the jobs stay bounded without timing them.
	sourcemapJobBytes func(bytes int64)
	// purgeJob, when set by a test, is told the rows of each table every
	// writer job of Purge removed and how long its work took.
	purgeJob func(table string, rows int64, took time.Duration)
	// partialScans counts the day partials computed rather than read
	// kept (partial_warmup.go).
	partialScans atomic.Int64
	// matchReads and matchValues count the reads of a dimension's values
	// that matches filters make on PostgreSQL, and the values they read
	// (query_match_values.go), so that tests can see them stay one a dimension
	// and within the range without timing them.
	matchReads, matchValues atomic.Int64
	// eraseJobs counts the writer jobs erasures ran, so tests can tell a
	// whole erasure from a chunked one.
	eraseJobs atomic.Int64
	// eraseRests counts the rests large erasures took between two of their
	// jobs, because other jobs waited for the writer.
	eraseRests atomic.Int64
	// eraseStep, when set by a test, runs on the writer goroutine after
	// each step of a large erasure, before the job asks whether other jobs
	// wait: a test can queue one there, or look at the erasure and its
	// transaction.
	eraseStep func(e *eraser, tx *eraseTx)
	// eraseSettleWaits, when set by a test, runs each time an erasure
	// waits for other transactions to end (gdpr_erase_pg.go).
	eraseSettleWaits func()

	// exactVisitorsBelow is ExactVisitorsBelow; tests lower it to compare
	// estimates of small ranges with their exact figures.
	exactVisitorsBelow int64
}
