package storage

import (
	"errors"

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
	// rowHandle is the column that names a row for as long as a
	// transaction holds it: rowid, or PostgreSQL's ctid.
	rowHandle() string
	// stored is the table that holds the rows read as table: on
	// PostgreSQL the rollups are views over per-instance slot rows.
	stored(table string) string
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
