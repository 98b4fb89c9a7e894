package engine

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
)

// Postgres is PostgreSQL's dialect (15 or newer, through pgx).
type Postgres struct{}

// Name is "postgres".
func (Postgres) Name() string { return "postgres" }

// RowHandle is ctid.
func (Postgres) RowHandle() string { return "ctid" }

// StoredText replaces NUL and invalid UTF-8 with U+FFFD, as PGText does
// with every text argument (docs/postgresql.md#text-with-nul-and-invalid-utf-8).
func (Postgres) StoredText(s string) string { return PGString(s) }

// SoleWriter is false: other instances write the same database.
func (Postgres) SoleWriter() bool { return false }

// Classify reads the SQLSTATE of a server error; an error without one
// that comes from the connection itself (refused, reset, closed) means
// the server cannot be reached.
func (Postgres) Classify(err error) ErrClass {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "53100": // disk_full
			return ClassFull
		case "25006": // read_only_sql_transaction: a standby, after a failover
			return ClassReadOnly
		case "57P01", "57P02", "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
			return ClassUnavailable
		case "40P01", "40001": // deadlock_detected, serialization_failure
			return ClassRetry
		case "23505": // unique_violation
			return ClassUnique
		}
		if pe.Code[:2] == "08" { // connection_exception and its kinds
			return ClassUnavailable
		}
		return ClassOther
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return ClassOther
	case errors.As(err, &ce), errors.As(err, &ne), errors.Is(err, driver.ErrBadConn),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), pgconn.SafeToRetry(err),
		// A connection the driver closed when its socket went away: a
		// commit on it cannot tell whether it was stored, so the client
		// sends it again and dedup keeps one.
		errors.Is(err, pgconn.ErrConnClosed):
		return ClassUnavailable
	}
	return ClassOther
}

// BoolInt casts the condition.
func (Postgres) BoolInt(cond string) string { return "(" + cond + ")::int" }

// Contains uses strpos.
func (Postgres) Contains(expr, value string) string {
	return "strpos(" + expr + ", " + value + ") > 0"
}

// LocalTime: the timestamps are read in UTC without a zone, so the
// session's TimeZone never shifts them; to_char truncates fractions as
// strftime does.
func (Postgres) LocalTime(expr string, ms bool, off int) string {
	if ms {
		return fmt.Sprintf("to_char(timestamp '1970-01-01' + (floor(%s / 1000.0)::bigint %+d) * interval '1 second', 'YYYY-MM-DD HH24:MI:SS')", expr, off)
	}
	if off == 0 {
		return fmt.Sprintf("(substr(%s, 1, 10) || ' ' || substr(%s, 12, 8))", expr, expr)
	}
	return fmt.Sprintf("to_char(substr(%s, 1, 19)::timestamp + interval '%d seconds', 'YYYY-MM-DD HH24:MI:SS')", expr, off)
}

// WeekStart uses date_trunc.
func (Postgres) WeekStart(day string) string {
	return "to_char(date_trunc('week', (" + day + ")::timestamp), 'YYYY-MM-DD')"
}

// Greatest is GREATEST.
func (Postgres) Greatest(a, b string) string { return "GREATEST(" + a + ", " + b + ")" }

// Least is LEAST.
func (Postgres) Least(a, b string) string { return "LEAST(" + a + ", " + b + ")" }

// Fold: lower() under the "C" collation folds ASCII letters only, as
// SQLite's; an argument or a JSON value (->>) would otherwise take the
// database's collation, which folds Ü too.
func (Postgres) Fold(expr string) string { return "lower((" + expr + ") COLLATE \"C\")" }

// NoIndex: PostgreSQL takes no hints.
func (Postgres) NoIndex(col string) string { return col }

// CrossJoin: PostgreSQL plans a JOIN itself.
func (Postgres) CrossJoin() string { return "JOIN" }

// IndexedBy: PostgreSQL takes no hints.
func (Postgres) IndexedBy(string) string { return "" }

// BoolLit is TRUE or FALSE.
func (Postgres) BoolLit(v bool) string {
	if v {
		return "TRUE"
	}
	return "FALSE"
}

// LastChar: ascii gives the code point of a UTF-8 text's first
// character, 0 for an empty one.
func (Postgres) LastChar(col string) string { return "ascii(right(" + col + ", 1))" }
