package storage

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/tally-analytics/tally/storage/internal/engine"
)

// dialect is what differs between the two backends for storage: the
// engine's SQL fragments and error classes (engine.Dialect), and tables,
// what the service's own tables do differently
// (docs/postgresql.md#on-postgresql). SQL both accept is written once, with ?
// placeholders (the engine's driver_pg.go rebinds them); a statement that cannot be shared
// takes its differing fragment from here.
type dialect interface {
	engine.Dialect
	tables
}

// tables is what the service's tables do differently on each backend: the
// columns SQLite computes and PostgreSQL stores, the rollups' slot tables,
// intake's insert and locks, the funnel read and the erasure's steps.
type tables interface {
	eraseDialect // gdpr_erase.go, gdpr_erase_pg.go
	// fileCopies is nil where the database is one file that backup and
	// vacuum copy; else the error to answer them.
	fileCopies() error
	// dlqSeq is the DLQ column that numbers rows in insertion order, for
	// pages and erasure floors: SQLite's rowid, PostgreSQL's dlq.seq
	// (ctid is neither stable nor ordered).
	dlqSeq() string
	// stored is the table that holds the rows read as table: on
	// PostgreSQL the rollups are views over per-instance slot rows.
	stored(table string) string
	// pagePath is an event's (alias e) page path.
	pagePath() string
	// pageHost is the host of an event's (alias e) url, lower case,
	// without www. or port (PageHost).
	pageHost() string
	// prop is an event's (alias e) property named by the next argument,
	// as text (propText).
	prop() string
	// receivedBefore is the condition that an events row was received
	// before t, and its argument.
	receivedBefore(t time.Time) (string, any)
	// matchList is the condition that expr is one of the values listed by
	// the next argument, on a backend where a matches filter's values were
	// read and matched in Go (resolveMatches); "" where SQLite matches in
	// SQL.
	matchList(expr string) string
	// walkFunnel reads a funnel's events (r) and hands each visit's to w
	// (report_funnel.go, report_funnel_pg.go).
	walkFunnel(ctx context.Context, read *sql.DB, w *funnelWalk, r *funnelRead) error
	// insertEventSQL stores one event (insertEventSQL's arguments, then
	// eventArgs'), returning its seq when returning is set.
	insertEventSQL(returning bool) string
	// eventArgs completes the insert's arguments of e, received at recv
	// unless e says otherwise.
	eventArgs(args []any, e *IngestEvent, recv time.Time) []any
	// rollupUpsertSQL adds sums to a rollup's row of keys: arguments the
	// keys, then the sums. On PostgreSQL the row is slot's, in the
	// table's _slots table.
	rollupUpsertSQL(table string, keys, sums []string, slot int) string
	// eventIDKey is an event id as events.id_text, event_ids.id and
	// imported_ids.id hold it.
	eventIDKey(id string) any
	// lockRun locks, in one order every instance follows, what an intake
	// run of works may write that another writer may write too; the
	// works' event ids only when ids is set (intake_locks_pg.go).
	lockRun(tx *writeTx, works []*ingestWork, ids bool) error
}

// sqliteDialect is SQLite's (modernc.org/sqlite).
type sqliteDialect struct{ engine.SQLite }

func (sqliteDialect) fileCopies() error { return nil }

func (sqliteDialect) dlqSeq() string { return "rowid" }

func (sqliteDialect) stored(table string) string { return table }

// The read path's fragments (docs/postgresql.md#on-postgresql): SQLite's text
// is what it always was; PostgreSQL's gives the same values.

// pagePath is an event's (alias e) page path: a Go function SQLite calls.
func (sqliteDialect) pagePath() string { return "tally_page_path(e.url)" }

// pageHost is PageHost of an event's (alias e) url: a Go function SQLite
// calls.
func (sqliteDialect) pageHost() string { return "tally_page_host(e.url)" }

// prop is an event's (alias e) property named by the next argument, as
// text (propText).
func (sqliteDialect) prop() string { return "tally_prop(" + eventRawSQL + ", ?)" }

// receivedBefore is the condition that an events row was received before
// t, and its argument.
func (sqliteDialect) receivedBefore(t time.Time) (string, any) {
	return receivedSQL + " < ?", FormatTime(t)
}

// matchList is the condition that expr is one of the values listed by the
// next argument, on a backend where a matches filter's values were read
// and matched in Go (resolveMatches); "" where SQLite matches in SQL.
func (sqliteDialect) matchList(expr string) string { return "" }

// insertEventSQL: SQLite's triggers write event_pages, and its generated
// columns path, props and received_ms.
func (sqliteDialect) insertEventSQL(returning bool) string {
	if returning {
		return insertEventSQL + ` RETURNING seq`
	}
	return insertEventSQL
}

func (sqliteDialect) eventArgs(args []any, _ *IngestEvent, _ time.Time) []any { return args }

func (sqliteDialect) rollupUpsertSQL(table string, keys, sums []string, _ int) string {
	return rollupUpsert(table, keys, sums, "", "")
}

// rollupUpsert is the rollup upsert into table, with an extra key column
// of the constant value when column is set.
func rollupUpsert(table string, keys, sums []string, column, value string) string {
	cols, vals, conflict := append([]string{}, keys...), strings.Repeat("?, ", len(keys)), append([]string{}, keys...)
	if column != "" {
		cols, vals, conflict = append(cols, column), vals+value+", ", append(conflict, column)
	}
	cols = append(cols, sums...)
	vals += strings.TrimSuffix(strings.Repeat("?, ", len(sums)), ", ")
	set := make([]string, len(sums))
	for i, c := range sums {
		set[i] = c + " = " + table + "." + c + " + excluded." + c
	}
	return `INSERT INTO ` + table + `(` + strings.Join(cols, ", ") + `) VALUES (` + vals + `)
			ON CONFLICT(` + strings.Join(conflict, ", ") + `) DO UPDATE SET ` + strings.Join(set, ", ")
}

func (sqliteDialect) eventIDKey(id string) any { return dedupKey(id) }

// lockRun: the writer is SQLite's only one.
func (sqliteDialect) lockRun(*writeTx, []*ingestWork, bool) error { return nil }
