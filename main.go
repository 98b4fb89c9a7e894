// Command tally is a self-hosted event analytics service: an ingest
// collector and a query API over one SQLite file or one PostgreSQL
// database, in one process. The command line lives in package cli.
package main

import (
	"os"
	"runtime/debug"

	"github.com/tally-analytics/tally/cli"
)

// gcPercent is the GOGC the server runs with unless GOGC is set. The live
// heap is small, so the default of 100 collects very often, and those
// collections were the main source of tail latency at ingest (p99 halved
// at 400 in BenchmarkIngest). The cost is a heap up to 5x the live data.
const gcPercent = 400

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	os.Exit(cli.Run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}
