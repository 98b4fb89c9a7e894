package importer

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // PostgreSQL, Umami's default database
)

// Umami's own database, read directly: website_event joined with session
// for one website, in pages of umamiPage events ordered by (created_at,
// event_id), each custom event with its event_data as properties. The
// tables and columns are Umami's (prisma/migrations in
// github.com/umami-software/umami: 01_init, 02_report_schema_session_data
// renaming event_data's columns, 05_add_visit_id, 10_add_distinct_id);
// columns a release lacks (hostname moved from session to website_event,
// distinct_id) are read as empty, found in information_schema, so any
// release since 2.0 reads. Only SELECTs: the source is never changed.

// umamiPage is how many events one query reads (a variable for the tests).
var umamiPage = 1000

// Bounds of what the database hands over (docs/import.md#switching-from-plausible--umami--goatcounter,
// Bounds): a text value at most
// umamiValueMax characters (Umami's widest column is VARCHAR(500)),
// cut in the query so a longer one never reaches this process; a page
// ends early once its values pass umamiPageBytes, and the next one goes
// on after its last event; a page's event_data at most umamiPageBytes.
// Variables for the tests.
var (
	umamiValueMax        = 2000
	umamiPageBytes int64 = 8 << 20
)

// IsDatabaseURL reports whether s names an Umami database rather than a file.
func IsDatabaseURL(s string) bool {
	for _, p := range []string{"postgres://", "postgresql://", "mysql://"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// DatabaseName is a database URL as the audit log records it: its scheme,
// host and database name, without user or password.
func DatabaseName(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "database"
	}
	return u.Scheme + "://" + u.Host + u.Path
}

// umamiDB is an open Umami database and its dialect.
type umamiDB struct {
	db    *sql.DB
	mysql bool
}

func openUmami(conn string) (*umamiDB, error) {
	if strings.HasPrefix(conn, "mysql://") {
		u, err := url.Parse(conn)
		if err != nil {
			return nil, fmt.Errorf("the MySQL URL: %v", err)
		}
		cfg := mysql.NewConfig()
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
		cfg.Net, cfg.Addr = "tcp", u.Host
		if !strings.Contains(u.Host, ":") {
			cfg.Addr += ":3306"
		}
		cfg.DBName = strings.TrimPrefix(u.Path, "/")
		cfg.ParseTime, cfg.Loc = true, time.UTC
		cfg.Params = map[string]string{"time_zone": "'+00:00'"}
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			return nil, err
		}
		return &umamiDB{db: db, mysql: true}, nil
	}
	db, err := sql.Open("pgx", conn)
	if err != nil {
		return nil, err
	}
	return &umamiDB{db: db}, nil
}

// ph is the n-th placeholder of the dialect.
func (u *umamiDB) ph(n int) string {
	if u.mysql {
		return "?"
	}
	return "$" + strconv.Itoa(n)
}

// text is a column as text (PostgreSQL's uuid columns are not), cut one
// character past umamiValueMax so that a longer value shows.
func (u *umamiDB) text(col string) string {
	if !u.mysql {
		col += "::text"
	}
	return u.cut(col)
}

// cut is a text expression cut one character past umamiValueMax.
func (u *umamiDB) cut(expr string) string {
	return "SUBSTR(" + expr + ", 1, " + strconv.Itoa(umamiValueMax+1) + ")"
}

// checkValue refuses a value cut by cut.
func checkValue(col, v string) error {
	if utf8.RuneCountInString(v) > umamiValueMax {
		return fmt.Errorf("%s: longer than %d characters (it starts %s)", col, umamiValueMax, strconv.Quote(cut(v, clipBytes)))
	}
	return nil
}

// columns are the columns table has in the current schema.
func (u *umamiDB) columns(ctx context.Context, table string) (map[string]bool, error) {
	q := `SELECT column_name FROM information_schema.columns WHERE table_name = ` + u.ph(1)
	if u.mysql {
		q += ` AND table_schema = DATABASE()`
	} else {
		q += ` AND table_schema = current_schema()`
	}
	rows, err := u.db.QueryContext(ctx, q, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols := map[string]bool{}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		cols[strings.ToLower(c)] = true
	}
	return cols, rows.Err()
}

