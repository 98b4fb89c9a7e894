package engine

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/stdlib"
)

// PGDriverName is the database/sql driver of PostgreSQL connections: pgx's
// own, whose connections rewrite SQLite's placeholders (rebind), so that
// the SQL both backends share is written once, with ?, and stays as
// SQLite runs it (docs/postgresql.md#on-postgresql).
const PGDriverName = "tally-postgres"

func init() {
	sql.Register(PGDriverName, pgDriver{stdlib.GetDefaultDriver().(driver.DriverContext)})
}

// pgDriver wraps pgx's database/sql driver; only the SQL text changes.
type pgDriver struct{ inner driver.DriverContext }

// Open opens one connection of the data source name, a postgres:// URL.
func (d pgDriver) Open(name string) (driver.Conn, error) {
	c, err := d.OpenConnector(name)
	if err != nil {
		return nil, err
	}
	return c.Connect(context.Background())
}

// OpenConnector parses the URL once for every connection of a pool.
func (d pgDriver) OpenConnector(name string) (driver.Connector, error) {
	c, err := d.inner.OpenConnector(name)
	if err != nil {
		return nil, RedactConnect(err)
	}
	return pgConnector{c, d}, nil
}

type pgConnector struct {
	inner driver.Connector
	d     pgDriver
}

func (c pgConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		// Logged and printed: the user is left out (db_connect_error_pg.go).
		return nil, unreachable(RedactConnect(err))
	}
	return &pgConn{conn.(pgxConn)}, nil
}

func (c pgConnector) Driver() driver.Driver { return c.d }

// pgxConn is what pgx's connection implements and database/sql uses: each
// method of pgConn hands its call on, so that pgx behaves as itself
// (argument checks, session reset, transaction options, ping).
type pgxConn interface {
	driver.Conn
	driver.ConnPrepareContext
	driver.ConnBeginTx
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.NamedValueChecker
}

// pgConn is one PostgreSQL connection whose statements are rebound.
type pgConn struct{ inner pgxConn }

func (c *pgConn) Prepare(query string) (driver.Stmt, error) {
	return c.inner.Prepare(rebind(query))
}

func (c *pgConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	st, err := c.inner.PrepareContext(ctx, rebind(query))
	return st, unreachable(err)
}

func (c *pgConn) Close() error { return c.inner.Close() }

// Begin is database/sql's oldest way in; BeginTx is the one it uses.
func (c *pgConn) Begin() (driver.Tx, error) { return c.inner.Begin() }

func (c *pgConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.inner.BeginTx(ctx, opts)
	return tx, unreachable(err)
}

func (c *pgConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	r, err := c.inner.ExecContext(ctx, rebind(query), args)
	return r, unreachable(err)
}

func (c *pgConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	rows, err := c.inner.QueryContext(ctx, rebind(query), args)
	return rows, unreachable(err)
}

func (c *pgConn) Ping(ctx context.Context) error { return c.inner.Ping(ctx) }

func (c *pgConn) ResetSession(ctx context.Context) error { return c.inner.ResetSession(ctx) }

// CheckNamedValue is pgx's check, then PGText's: every argument of every
// statement passes here (prepared ones too), so no text reaches
// PostgreSQL with NUL or invalid UTF-8, which its text type refuses
// (docs/postgresql.md#text-with-nul-and-invalid-utf-8).
func (c *pgConn) CheckNamedValue(v *driver.NamedValue) error {
	if err := c.inner.CheckNamedValue(v); err != nil {
		return err
	}
	v.Value = PGText(v.Value)
	return nil
}

// PGText is v with each NUL of its text, and each byte that is not part
// of valid UTF-8, replaced by U+FFFD, the replacement character: a
// string, or a list of them (an ANY(?) argument), a *string or a
// driver.Valuer of text. Bytes are bytea's and keep theirs.
func PGText(v any) any {
	switch t := v.(type) {
	case string:
		return PGString(t)
	case *string:
		if t != nil {
			return PGString(*t)
		}
	case driver.Valuer: // sql.NullString and its kind
		if s, err := t.Value(); err == nil {
			if s, ok := s.(string); ok {
				if out := PGString(s); out != s {
					return out
				}
			}
		}
	case []string:
		for i, s := range t {
			if PGString(s) != s {
				out := append([]string(nil), t...)
				for j := i; j < len(out); j++ {
					out[j] = PGString(out[j])
				}
				return out
			}
		}
	}
	return v
}

// PGString is s as PostgreSQL's text holds it (PGText).
func PGString(s string) string { return ReplaceText(s, true) }

