package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/tally-analytics/tally/storage"
)

// checkPostgresTimeout bounds check-config's connection to PostgreSQL.
const checkPostgresTimeout = 10 * time.Second

// checkConfig is `tally check-config`: every setting, the tracking plan,
// the GeoIP database and the TLS certificate files are read and checked as
// serving would, and nothing is started, bound, created or migrated; with
// DATABASE_URL it connects and runs the startup checks of PostgreSQL. Exit
// code 0 when all is well, 1 with the first problem, 2 for a command line
// that names no setting.
func checkConfig(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintln(stderr, "tally check-config:", err)
		return 1
	}
	cfg, err := loadConfig(args, getenv, stderr)
	var usage usageError
	switch {
	case errors.Is(err, flag.ErrHelp):
		printHelp(stdout)
		return 0
	case errors.As(err, &usage):
		fmt.Fprintln(stderr, "tally check-config:", err)
		return 2
	case err != nil:
		return fail(err)
	}
	for _, l := range []struct{ name, addr string }{{"COLLECTOR_ADDR", cfg.CollectorAddr}, {"QUERY_ADDR", cfg.QueryAddr}} {
		if err := validListenAddr(l.addr); err != nil {
			return fail(fmt.Errorf("%s: %w", l.name, err))
		}
	}
	plan, locator, err := cfg.open()
	if err != nil {
		return fail(err)
	}
	locator.Close()
	tlsSummary := "off"
	if cfg.TLS.on() {
		if _, _, err := cfg.httpsSetup(slog.New(slog.DiscardHandler)); err != nil {
			return fail(err)
		}
		tlsSummary = "certificate files " + cfg.TLS.CertFile + ", " + cfg.TLS.KeyFile
		if len(cfg.TLS.Domains) > 0 {
			dir, _ := cfg.acmeCacheDir()
			tlsSummary = fmt.Sprintf("ACME for %s from %s, cached in %s", strings.Join(cfg.TLS.Domains, ", "), cfg.TLS.ACMEDirectoryURL, dir)
		}
		http := cfg.TLS.HTTPAddr
		if http == "" {
			http = "off"
		}
		tlsSummary += fmt.Sprintf("; HTTPS on %s, HTTP (redirect) on %s", cfg.TLS.HTTPSAddr, http)
	}
	database := cfg.DatabasePath
	if cfg.DatabaseURL != "" {
		ctx, cancel := context.WithTimeout(context.Background(), checkPostgresTimeout)
		defer cancel()
		info, err := storage.CheckPostgres(ctx, cfg.DatabaseURL)
		if err != nil {
			return fail(fmt.Errorf("DATABASE_URL (%s): %w", cfg.database(), err))
		}
		database = fmt.Sprintf("%s: PostgreSQL %s, schema version %d of %d (DATABASE_PATH is ignored)",
			cfg.database(), info.Version, info.Schema, info.Known)
	}
	planSummary := "none (no schema validation)"
	if plan != nil {
		planSummary = cfg.SchemaBundlePath
	}
	fmt.Fprintf(stdout, "configuration OK\n  database  %s\n  listeners collector %s, query %s\n  TLS       %s\n  plan      %s\n  geoip     %s\n  mail      %s\n",
		database, cfg.CollectorAddr, cfg.QueryAddr, tlsSummary, planSummary, cfg.geoIPSummary(), cfg.mailSummary())
	return 0
}