// ReadUmamiDatabase reads the events of Umami website id from the
// PostgreSQL or MySQL database at conn, calling emit for each.
func ReadUmamiDatabase(ctx context.Context, conn, website string, emit func(Row) error) (ReadStats, error) {
	var st ReadStats
	u, err := openUmami(conn)
	if err != nil {
		return st, err
	}
	defer u.db.Close()
	if err := u.db.PingContext(ctx); err != nil {
		return st, fmt.Errorf("%s: %v", DatabaseName(conn), err)
	}
	ev, err := u.columns(ctx, "website_event")
	if err != nil {
		return st, err
	}
	se, err := u.columns(ctx, "session")
	if err != nil {
		return st, err
	}
	ed, err := u.columns(ctx, "event_data")
	if err != nil {
		return st, err
	}
	if !ev["event_id"] || !se["session_id"] {
		return st, fmt.Errorf("%s has no Umami tables website_event and session", DatabaseName(conn))
	}
	opt := func(cols map[string]bool, alias, col string) string {
		if cols[col] {
			return "COALESCE(" + u.cut(alias+"."+col) + ", '')"
		}
		return "''"
	}
	host := opt(ev, "e", "hostname")
	if !ev["hostname"] {
		host = opt(se, "s", "hostname")
	}
	// Names are the CSV export's, so umamiRow reads both.
	fields := []string{"event_id", "session_id", "created_at", "hostname", "url_path", "url_query", "referrer_path",
		"referrer_query", "referrer_domain", "event_type", "event_name", "browser", "os", "device", "country", "city", "distinct_id"}
	sel := []string{u.text("e.event_id"), u.text("e.session_id"), "e.created_at", host, u.cut("e.url_path"),
		opt(ev, "e", "url_query"), opt(ev, "e", "referrer_path"), opt(ev, "e", "referrer_query"), opt(ev, "e", "referrer_domain"),
		"e.event_type", opt(ev, "e", "event_name"), opt(se, "s", "browser"), opt(se, "s", "os"), opt(se, "s", "device"),
		opt(se, "s", "country"), opt(se, "s", "city"), opt(se, "s", "distinct_id")}
	base := `SELECT ` + strings.Join(sel, ", ") + ` FROM website_event e LEFT JOIN session s ON s.session_id = e.session_id
		WHERE e.website_id = ` + u.ph(1)
	order := ` ORDER BY e.created_at, e.event_id LIMIT ` + strconv.Itoa(umamiPage)
	var lastTS time.Time
	var lastID string
	first := true
	for {
		var rows *sql.Rows
		if first {
			rows, err = u.db.QueryContext(ctx, base+order, website)
		} else {
			rows, err = u.db.QueryContext(ctx, base+` AND (e.created_at > `+u.ph(2)+` OR (e.created_at = `+u.ph(3)+` AND `+u.text("e.event_id")+` > `+u.ph(4)+`))`+order,
				website, lastTS, lastTS, lastID)
		}
		if err != nil {
			return st, fmt.Errorf("reading website_event: %v", err)
		}
		type got struct {
			vals map[string]string
			ts   time.Time
		}
		var page []got
		var bytes int64
		for bytes < umamiPageBytes && rows.Next() {
			vals := make([]sql.NullString, len(fields))
			var ts time.Time
			dests := make([]any, len(fields))
			for i := range fields {
				dests[i] = &vals[i]
			}
			dests[2] = &ts
			var typ int64
			dests[9] = &typ
			if err := rows.Scan(dests...); err != nil {
				rows.Close()
				return st, fmt.Errorf("reading website_event: %v", err)
			}
			m := make(map[string]string, len(fields))
			for i, f := range fields {
				if err := checkValue(f, vals[i].String); err != nil {
					rows.Close()
					return st, fmt.Errorf("website_event %s: %v", quote(vals[0].String), err)
				}
				m[f] = vals[i].String
				bytes += int64(len(vals[i].String))
			}
			m["created_at"] = ts.UTC().Format("2006-01-02 15:04:05.999999999")
			m["event_type"] = strconv.FormatInt(typ, 10)
			page = append(page, got{m, ts})
		}
		full := bytes >= umamiPageBytes // ended early: more may follow
		rows.Close()
		if err := rows.Err(); err != nil {
			return st, fmt.Errorf("reading website_event: %v", err)
		}
		if len(page) == 0 {
			return st, nil
		}
		data, err := u.eventData(ctx, ed, func(yield func(string)) {
			for _, g := range page {
				if g.vals["event_type"] == "2" {
					yield(g.vals["event_id"])
				}
			}
		})
		if err != nil {
			return st, err
		}
		for _, g := range page {
			row, ok, err := umamiRow(func(c string) string { return g.vals[c] }, data[g.vals["event_id"]])
			if err != nil {
				return st, fmt.Errorf("website_event %s: %v", quote(g.vals["event_id"]), err)
			}
			if !ok {
				st.Skipped++
				continue
			}
			if _, err := row.Event("check", "umami", timeNow()); err != nil {
				return st, fmt.Errorf("website_event %s: %v", quote(g.vals["event_id"]), err)
			}
			st.Rows++
			if err := emit(row); err != nil {
				return st, err
			}
		}
		last := page[len(page)-1]
		lastTS, lastID, first = last.ts, last.vals["event_id"], false
		if len(page) < umamiPage && !full {
			return st, nil
		}
	}
}

