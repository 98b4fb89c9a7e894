package cli

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tally-analytics/tally/server"
)

// maxShutdownDrain bounds SHUTDOWN_DRAIN, so that deploy/tally.service's
// TimeoutStopSec holds the drain, shutdownTimeout and the close of the
// database (TestSystemdUnitSettings). 90 s outlast the default health
// checks of the common load balancers, the slowest being AWS ALB's (two
// failures 30 s apart, 5 s timeout); docs/operations.md#behind-a-load-balancer.
const maxShutdownDrain = 90 * time.Second

// parseShutdownDrain reads SHUTDOWN_DRAIN: a Go duration (15s, 1m) from 0
// to maxShutdownDrain.
func parseShutdownDrain(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > maxShutdownDrain {
		return 0, fmt.Errorf("SHUTDOWN_DRAIN must be a duration from 0s to %s such as 15s, not %q", maxShutdownDrain, v)
	}
	return d, nil
}

// drainBeforeShutdown runs between the stop signal and the listeners closing: for d,
// /healthz answers 503 "draining" while every other request is served, so
// that load balancers stop routing here before the listeners close
// (docs/operations.md#behind-a-load-balancer). A second SIGINT or SIGTERM ends
// the wait. With d = 0, the default, it returns at once: a lone instance has
// nobody to warn, and a restart should not wait.
func drainBeforeShutdown(inst *server.Instance, d time.Duration, log *slog.Logger) {
	if d <= 0 {
		return
	}
	// Notify waits for the delivery of the first signal to end, so only a
	// later one reaches this channel. serve's own handler stays registered:
	// signals after the drain are ignored, as before it existed.
	again := make(chan os.Signal, 1)
	signal.Notify(again, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(again)
	inst.Server.Drain()
	log.Info("draining: /healthz answers 503 until the listeners close", "drain", d.String())
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case sig := <-again:
		log.Info("drain ended early by a second signal", "signal", sig.String())
	}
}
