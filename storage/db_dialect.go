package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dialect is what differs between the two backends' SQL and errors: the
// one place the storage layer asks which database it talks to
// (docs/postgresql.md#on-postgresql). SQL both accept is written once, with ?
// placeholders (db_driver_pg.go rebinds them); a statement that cannot be shared
// takes its differing fragment from here.
type dialect interface {
	eraseDialect // gdpr_erase.go, gdpr_erase_pg.go
	// name is "sqlite" or "postgres".
	name() string
	// classify tells what an error of the database means for its caller.
	classify(err error) errClass
	// fileCopies is nil where the database is one file that backup and
	// vacuum copy; else the error to answer them.
	fileCopies() error
	// rowHandle is the column that names a row for as long as a
	// transaction holds it: rowid, or PostgreSQL's ctid.
	rowHandle() string
	// dlqSeq is the DLQ column that numbers rows in insertion order, for
	// pages and erasure floors: SQLite's rowid, PostgreSQL's dlq.seq
	// (ctid is neither stable nor ordered).
	dlqSeq() string
	// storedText is s as a text column holds it and gives it back:
	// PostgreSQL's text refuses NUL and invalid UTF-8, so its driver
	// stores U+FFFD instead (db_driver_pg.go's pgText), and what RETURNING
	// gives back is matched
	// in this form.
	storedText(s string) string
	// stored is the table that holds the rows read as table: on
	// PostgreSQL the rollups are views over per-instance slot rows.
	stored(table string) string
	// The read path's fragments, below.
	boolInt(cond string) string
	pagePath() string
	prop() string
	contains(expr, value string) string
	localTime(c timeCol, off int) string
	weekStart(day string) string
	greatest(a, b string) string
	least(a, b string) string
	receivedBefore(t time.Time) (string, any)
	noIndex(col string) string
	crossJoin() string
	indexedBy(index string) string
	boolLit(v bool) string
	matchList(expr string) string
	// fold is expr with ASCII letters in lower case, others as they are
	// (case-insensitive filters, docs/query-api.md).
	fold(expr string) string
	// lastChar is the code point of the text col's last character (NULL
	// or 0 for an empty text).
	lastChar(col string) string
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
	// soleWriter reports whether this process's writer is the database's
	// only one, so that memos of written rows stay true between
	// transactions.
	soleWriter() bool
	// lockRun locks, in one order every instance follows, what an intake
	// run of works may write that another writer may write too.
	lockRun(tx *writeTx, works []*ingestWork) error
}

// errClass is what a database error means, whichever backend said it.
type errClass int

const (
	// errOther is any other error: the statement or its data.
	errOther errClass = iota
	// errFull: the disk is full; nothing was written.
	errFull
	// errReadOnlyDB: the database refuses writes (read-only file, a
	// standby after a failover).
	errReadOnlyDB
	// errIO: the disk failed a read or write, or the file cannot be
	// opened (SQLite).
	errIO
	// errUnavailable: the database server is gone, shutting down or not
	// yet accepting connections (PostgreSQL).
	errUnavailable
	// errRetry: the transaction lost a deadlock or a serialization
	// conflict; running it again may succeed.
	errRetry
	// errUnique: a unique or primary key constraint refused a row.
	errUnique
)

// sqliteDialect is SQLite's (modernc.org/sqlite).
type sqliteDialect struct{}

func (sqliteDialect) name() string { return "sqlite" }

func (sqliteDialect) fileCopies() error { return nil }

func (sqliteDialect) rowHandle() string { return "rowid" }

func (sqliteDialect) dlqSeq() string { return "rowid" }

func (sqliteDialect) storedText(s string) string { return s }

func (sqliteDialect) stored(table string) string { return table }

// classify reads the primary code of SQLite's extended result code.
func (sqliteDialect) classify(err error) errClass {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return errOther
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL:
		return errFull
	case sqlite3.SQLITE_READONLY:
		return errReadOnlyDB
	case sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN:
		return errIO
	case sqlite3.SQLITE_BUSY:
		return errRetry
	case sqlite3.SQLITE_CONSTRAINT:
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return errUnique
		}
	}
	return errOther
}

