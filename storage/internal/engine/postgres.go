package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// minPostgres is the oldest server_version_num served (docs/storage.md).
const minPostgres = 150000

// IsPostgresURL reports whether s is a DATABASE_URL this service takes:
// postgres:// or postgresql://.
func IsPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// DescribeDatabaseURL is the part of a DATABASE_URL that may be logged or
// printed: "postgres host:port/database", never the user or password. A
// socket folder given as ?host= stands for the host; with no host at all,
// the driver's default.
func DescribeDatabaseURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || !IsPostgresURL(s) {
		return "postgres (unparsable URL)"
	}
	host := u.Host
	if host == "" {
		q := u.Query()
		host = q.Get("host")
		if host == "" {
			host = "(default host)"
		}
		if port := q.Get("port"); port != "" {
			host += ":" + port
		}
	}
	return "postgres " + host + "/" + strings.TrimPrefix(u.Path, "/")
}

// PostgresURLs are the URLs of the write connection and of the read pool: the
// operator's, with the settings of each session added (pgx sends unknown
// URL parameters as run-time parameters at connect).
func PostgresURLs(database string, durability Durability) (write, read string, err error) {
	if !IsPostgresURL(database) {
		return "", "", errors.New("DATABASE_URL must start with postgres:// or postgresql://")
	}
	u, err := url.Parse(database)
	if err != nil {
		// url's message would repeat the URL, password included.
		return "", "", errors.New("DATABASE_URL is not a valid URL")
	}
	commit, err := durability.SynchronousCommit()
	if err != nil {
		return "", "", err
	}
	q := u.Query()
	if !q.Has("application_name") {
		q.Set("application_name", "tally")
	}
	// JIT compiles the expressions of any plan costed above
	// jit_above_cost: for a scan of 30 days of visits under three
	// filters at 10M events it spent 153 ms compiling and ran the scan
	// slower (1,508 ms against 819 without, docs/postgresql.md#reads-at-10m).
	// Tally's statements are short and repeated, so it never pays; an
	// operator who wants it sets jit in DATABASE_URL.
	if !q.Has("jit") {
		q.Set("jit", "off")
	}
	// No parallel query: a parallel plan wins PostgreSQL's costing when
	// random heap reads look dear, and then starts workers for a read
	// that an index answers with a third of the pages. Three visit filters
	// over 30 days at 1M events: a Parallel Seq Scan of sessions, 9,552
	// buffers and two workers, against a Bitmap Heap Scan, 3,475 buffers,
	// without (172-295 ms against 131-172 over HTTP, interleaved, load
	// 12-15 on 2 cores; docs/postgresql.md#reads-at-10m). Dashboards send
	// several reads at once, each worker a process of its own; an operator
	// with idle cores to spare sets max_parallel_workers_per_gather in
	// DATABASE_URL.
	if !q.Has("max_parallel_workers_per_gather") {
		q.Set("max_parallel_workers_per_gather", "0")
	}
	u.RawQuery = q.Encode()
	read = u.String()
	// synchronous_commit follows DURABILITY, for the writer only: reads
	// commit nothing.
	q.Set("synchronous_commit", commit)
	u.RawQuery = q.Encode()
	return u.String(), read, nil
}

// PostgresInfo is what the startup checks learnt of the server.
type PostgresInfo struct {
	// Version is the server's server_version ("15.14 (Debian ...)").
	Version string
	// Schema is the newest migration recorded, 0 for an empty database;
	// Known is the newest this binary has.
	Schema, Known int
}

// CheckServer refuses a server older than 15, and a database whose
// encoding is not UTF8: the stored text is UTF-8, and another encoding
// would refuse or alter some of it.
func CheckServer(ctx context.Context, db *sql.DB) (PostgresInfo, error) {
	var info PostgresInfo
	var num int
	var encoding string
	err := db.QueryRowContext(ctx, `SELECT current_setting('server_version'), current_setting('server_version_num')::int, current_setting('server_encoding')`).
		Scan(&info.Version, &num, &encoding)
	var ce *ConnectError
	switch {
	case errors.As(err, &ce):
		return info, err // says so already, without the user
	case err != nil:
		return info, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	if num < minPostgres {
		return info, fmt.Errorf("PostgreSQL %s is too old: Tally needs 15 or newer", info.Version)
	}
	if encoding != "UTF8" {
		return info, fmt.Errorf("the database's encoding is %s: Tally needs UTF8 (CREATE DATABASE ... ENCODING 'UTF8' TEMPLATE template0)", encoding)
	}
	return info, nil
}
