package storage

import (
	"errors"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dialect is what differs between the two backends' SQL and errors: the
// one place the storage layer asks which database it talks to (README
// "Storage", "On PostgreSQL"). SQL both accept is written once, with ?
// placeholders (pg_driver.go rebinds them); a statement that cannot be
// shared takes its differing fragment from here.
type dialect interface {
	// name is "sqlite" or "postgres".
	name() string
	// classify tells what an error of the database means for its caller.
	classify(err error) errClass
	// fileCopies is nil where the database is one file that backup and
	// vacuum copy; else the error to answer them.
	fileCopies() error
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