// The read path's fragments (docs/postgresql.md#on-postgresql): SQLite's text
// is what it always was; PostgreSQL's gives the same values.

// boolInt is cond as 0 or 1, for SUM: SQLite's comparisons are integers.
func (sqliteDialect) boolInt(cond string) string { return "(" + cond + ")" }

// pagePath is an event's (alias e) page path: a Go function SQLite calls.
func (sqliteDialect) pagePath() string { return "tally_page_path(e.url)" }

// prop is an event's (alias e) property named by the next argument, as
// text (propText).
func (sqliteDialect) prop() string { return "tally_prop(" + eventRawSQL + ", ?)" }

// contains is 1 where value occurs in expr.
func (sqliteDialect) contains(expr, value string) string {
	return "instr(" + expr + ", " + value + ") > 0"
}

// localTime is col as local time text ("YYYY-MM-DD HH:MM:SS") at off
// seconds east of UTC.
func (sqliteDialect) localTime(c timeCol, off int) string {
	if c.ms {
		// Whole seconds, floored before 1970 too (SQLite's division
		// truncates).
		return fmt.Sprintf("datetime(%s / 1000 - (%s %% 1000 < 0) %+d, 'unixepoch')", c.expr, c.expr, off)
	}
	if off == 0 {
		// Stored times are FormatTime's, so UTC needs no date arithmetic.
		return fmt.Sprintf("(substr(%s, 1, 10) || ' ' || substr(%s, 12, 8))", c.expr, c.expr)
	}
	return fmt.Sprintf("strftime('%%Y-%%m-%%d %%H:%%M:%%S', %s, '%+d seconds')", c.expr, off)
}

// weekStart is the Monday on or before day ("YYYY-MM-DD" text), as text.
func (sqliteDialect) weekStart(day string) string { return "date(" + day + ", '-6 days', 'weekday 1')" }

// greatest and least are the larger and smaller of two values.
func (sqliteDialect) greatest(a, b string) string { return "max(" + a + ", " + b + ")" }
func (sqliteDialect) least(a, b string) string    { return "min(" + a + ", " + b + ")" }

// receivedBefore is the condition that an events row was received before
// t, and its argument.
func (sqliteDialect) receivedBefore(t time.Time) (string, any) {
	return receivedSQL + " < ?", FormatTime(t)
}

// noIndex is col as a value no index answers (SQLite's unary +, a plan
// hint); PostgreSQL takes no hints.
func (sqliteDialect) noIndex(col string) string { return "+" + col }

// crossJoin is a join whose order the planner keeps: SQLite's CROSS JOIN
// (which takes ON); PostgreSQL plans a JOIN itself.
func (sqliteDialect) crossJoin() string { return "CROSS JOIN" }

// indexedBy names the index SQLite must use; PostgreSQL takes no hints.
func (sqliteDialect) indexedBy(index string) string { return " INDEXED BY " + index }

// boolLit is a constant condition: SQLite's integers 1 and 0.
func (sqliteDialect) boolLit(v bool) string {
	if v {
		return "1"
	}
	return "0"
}

// matchList is the condition that expr is one of the values listed by the
// next argument, on a backend where a matches filter's values were read
// and matched in Go (resolveMatches); "" where SQLite matches in SQL.
func (sqliteDialect) matchList(expr string) string { return "" }

// fold: SQLite's lower() folds ASCII letters only.
func (sqliteDialect) fold(expr string) string { return "lower(" + expr + ")" }

func (sqliteDialect) lastChar(col string) string { return "unicode(substr(" + col + ", -1))" }

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

func (sqliteDialect) soleWriter() bool { return true }

// lockRun: the writer is SQLite's only one.
func (sqliteDialect) lockRun(*writeTx, []*ingestWork) error { return nil }
