package storage

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tally-analytics/tally/fault"
)

// pgDialect is PostgreSQL's (15 or newer, through pgx).
type pgDialect struct{}

func (pgDialect) name() string { return "postgres" }

// ErrPostgresBackup is the answer to a backup or vacuum of a server on
// PostgreSQL, whose database is no file of ours to copy.
var ErrPostgresBackup = &fault.Error{Code: fault.UnsupportedBackend,
	Message: "this server's database is PostgreSQL: use pg_dump or your provider's point-in-time recovery"}

func (pgDialect) fileCopies() error { return ErrPostgresBackup }

func (pgDialect) rowHandle() string { return "ctid" }

func (pgDialect) stored(table string) string {
	switch table {
	case "daily_events", "daily_dimensions", "daily_sessions", "site_usage":
		return table + "_slots"
	}
	return table
}

// classify reads the SQLSTATE of a server error; an error without one
// that comes from the connection itself (refused, reset, closed) means
// the server cannot be reached.
func (pgDialect) classify(err error) errClass {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "53100": // disk_full
			return errFull
		case "25006": // read_only_sql_transaction: a standby, after a failover
			return errReadOnlyDB
		case "57P01", "57P02", "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
			return errUnavailable
		case "40P01", "40001": // deadlock_detected, serialization_failure
			return errRetry
		case "23505": // unique_violation
			return errUnique
		}
		if pe.Code[:2] == "08" { // connection_exception and its kinds
			return errUnavailable
		}
		return errOther
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errOther
	case errors.As(err, &ce), errors.As(err, &ne), errors.Is(err, driver.ErrBadConn),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), pgconn.SafeToRetry(err):
		return errUnavailable
	}
	return errOther
}
