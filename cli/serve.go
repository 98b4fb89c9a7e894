package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tally-analytics/tally/privacy"
	"github.com/tally-analytics/tally/schema"
	"github.com/tally-analytics/tally/server"
	"github.com/tally-analytics/tally/storage"
)

// shutdownTimeout bounds how long SIGTERM waits for requests in flight;
// deploy/tally.service's TimeoutStopSec leaves room for it and the close.
const shutdownTimeout = 30 * time.Second

// serve starts both listeners and blocks until SIGINT or SIGTERM; it
// returns the process exit code.
func serve(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	cfg, exit, ok := configOrExit(args, getenv, stdout, stderr)
	if !ok {
		return exit
	}
	if cfg.AdminToken == "" && !cfg.Dev {
		log.Warn("ADMIN_TOKEN is not set: admin endpoints will refuse every request")
	}
	if name, _ := cfg.remoteListener(); cfg.Dev && name != "" {
		log.Warn("dev mode listens beyond loopback (DEV_ALLOW_REMOTE): anyone who reaches it can send to the seeded site, read the inspection feed and wipe the data", "setting", name)
	}
	plan, locator, err := cfg.open()
	if err != nil {
		fmt.Fprintln(stderr, "tally:", err)
		return 2
	}
	defer locator.Close()
	var https server.HTTPS
	var certFiles *server.CertFiles
	if cfg.TLS.on() {
		if https, certFiles, err = cfg.httpsSetup(log); err != nil {
			fmt.Fprintln(stderr, "tally:", err)
			return 2
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	db, err := storage.Open(ctx, cfg.storageOptions(log))
	if err != nil {
		log.Error("cannot open the database", "database", cfg.database(), "err", err.Error())
		return 1
	}
	defer db.Close()

	inst, err := server.Listen(server.Config{
		AdminToken:    cfg.AdminToken,
		RequireAPIKey: cfg.RequireAPIKey,
		CollectorURL:  cfg.CollectorURL,
		ConsentMode:   cfg.ConsentMode,
		BotFilter:     cfg.BotFilter,
		RateLimit:     cfg.IngestRateLimit,
		Quota:         cfg.IngestQuota,
		RetentionDays: cfg.RetentionDays,
		Plan:          plan,
		PlanPath:      cfg.SchemaBundlePath,
		Locator:       locator,
		Logger:        log,
		DebugFeedSize: cfg.DebugFeedSize,
		DebugAnyHost:  cfg.DevAllowRemote,

		SourcemapUploadsPerMinute: cfg.SourcemapUploadRate,
		SourcemapMaxFiles:         cfg.SourcemapMaxFiles,
		SourcemapMaxBytes:         int64(cfg.SourcemapMaxMiB) << 20,
		QueryTimeout:              cfg.QueryTimeout,
		SessionIdle:               cfg.SessionIdle,
		SessionMaxAge:             cfg.SessionMaxAge,
		SecureCookies:             cfg.TLS.on(),
		Mail:                      cfg.Mail,
		PublicURL:                 cfg.PublicURL,
	}, db, cfg.CollectorAddr, cfg.QueryAddr)
	if err != nil {
		log.Error("cannot listen", "err", err.Error())
		return 1
	}
	if cfg.TLS.on() {
		if err := inst.ServeHTTPS(https); err != nil {
			log.Error("cannot listen", "err", err.Error())
			inst.Shutdown(context.Background())
			return 1
		}
	}
	if cfg.Dev {
		setup, err := server.SeedDev(ctx, inst, cfg.AdminToken)
		if err != nil {
			log.Error("dev mode", "err", err.Error())
			return 1
		}
		printDevSetup(stdout, setup, cfg.DevJSON)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			inst.Server.ReloadPlan() // logs the outcome; a broken plan leaves the old one active
			if certFiles != nil {
				certFiles.Reload() // logs the outcome; a broken pair leaves the old one in service
			}
		}
	}()
	attrs := append(listenerAttrs(listeners(inst)),
		"database", cfg.database(), "durability", cfg.Durability, "require_api_key", cfg.RequireAPIKey)
	if cfg.TLS.on() {
		attrs = append(attrs, "tls_domains", cfg.TLS.Domains)
	}
	log.Info("listening", attrs...)

	code := 0
	select {
	case <-ctx.Done():
		log.Info("shutting down")
		drainBeforeShutdown(inst, cfg.ShutdownDrain, log)
	case err := <-inst.Failed():
		log.Error("listener failed", "err", err.Error())
		code = 1
	}
	// Shutdown waits for in-flight requests, whose events are committed
	// before they are answered; db.Close (deferred) then drains the writer.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := inst.Shutdown(shutdownCtx); err != nil {
		log.Error("shutdown", "err", err.Error())
	}
	if err := db.Close(); err != nil {
		log.Error("close database", "err", err.Error())
		code = 1
	}
	log.Info("stopped")
	return code
}

