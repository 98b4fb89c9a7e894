package main

import "io"

// command is a subcommand of the binary: it gets the arguments after its
// name and returns the process exit code.
type command func(args []string, getenv func(string) string, stdout, stderr io.Writer) int

// commands are the subcommands `tally NAME ...` runs; without one (or with
// flags first) the binary serves, as `tally serve` does. Maintenance
// commands that work on the database file of a running server are added
// here.
var commands = map[string]command{
	"serve":  serve,
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
