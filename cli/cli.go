// Package cli is the command line of the tally binary: the settings table
// and its loading (docs/configuration.md#configuration), serving, and the
// maintenance subcommands (docs/operations.md#operations). main.go at the
// repository root only calls Run.
package cli
