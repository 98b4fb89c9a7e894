// Command tally is a self-hosted event analytics service: an ingest
// collector and a query API over one SQLite file, in one process.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/tally-analytics/tally/privacy"
	"github.com/tally-analytics/tally/schema"
	"github.com/tally-analytics/tally/server"
	"github.com/tally-analytics/tally/storage"
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
	os.Exit(run(os.Args[1:], os.Getenv, os.Stderr))
}

// run starts both listeners and blocks until SIGINT or SIGTERM; it returns
// the process exit code.
func run(args []string, getenv func(string) string, stderr io.Writer) int {
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	cfg, err := loadConfig(args, getenv, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "tally:", err)
		return 2
	}
	if cfg.AdminToken == "" {
		log.Warn("ADMIN_TOKEN is not set: admin endpoints will refuse every request")
	}
	var plan *schema.Plan
	if cfg.SchemaBundlePath != "" {
		if plan, err = schema.LoadPlan(cfg.SchemaBundlePath); err != nil {
			fmt.Fprintln(stderr, "tally:", err)
			return 2
		}
	}
	locator, err := privacy.NewLocator(cfg.GeoIPDBPath, cfg.TrustProxy)
	if err != nil {
		fmt.Fprintln(stderr, "tally:", err)
		return 2
	}
	defer locator.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	db, err := storage.Open(ctx, storage.Options{Path: cfg.DatabasePath})
	if err != nil {
		log.Error("cannot open the database", "path", cfg.DatabasePath, "err", err.Error())
		return 1
	}
	defer db.Close()

	collectorLn, err := net.Listen("tcp", cfg.CollectorAddr)
	if err != nil {
		log.Error("cannot listen", "listener", "collector", "err", err.Error())
		return 1
	}
	queryLn, err := net.Listen("tcp", cfg.QueryAddr)
	if err != nil {
		collectorLn.Close()
		log.Error("cannot listen", "listener", "query", "err", err.Error())
		return 1
	}
	if cfg.CollectorURL == "" {
		cfg.CollectorURL = fmt.Sprintf("http://127.0.0.1:%d", collectorLn.Addr().(*net.TCPAddr).Port)
	}
	srv := server.New(server.Config{
		AdminToken:    cfg.AdminToken,
		RequireAPIKey: cfg.RequireAPIKey,
		CollectorURL:  cfg.CollectorURL,
		ConsentMode:   cfg.ConsentMode,
		RateLimit:     cfg.IngestRateLimit,
		Quota:         cfg.IngestQuota,
		Plan:          plan,
		PlanPath:      cfg.SchemaBundlePath,
		Locator:       locator,
		Logger:        log,
	}, db)
	go srv.Run(ctx)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			srv.ReloadPlan() // logs the outcome; a broken plan leaves the old one active
		}
	}()

	servers := []*http.Server{
		newHTTPServer(srv.Collector(), log),
		newHTTPServer(srv.Query(), log),
	}
	failed := make(chan error, 2)
	for i, ln := range []net.Listener{collectorLn, queryLn} {
		go func() { failed <- servers[i].Serve(ln) }()
	}
	log.Info("listening", "collector", collectorLn.Addr().String(), "query", queryLn.Addr().String(),
		"database", cfg.DatabasePath, "require_api_key", cfg.RequireAPIKey)

	code := 0
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-failed:
		log.Error("listener failed", "err", err.Error())
		code = 1
	}
	// Shutdown waits for in-flight requests, whose events are committed
	// before they are answered; db.Close (deferred) then drains the writer.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range servers {
		if err := s.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("shutdown", "err", err.Error())
		}
	}
	if err := db.Close(); err != nil {
		log.Error("close database", "err", err.Error())
		code = 1
	}
	log.Info("stopped")
	return code
}

func newHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
