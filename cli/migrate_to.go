package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/tally-analytics/tally/storage"
)

// migrateTo is `tally migrate-to [--database-path PATH] DATABASE_URL`
// (docs/postgresql.md#moving-from-sqlite-to-postgresql): copies a stopped
// server's SQLite file into an empty PostgreSQL database and prints the
// per-table verification. Exit code 0 when every count and sum matches, 1 when
// not (or on a refusal), 2 bad arguments.
func migrateTo(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	def := getenv("DATABASE_PATH")
	if def == "" {
		def = "./data/analytics.db"
	}
	fs := flag.NewFlagSet("tally migrate-to", flag.ContinueOnError)
	dbPath := fs.String("database-path", def, "the SQLite database of the stopped server [DATABASE_PATH]")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: tally migrate-to [--database-path PATH] postgres://...\n\n"+
			"Copies a stopped server's SQLite database, every table and the audit log, into an empty\n"+
			"PostgreSQL database, then compares row counts and rollup sums on both sides.")
		fs.PrintDefaults()
	}
	rest, code, ok := parseFlagsAndArgs(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(rest) != 1 || !storage.IsPostgresURL(rest[0]) {
		fmt.Fprintln(stderr, "tally migrate-to: give one PostgreSQL URL (postgres://user@host/db)")
		return 2
	}
	url := rest[0]
	if *dbPath == ":memory:" {
		fmt.Fprintln(stderr, "tally migrate-to: DATABASE_PATH is :memory:, which holds nothing to copy")
		return 1
	}
	if _, err := os.Stat(*dbPath); err != nil {
		fmt.Fprintf(stderr, "tally migrate-to: no database at %s: pass --database-path\n", *dbPath)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stdout, "copying %s into %s\n", *dbPath, storage.DescribeDatabaseURL(url))
	start := time.Now()
	checks, err := storage.CopyToPostgres(ctx, *dbPath, url, progressPrinter(stdout))
	if err != nil {
		fmt.Fprintf(stderr, "tally migrate-to: %v\nnothing was committed: the target holds no rows of this run; run the command again once the cause is fixed\n", err)
		return 1
	}
	return printChecks(stdout, stderr, checks, time.Since(start))
}

// progressPrinter reports each table's progress: rewritten in place on a
// terminal, one line per table otherwise.
func progressPrinter(w io.Writer) storage.CopyProgress {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return func(table string, done, total int64) {
		switch {
		case tty && done < total:
			fmt.Fprintf(w, "\r%-24s %d/%d", table, done, total)
		case tty:
			fmt.Fprintf(w, "\r%-24s %d/%d\n", table, done, total)
		case done == total:
			fmt.Fprintf(w, "copied %s: %d rows\n", table, done)
		}
	}
}

// printChecks prints the verification table and names each mismatch; 0
// when everything matches.
func printChecks(stdout, stderr io.Writer, checks []storage.TableCheck, took time.Duration) int {
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "table\tSQLite\tPostgreSQL\t\t")
	bad, merged := 0, int64(0)
	for _, c := range checks {
		mark := "ok"
		if c.Merged > 0 {
			mark = fmt.Sprintf("ok, %d merged", c.Merged)
			merged += c.Merged
		}
		if c.SQLite != c.Postgres+c.Merged {
			mark = "MISMATCH"
			bad++
			fmt.Fprintf(stderr, "tally migrate-to: %s: %d rows in SQLite, %d in PostgreSQL (%d merged)\n", c.Table, c.SQLite, c.Postgres, c.Merged)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t\n", c.Table, c.SQLite, c.Postgres, mark)
		for _, s := range c.Sums {
			mark := "ok"
			if s.SQLite != s.Postgres {
				mark = "MISMATCH"
				bad++
				fmt.Fprintf(stderr, "tally migrate-to: %s: sum of %s %d in SQLite, %d in PostgreSQL\n", c.Table, s.Column, s.SQLite, s.Postgres)
			}
			fmt.Fprintf(tw, "  sum(%s)\t%d\t%d\t%s\t\n", s.Column, s.SQLite, s.Postgres, mark)
		}
	}
	tw.Flush()
	if merged > 0 {
		fmt.Fprintf(stdout, "%d rows merged into another: their keys differ on SQLite only by NUL or bytes that are not UTF-8, which PostgreSQL stores as U+FFFD (rollups summed, profiles' traits merged, other rows kept once)\n", merged)
	}
	if bad > 0 {
		fmt.Fprintf(stdout, "%d mismatches: do not switch to PostgreSQL yet\n", bad)
		return 1
	}
	fmt.Fprintf(stdout, "every count and sum matches (%s): start the service with DATABASE_URL\n", took.Round(time.Second))
	return 0
}
