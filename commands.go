package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/tally-analytics/tally/storage"
)

// command is a subcommand of the binary: it gets the arguments after its
// name and returns the process exit code.
type command func(args []string, getenv func(string) string, stdout, stderr io.Writer) int

// commands are the subcommands `tally NAME ...` runs; without one (or with
// flags first) the binary serves, as `tally serve` does. Maintenance
// commands that work on the database file of a running server are added
// here.
var commands = map[string]command{
	"serve":  serve,
	"vacuum": vacuum,
	"backup": backup,
}

// run dispatches to the subcommand args name, serving by default.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if cmd, ok := commands[args[0]]; ok {
			return cmd(args[1:], getenv, stdout, stderr)
		}
	}
	return serve(args, getenv, stdout, stderr)
}

// vacuum shrinks the database file to its data (README "Retention"): the
// server must be stopped, as the rebuild needs the file to itself. Exit
// code 0 when done, 1 when it could not be (in use, missing, disk full), 2
// for bad arguments.
func vacuum(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tally vacuum", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := getenv("DATABASE_PATH")
	if path == "" {
		path = "./data/analytics.db"
	}
	fs.StringVar(&path, "database-path", path, "SQLite file to shrink; the server must be stopped [DATABASE_PATH]")
	if err := fs.Parse(args); err != nil {
		return 2
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