// eventData reads the event_data of the custom events ids gives, by event
// id: data_type 2 is a number, 3 a boolean, any other kept as its text.
func (u *umamiDB) eventData(ctx context.Context, cols map[string]bool, ids func(func(string))) (map[string]map[string]any, error) {
	out := map[string]map[string]any{}
	key := "data_key"
	if !cols[key] {
		key = "event_key" // before Umami renamed it
	}
	if !cols["website_event_id"] || !cols[key] {
		return out, nil
	}
	var args []any
	var marks []string
	ids(func(id string) {
		args = append(args, id)
		marks = append(marks, u.ph(len(args)))
	})
	if len(args) == 0 {
		return out, nil
	}
	num := "number_value"
	if !u.mysql {
		num += "::text"
	}
	rows, err := u.db.QueryContext(ctx, `SELECT `+u.text("website_event_id")+`, `+u.cut(key)+`, COALESCE(`+u.cut("string_value")+`, ''), COALESCE(`+num+`, ''), data_type
		FROM event_data WHERE `+u.text("website_event_id")+` IN (`+strings.Join(marks, ", ")+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("reading event_data: %v", err)
	}
	defer rows.Close()
	var bytes int64
	for rows.Next() {
		var id, k, s, n string
		var typ int
		if err := rows.Scan(&id, &k, &s, &n, &typ); err != nil {
			return nil, fmt.Errorf("reading event_data: %v", err)
		}
		for col, v := range map[string]string{key: k, "string_value": s} {
			if err := checkValue(col, v); err != nil {
				return nil, fmt.Errorf("event_data of website_event %s: %v", quote(id), err)
			}
		}
		if bytes += int64(len(id) + len(k) + len(s) + len(n)); bytes > umamiPageBytes {
			return nil, fmt.Errorf("event_data: more than %d MiB for %d custom events (at website_event %s)", umamiPageBytes>>20, len(args), quote(id))
		}
		if out[id] == nil {
			out[id] = map[string]any{}
		}
		var v any = s
		switch typ {
		case 2:
			if f, err := strconv.ParseFloat(n, 64); err == nil {
				v = f
			} else if f, err := strconv.ParseFloat(s, 64); err == nil {
				v = f
			}
		case 3:
			v = s == "true"
		}
		out[id][k] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading event_data: %v", err)
	}
	return out, nil
}
