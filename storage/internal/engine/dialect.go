package engine

import (
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Dialect is what differs between the two backends' SQL and errors, as far
// as any schema would need it: SQL fragments and error classes. What the
// product's own tables do differently on each backend is storage's. SQL
// both accept is written once, with ? placeholders; a statement that cannot
// be shared takes its differing fragment from here. TestDialectStaysSmall
// bounds its methods.
type Dialect interface {
	// Name is "sqlite" or "postgres".
	Name() string
	// Classify tells what an error of the database means for its caller.
	Classify(err error) ErrClass
	// RowHandle is the column that names a row for as long as a
	// transaction holds it: rowid, or PostgreSQL's ctid.
	RowHandle() string
	// StoredText is s as a text column holds it and gives it back:
	// PostgreSQL's text refuses NUL and invalid UTF-8, so its driver
	// stores U+FFFD instead (PGText), and what RETURNING gives back is
	// matched in this form.
	StoredText(s string) string
	// SoleWriter reports whether this process's writer is the database's
	// only one, so that memos of written rows stay true between
	// transactions.
	SoleWriter() bool
	// BoolInt is cond as 0 or 1, for SUM.
	BoolInt(cond string) string
	// BoolLit is a constant condition.
	BoolLit(v bool) string
	// Contains is the condition that value occurs in expr.
	Contains(expr, value string) string
	// LocalTime is expr as local time text ("YYYY-MM-DD HH:MM:SS") at off
	// seconds east of UTC: expr is integer ms since the epoch when ms is
	// set, else a stored time text (FormatTime's).
	LocalTime(expr string, ms bool, off int) string
	// WeekStart is the Monday on or before day ("YYYY-MM-DD" text), as
	// text.
	WeekStart(day string) string
	// Greatest and Least are the larger and smaller of two values.
	Greatest(a, b string) string
	Least(a, b string) string
	// NoIndex is col as a value no index answers (a plan hint).
	NoIndex(col string) string
	// CrossJoin is a join whose order the planner keeps.
	CrossJoin() string
	// IndexedBy names the index the planner must use ("" where the
	// backend takes no hints).
	IndexedBy(index string) string
	// Fold is expr with ASCII letters in lower case, others as they are.
	Fold(expr string) string
	// LastChar is the code point of the text col's last character (NULL
	// or 0 for an empty text).
	LastChar(col string) string
}

// ErrClass is what a database error means, whichever backend said it.
type ErrClass int

const (
	// ClassOther is any other error: the statement or its data.
	ClassOther ErrClass = iota
	// ClassFull: the disk is full; nothing was written.
	ClassFull
	// ClassReadOnly: the database refuses writes (read-only file, a
	// standby after a failover).
	ClassReadOnly
	// ClassIO: the disk failed a read or write, or the file cannot be
	// opened (SQLite).
	ClassIO
	// ClassUnavailable: the database server is gone, shutting down or not
	// yet accepting connections (PostgreSQL).
	ClassUnavailable
	// ClassRetry: the transaction lost a deadlock or a serialization
	// conflict; running it again may succeed.
	ClassRetry
	// ClassUnique: a unique or primary key constraint refused a row.
	ClassUnique
)

// SQLite is SQLite's dialect (modernc.org/sqlite).
type SQLite struct{}

// Name is "sqlite".
func (SQLite) Name() string { return "sqlite" }

// RowHandle is rowid.
func (SQLite) RowHandle() string { return "rowid" }

// StoredText is s: SQLite's text holds any bytes.
func (SQLite) StoredText(s string) string { return s }

// SoleWriter is true: SQLite's file has one writer, this process's.
func (SQLite) SoleWriter() bool { return true }

// Classify reads the primary code of SQLite's extended result code.
func (SQLite) Classify(err error) ErrClass {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return ClassOther
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL:
		return ClassFull
	case sqlite3.SQLITE_READONLY:
		return ClassReadOnly
	case sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN:
		return ClassIO
	case sqlite3.SQLITE_BUSY:
		return ClassRetry
	case sqlite3.SQLITE_CONSTRAINT:
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return ClassUnique
		}
	}
	return ClassOther
}

// BoolInt: SQLite's comparisons are integers already.
func (SQLite) BoolInt(cond string) string { return "(" + cond + ")" }

// Contains uses instr.
func (SQLite) Contains(expr, value string) string {
	return "instr(" + expr + ", " + value + ") > 0"
}

// LocalTime uses datetime and strftime.
func (SQLite) LocalTime(expr string, ms bool, off int) string {
	if ms {
		// Whole seconds, floored before 1970 too (SQLite's division
		// truncates).
		return fmt.Sprintf("datetime(%s / 1000 - (%s %% 1000 < 0) %+d, 'unixepoch')", expr, expr, off)
	}
	if off == 0 {
		// Stored times are FormatTime's, so UTC needs no date arithmetic.
		return fmt.Sprintf("(substr(%s, 1, 10) || ' ' || substr(%s, 12, 8))", expr, expr)
	}
	return fmt.Sprintf("strftime('%%Y-%%m-%%d %%H:%%M:%%S', %s, '%+d seconds')", expr, off)
}

// WeekStart uses date's weekday modifier.
func (SQLite) WeekStart(day string) string { return "date(" + day + ", '-6 days', 'weekday 1')" }

// Greatest is SQLite's two-argument max.
func (SQLite) Greatest(a, b string) string { return "max(" + a + ", " + b + ")" }

// Least is SQLite's two-argument min.
func (SQLite) Least(a, b string) string { return "min(" + a + ", " + b + ")" }

// NoIndex is SQLite's unary +, a plan hint.
func (SQLite) NoIndex(col string) string { return "+" + col }

// CrossJoin is SQLite's CROSS JOIN (which takes ON), whose order the
// planner keeps.
func (SQLite) CrossJoin() string { return "CROSS JOIN" }

// IndexedBy is SQLite's INDEXED BY.
func (SQLite) IndexedBy(index string) string { return " INDEXED BY " + index }

// BoolLit is SQLite's integers 1 and 0.
func (SQLite) BoolLit(v bool) string {
	if v {
		return "1"
	}
	return "0"
}

// Fold: SQLite's lower() folds ASCII letters only.
func (SQLite) Fold(expr string) string { return "lower(" + expr + ")" }

// LastChar uses unicode and substr.
func (SQLite) LastChar(col string) string { return "unicode(substr(" + col + ", -1))" }