// IsValid asks pgx when it can tell; pgx v5 cannot, and then database/sql
// keeps the connection, as it does with pgx's own.
func (c *pgConn) IsValid() bool {
	if v, ok := c.inner.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

// rebinds caches rebind's answers per SQL text. The statements of the
// service are a few hundred fixed texts (a few thousand with the reads'
// IN lists); past rebindCacheSize the cache starts over rather than grow
// with texts built per request.
var rebinds = struct {
	sync.RWMutex
	m map[string]string
}{m: map[string]string{}}

const rebindCacheSize = 4096

// rebind turns SQLite's placeholders into PostgreSQL's: ?N becomes $N
// (same number, so a parameter used twice stays one), and a bare ? takes
// the number after the largest given so far, as SQLite numbers it. A ?
// inside a string literal ('...', E'...', $tag$...$tag$), a quoted
// identifier ("...") or a comment (-- and nested /* */) is left alone.
// So PostgreSQL's jsonb operators ?, ?| and ?& cannot appear in SQL that
// passes here: write jsonb_exists, jsonb_exists_any or jsonb_exists_all.
func rebind(query string) string {
	if strings.IndexByte(query, '?') < 0 {
		return query
	}
	rebinds.RLock()
	out, ok := rebinds.m[query]
	rebinds.RUnlock()
	if ok {
		return out
	}
	out = rebindText(query)
	rebinds.Lock()
	if len(rebinds.m) >= rebindCacheSize {
		rebinds.m = map[string]string{}
	}
	rebinds.m[query] = out
	rebinds.Unlock()
	return out
}

// rebindText is rebind without the cache.
func rebindText(q string) string {
	var b strings.Builder
	b.Grow(len(q) + 8)
	largest := 0
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == '\'':
			// E'...' lets a backslash escape the quote.
			esc := i > 0 && (q[i-1] == 'E' || q[i-1] == 'e') && (i == 1 || !identChar(q[i-2]))
			j := endQuoted(q, i, '\'', esc)
			b.WriteString(q[i:j])
			i = j
		case c == '"':
			j := endQuoted(q, i, '"', false)
			b.WriteString(q[i:j])
			i = j
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			j := strings.IndexByte(q[i:], '\n')
			if j < 0 {
				j = len(q) - i
			}
			b.WriteString(q[i : i+j])
			i += j
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			j := endBlockComment(q, i)
			b.WriteString(q[i:j])
			i = j
		case c == '$' && (i == 0 || !identChar(q[i-1])):
			j := endDollarQuoted(q, i)
			b.WriteString(q[i:j])
			i = j
		case c == '?':
			j := i + 1
			for j < len(q) && q[j] >= '0' && q[j] <= '9' {
				j++
			}
			n := largest + 1
			if j > i+1 {
				n, _ = strconv.Atoi(q[i+1 : j])
			}
			largest = max(largest, n)
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

func identChar(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// endQuoted is the index after the literal or identifier opened by the
// quote at q[i]; a doubled quote inside it is part of it. An unclosed one
// runs to the end (PostgreSQL then reports the error).
func endQuoted(q string, i int, quote byte, backslash bool) int {
	for j := i + 1; j < len(q); j++ {
		switch {
		case backslash && q[j] == '\\':
			j++
		case q[j] == quote:
			if j+1 < len(q) && q[j+1] == quote {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(q)
}

// endBlockComment is the index after the comment opened at q[i]; in
// PostgreSQL block comments nest.
func endBlockComment(q string, i int) int {
	depth := 0
	for j := i; j+1 < len(q); j++ {
		switch {
		case q[j] == '/' && q[j+1] == '*':
			depth++
			j++
		case q[j] == '*' && q[j+1] == '/':
			depth--
			j++
			if depth == 0 {
				return j + 1
			}
		}
	}
	return len(q)
}

// endDollarQuoted is the index after the $tag$...$tag$ string opened at
// q[i], or i+1 when q[i] opens none (a $1 parameter, say).
func endDollarQuoted(q string, i int) int {
	j := i + 1
	for j < len(q) && q[j] != '$' {
		if !identChar(q[j]) || (j == i+1 && q[j] >= '0' && q[j] <= '9') {
			return i + 1
		}
		j++
	}
	if j >= len(q) {
		return i + 1
	}
	tag := q[i : j+1]
	end := strings.Index(q[j+1:], tag)
	if end < 0 {
		return len(q)
	}
	return j + 1 + end + len(tag)
}
