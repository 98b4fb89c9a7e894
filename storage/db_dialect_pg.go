package storage

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage/internal/engine"
)

// pgDialect is PostgreSQL's (15 or newer, through pgx).
type pgDialect struct {
	engine.Postgres
	// creds are the credentials this instance has seen committed, which
	// lockRun need not lock (intake_locks_pg.go); nil outside an open DB.
	creds *knownCredentials
}

// ErrPostgresBackup is the answer to a backup or vacuum of a server on
// PostgreSQL, whose database is no file of ours to copy.
var ErrPostgresBackup = &fault.Error{Code: fault.UnsupportedBackend,
	Message: "this server's database is PostgreSQL: use pg_dump or your provider's point-in-time recovery"}

func (pgDialect) fileCopies() error { return ErrPostgresBackup }

func (pgDialect) dlqSeq() string { return "seq" }

func (pgDialect) stored(table string) string {
	switch table {
	case "daily_events", "daily_dimensions", "daily_sessions", "site_usage":
		return table + "_slots"
	}
	return table
}

// pagePath: the writer stores the path (events.path).
func (pgDialect) pagePath() string { return "e.path" }

// pageHost is PageHost in SQL: the authority's host after the scheme (no
// user, port, path, query or fragment), lower case, without www.
func (pgDialect) pageHost() string {
	return `nullif(regexp_replace(lower(substring(e.url from '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^@/?#]*@)?([^/?#:]*)')), '^www\.', ''), '')`
}

// prop: events.props is the properties object as sent (json, not jsonb),
// whose ->> gives propText's text: a string unquoted, JSON null as NULL,
// any other value as its JSON text, the last of duplicate keys.
// JSON null reads as ” there (SQLite's answer for it), so it is told
// apart here, in a subquery that needs the argument once.
func (pgDialect) prop() string {
	return "(SELECT CASE WHEN json_typeof(x.v) = 'null' THEN '' ELSE x.v #>> '{}' END FROM (SELECT e.props->?::text AS v) x)"
}

// receivedBefore: the writer stores received_ms.
func (pgDialect) receivedBefore(t time.Time) (string, any) {
	return "received_ms < ?", t.UnixMilli()
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
// not an escape; the text between escapes is the driver's (engine.PGText).
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
