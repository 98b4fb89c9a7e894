package storage

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

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

// pgEventColumns are what SQLite computes from an event's row and
// PostgreSQL cannot (README "Storage", "On PostgreSQL"): written by
// intake, in eventArgs' order.
const pgEventColumns = `, path, props, received_ms`

// insertEventSQL writes the event's event_pages row in the same statement
// (no trigger on PostgreSQL), and returns seq either way: one statement,
// whichever the caller reads.
func (pgDialect) insertEventSQL(bool) string {
	ins := strings.Replace(insertEventSQL, `credential)`, `credential`+pgEventColumns+`)`, 1)
	ins = strings.Replace(ins, `?)`, `?, ?, ?, ?)`, 1)
	return `WITH e AS (` + ins + ` RETURNING seq, type, path)
		INSERT INTO event_pages(seq, name, path) SELECT seq, CASE WHEN type = 'pageview' THEN NULL ELSE type END, path FROM e
		RETURNING seq`
}

// eventArgs adds path (NULL for no url), props (the properties object as
// sent, NULL if none) and received_ms.
func (pgDialect) eventArgs(args []any, e *IngestEvent, recv time.Time) []any {
	var path any
	if e.URL != nil {
		path = pagePaths.get(*e.URL)
	}
	if !e.ReceivedAt.IsZero() {
		recv = e.ReceivedAt
	}
	return append(args, path, sentProperties(e.Raw), recv.UnixMilli())
}

// sentProperties is the properties object of an event's raw JSON as sent,
// nil when it has none (or not an object).
func sentProperties(raw []byte) any {
	var ev struct {
		Properties json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(raw, &ev) != nil || len(ev.Properties) == 0 || ev.Properties[0] != '{' {
		return nil
	}
	return string(ev.Properties)
}

// rollupUpsertSQL writes slot's row of table's _slots table, so that
// instances do not wait on each other's row locks.
func (pgDialect) rollupUpsertSQL(table string, keys, sums []string, slot int) string {
	return rollupUpsert(table+"_slots", keys, sums, "slot", strconv.Itoa(slot))
}

// eventIDKey is the id's text: one PostgreSQL type cannot hold a UUID's 16
// bytes beside text (README "Storage", "On PostgreSQL").
func (pgDialect) eventIDKey(id string) any { return id }

// soleWriter is false: other instances write the same database.
func (pgDialect) soleWriter() bool { return false }
