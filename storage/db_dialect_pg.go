package storage

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tally-analytics/tally/fault"
)

// pgDialect is PostgreSQL's (15 or newer, through pgx).
type pgDialect struct {
	// creds are the credentials this instance has seen committed, which
	// lockRun need not lock (intake_locks_pg.go); nil outside an open DB.
	creds *knownCredentials
}

func (pgDialect) name() string { return "postgres" }

// ErrPostgresBackup is the answer to a backup or vacuum of a server on
// PostgreSQL, whose database is no file of ours to copy.
var ErrPostgresBackup = &fault.Error{Code: fault.UnsupportedBackend,
	Message: "this server's database is PostgreSQL: use pg_dump or your provider's point-in-time recovery"}

func (pgDialect) fileCopies() error { return ErrPostgresBackup }

func (pgDialect) rowHandle() string { return "ctid" }

func (pgDialect) dlqSeq() string { return "seq" }

// storedText replaces NUL and invalid UTF-8 with U+FFFD, as pgText does
// with every text argument (docs/postgresql.md#text-with-nul-and-invalid-utf-8). A DLQ row's user_agent is re-sent only as the header
// of an /events replay, which can never carry NUL, so an s2s row
// (replayed with its payload, verbatim) loses nothing.
func (pgDialect) storedText(s string) string { return pgString(s) }

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

func (pgDialect) boolInt(cond string) string { return "(" + cond + ")::int" }

// pagePath: the writer stores the path (events.path).
func (pgDialect) pagePath() string { return "e.path" }

// prop: events.props is the properties object as sent (json, not jsonb),
// whose ->> gives propText's text: a string unquoted, JSON null as NULL,
// any other value as its JSON text, the last of duplicate keys.
// JSON null reads as ” there (SQLite's answer for it), so it is told
// apart here, in a subquery that needs the argument once.
func (pgDialect) prop() string {
	return "(SELECT CASE WHEN json_typeof(x.v) = 'null' THEN '' ELSE x.v #>> '{}' END FROM (SELECT e.props->?::text AS v) x)"
}

func (pgDialect) contains(expr, value string) string {
	return "strpos(" + expr + ", " + value + ") > 0"
}

// localTime: the timestamps are read in UTC without a zone, so the
// session's TimeZone never shifts them; to_char truncates fractions as
// strftime does.
func (pgDialect) localTime(c timeCol, off int) string {
	if c.ms {
		return fmt.Sprintf("to_char(timestamp '1970-01-01' + (floor(%s / 1000.0)::bigint %+d) * interval '1 second', 'YYYY-MM-DD HH24:MI:SS')", c.expr, off)
	}
	if off == 0 {
		return fmt.Sprintf("(substr(%s, 1, 10) || ' ' || substr(%s, 12, 8))", c.expr, c.expr)
	}
	return fmt.Sprintf("to_char(substr(%s, 1, 19)::timestamp + interval '%d seconds', 'YYYY-MM-DD HH24:MI:SS')", c.expr, off)
}

func (pgDialect) weekStart(day string) string {
	return "to_char(date_trunc('week', (" + day + ")::timestamp), 'YYYY-MM-DD')"
}

func (pgDialect) greatest(a, b string) string { return "GREATEST(" + a + ", " + b + ")" }
func (pgDialect) least(a, b string) string    { return "LEAST(" + a + ", " + b + ")" }

// receivedBefore: the writer stores received_ms.
func (pgDialect) receivedBefore(t time.Time) (string, any) {
	return "received_ms < ?", t.UnixMilli()
}

// fold: lower() under the "C" collation folds ASCII letters only, as
// SQLite's; an argument or a property (->>) would otherwise take the
// database's collation, which folds Ü too.
func (pgDialect) fold(expr string) string { return "lower((" + expr + ") COLLATE \"C\")" }

func (pgDialect) noIndex(col string) string { return col }

func (pgDialect) crossJoin() string { return "JOIN" }

func (pgDialect) indexedBy(string) string { return "" }

func (pgDialect) boolLit(v bool) string {
	if v {
		return "TRUE"
	}
	return "FALSE"
}

// matchList: PostgreSQL's regular expressions are not RE2, so the
// distinct values are matched in Go and listed.
func (pgDialect) matchList(expr string) string { return expr + " = ANY(?)" }

// pgEventColumns are what SQLite computes from an event's row and
// PostgreSQL cannot (docs/postgresql.md#on-postgresql): written by
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
	return pgJSON(string(ev.Properties))
}

// pgJSON is the JSON text j as events.props holds it on PostgreSQL: each
// \u0000 escape, and each escape of a lone surrogate (\ud800–\udbff not
// followed by an escape of \udc00–\udfff, or one of those alone),
// written \ufffd, the character encoding/json decodes either to. json's
// ->> refuses to unescape them (22P05, 22P02), and one such value would
// fail every property read of its site (docs/postgresql.md#text-with-nul-and-invalid-utf-8). An escaped backslash before "u" is text,
// not an escape; the text between escapes is the driver's (pgText).
func pgJSON(j string) string {
	if !strings.Contains(j, `\u`) {
		return j
	}
	var b strings.Builder
	for i := 0; i < len(j); i++ {
		if j[i] != '\\' || i+1 >= len(j) {
			b.WriteByte(j[i])
			continue
		}
		r := escapedRune(j, i)
		switch {
		case r < 0: // any other escape, kept whole
			b.WriteString(j[i : i+2])
			i++
			continue
		case r >= 0xd800 && r < 0xdc00:
			if low := escapedRune(j, i+6); low >= 0xdc00 && low < 0xe000 {
				b.WriteString(j[i : i+12]) // a pair: one character
				i += 11
				continue
			}
			b.WriteString(`\ufffd`)
		case r == 0, r >= 0xdc00 && r < 0xe000:
			b.WriteString(`\ufffd`)
		default:
			b.WriteString(j[i : i+6])
		}
		i += 5
	}
	return b.String()
}

// escapedRune is the code of the \uXXXX escape at j[i:], -1 when none
// starts there.
func escapedRune(j string, i int) int {
	if i+6 > len(j) || j[i] != '\\' || j[i+1] != 'u' {
		return -1
	}
	n, err := strconv.ParseUint(j[i+2:i+6], 16, 32)
	if err != nil {
		return -1
	}
	return int(n)
}

// rollupUpsertSQL writes slot's row of table's _slots table, so that
// instances do not wait on each other's row locks.
func (pgDialect) rollupUpsertSQL(table string, keys, sums []string, slot int) string {
	return rollupUpsert(table+"_slots", keys, sums, "slot", strconv.Itoa(slot))
}

// eventIDKey is the id's text: one PostgreSQL type cannot hold a UUID's 16
// bytes beside text (docs/postgresql.md#on-postgresql).
func (pgDialect) eventIDKey(id string) any { return id }

// soleWriter is false: other instances write the same database.
func (pgDialect) soleWriter() bool { return false }