// configOrExit loads the settings of serve. When it cannot, it has printed the help (-h, exit 0) or one line
// saying what was wrong (exit 2), and ok is false.
func configOrExit(args []string, getenv func(string) string, stdout, stderr io.Writer) (cfg config, code int, ok bool) {
	cfg, err := loadConfig(args, getenv, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		printHelp(stdout)
		return cfg, 0, false
	case err != nil:
		fmt.Fprintln(stderr, "tally:", err)
		return cfg, 2, false
	}
	return cfg, 0, true
}

// storageOptions are the settings of the database serve opens.
func (c config) storageOptions(log *slog.Logger) storage.Options {
	return storage.Options{Path: c.DatabasePath, DatabaseURL: c.DatabaseURL, Durability: c.Durability,
		ReadConns: c.DatabasePool, Logger: log}
}

// open reads the files the settings name: the tracking plan (nil when
// unset) and the GeoIP database.
func (c config) open() (*schema.Plan, *privacy.Locator, error) {
	var plan *schema.Plan
	if c.SchemaBundlePath != "" {
		var err error
		if plan, err = schema.LoadPlan(c.SchemaBundlePath); err != nil {
			return nil, nil, err
		}
	}
	locator, err := c.locator()
	if err != nil {
		return nil, nil, err
	}
	return plan, locator, nil
}

// GeoIPOff is the GEOIP_DB_PATH that turns address lookups off
// (docs/configuration.md#geoip).
const GeoIPOff = "off"

// locator opens GEOIP_DB_PATH's database: the file it names, none for
// off, the built-in country database when unset.
func (c config) locator() (*privacy.Locator, error) {
	switch c.GeoIPDBPath {
	case "":
		return privacy.NewBuiltinLocator(c.TrustProxy)
	case GeoIPOff:
		return privacy.NewLocator("", c.TrustProxy)
	}
	return privacy.NewLocator(c.GeoIPDBPath, c.TrustProxy)
}

// geoIPSummary is check-config's line for GEOIP_DB_PATH.
func (c config) geoIPSummary() string {
	switch c.GeoIPDBPath {
	case "":
		return "built-in countries (" + privacy.BuiltinGeoIPCredit + ", built " + privacy.BuiltinGeoIPBuilt().Format(time.DateOnly) + ")"
	case GeoIPOff:
		return "off (no address lookup)"
	}
	return c.GeoIPDBPath
}

// printDevSetup shows what dev mode made: one JSON line for scripts, or a
// short text for people.
func printDevSetup(w io.Writer, s server.DevSetup, asJSON bool) {
	if asJSON {
		json.NewEncoder(w).Encode(s)
		return
	}
	fmt.Fprintf(w, `Tally dev mode: in-memory database, gone when the process stops.
  collector    %s   (POST /v1/events with "Authorization: Bearer %s")
  query API    %s
  admin token  %s
  workspace    %s, site %s
  keys         admin %s
               ingest %s
               query %s
  inspect      curl %s/v1/debug/decisions
  reset        curl -X POST -H 'Content-Type: application/json' %s/v1/debug/reset
`, s.CollectorURL, s.SiteID, s.QueryURL, s.AdminToken, s.Workspace, s.SiteID, s.Keys.Admin, s.Keys.Ingest, s.Keys.Query, s.QueryURL, s.QueryURL)
}
