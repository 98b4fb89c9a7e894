package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// printHelp is `tally -h` and `tally help`: the commands, then every
// setting under its group, all from the tables commands and settings.
func printHelp(w io.Writer) {
	fmt.Fprint(w, `Tally: self-hosted event analytics, an ingest collector and a query API over one SQLite file.

Usage:
  tally [serve] [flags]     run the service (the default command)
  tally COMMAND [flags]     'tally help COMMAND' shows its flags

Commands:
`)
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-14s %s\n", name, commands[name].summary)
	}
	fmt.Fprint(w, `
Settings of serve and check-config: each is an environment variable, and the flag
of the same name in kebab case overrides it (DATABASE_PATH, --database-path).
`)
	envWidth, flagWidth := 0, 0
	for _, s := range settings {
		envWidth = max(envWidth, len(s.env))
		flagWidth = max(flagWidth, len(s.flagName())+2)
	}
	for _, group := range settingGroups {
		fmt.Fprintf(w, "\n%s:\n", strings.ToUpper(group[:1])+group[1:])
		for _, s := range settings {
			if s.group != group {
				continue
			}
			def := ""
			if s.def != "" {
				def = "default " + s.def
			}
			line := fmt.Sprintf("  %-*s  %-*s  %s", envWidth, s.env, flagWidth, "--"+s.flagName(), def)
			fmt.Fprintf(w, "%s\n      %s\n", strings.TrimRight(line, " "), s.usage)
		}
	}
}

// helpCommand is `tally help [COMMAND]`.
func helpCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		printHelp(stdout)
		return 0
	case len(args) > 1:
		fmt.Fprintf(stderr, "tally help: unexpected argument %q (see 'tally help')\n", args[1])
		return 2
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "tally help: unknown command %q (see 'tally help')\n", args[0])
		return 2
	}
	if args[0] == "help" {
		printHelp(stdout)
		return 0
	}
	return cmd.run([]string{"-h"}, getenv, stdout, stderr)
}
