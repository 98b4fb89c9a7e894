package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/tally-analytics/tally/storage"
)

// command is a subcommand of the binary: it gets the arguments after its
// name and returns the process exit code.
type command func(args []string, getenv func(string) string, stdout, stderr io.Writer) int

// subcommand is a command and the line `tally help` shows for it.
type subcommand struct {
	run     command
	summary string
}

// commands are the subcommands `tally NAME ...` runs; without one (or with
// flags first) the binary serves, as `tally serve` does. Maintenance
// commands that work on the database file of a running server are added
// here, and `tally help` lists them. (Set in init: help lists the table
// it is in.)
var commands map[string]subcommand

func init() {
	commands = map[string]subcommand{
		"serve":        {serve, "run the collector and the query API (the default)"},
		"vacuum":       {vacuum, "shrink a stopped server's database file to its data"},
		"backup":       {backup, "write a consistent copy of the database while the server runs"},
		"import":       {importCommand, "import GoatCounter, Umami or Tally history into a site"},
		"user":         {userCommand, "add a user with a role in a workspace, or print a password reset link (asks the running server)"},
		"sql":          {sqlCommand, "run SQL on the server's database with the service's SQL functions; read-only unless --write"},
		"migrate-to":   {migrateTo, "copy a stopped server's SQLite database into an empty PostgreSQL one"},
		"check-config": {checkConfig, "validate every setting and the tracking plan; start nothing"},
		"version":      {versionCommand, "print the version, commit, Go and SQLite versions, build flags"},
		"help":         {helpCommand, "show the commands and every setting"},
	}
}

// Run is the tally binary: it dispatches to the subcommand args name, serving
// by default, and returns the process exit code. getenv reads the
// environment (os.Getenv in main), so tests run it in process.
func Run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version") {
		return versionCommand(nil, getenv, stdout, stderr)
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return serve(args, getenv, stdout, stderr)
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "tally: unknown command %q (see 'tally help')\n", args[0])
		return 2
	}
	return cmd.run(args[1:], getenv, stdout, stderr)
}

// parseFlags parses the flags of a subcommand: -h prints its usage on
// standard output (exit 0), a mistake one line on standard error (exit
// 2). ok is false when the command should exit with code.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	fs.SetOutput(io.Discard) // flag would print the usage after a mistake too
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		return 0, false
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v (see '%s -h')\n", fs.Name(), err, fs.Name())
		return 2, false
	}
	return 0, true
}

// parseFlagsAndArgs is parseFlags for a command that takes positional
// arguments, with flags allowed after them too (`tally backup x.db
// --force`): it returns the arguments in order.
func parseFlagsAndArgs(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (rest []string, code int, ok bool) {
	for {
		if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
			return nil, code, false
		}
		if fs.NArg() == 0 {
			return rest, 0, true
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// vacuum shrinks the database file to its data (docs/storage.md#retention): the
// server must be stopped, as the rebuild needs the file to itself. Exit
// code 0 when done, 1 when it could not be (in use, missing, disk full), 2
// for bad arguments.
func vacuum(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if getenv("DATABASE_URL") != "" {
		fmt.Fprintln(stderr, "tally vacuum: DATABASE_URL is set: PostgreSQL keeps its own files (autovacuum); for a copy use pg_dump or your provider's point-in-time recovery")
		return 2
	}
	fs := flag.NewFlagSet("tally vacuum", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := getenv("DATABASE_PATH")
	if path == "" {
		path = "./data/analytics.db"
	}
	fs.StringVar(&path, "database-path", path, "SQLite file to shrink; the server must be stopped [DATABASE_PATH]")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: tally vacuum [--database-path PATH]\n\nShrinks a stopped server's database file to its data.")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tally vacuum: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	res, err := storage.Vacuum(context.Background(), path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		fmt.Fprintf(stderr, "tally vacuum: no database at %s\n", path)
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "tally vacuum: %s: %v\n", path, err)
		return 1
	}
	fmt.Fprintf(stdout, "vacuumed %s: %.1f MiB -> %.1f MiB in %.1f s\n", path,
		float64(res.Before)/(1<<20), float64(res.After)/(1<<20), res.Took.Seconds())
	return 0
}
