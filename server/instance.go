package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/tally-analytics/tally/storage"
)

// Instance is a running collector and query API over one database: what
// main runs, and what dev mode and servertest start.
type Instance struct {
	Server *Server
	DB     *storage.DB
	// CollectorURL and QueryURL are the listeners' base URLs, with the
	// ports actually chosen (an address with port 0 picks a free one).
	CollectorURL, QueryURL string
	// HTTPSURL and HTTPURL are those of ServeHTTPS, when it was called.
	HTTPSURL, HTTPURL string
	// CollectorAddr and QueryAddr are the addresses the listeners are
	// bound to, as the system reports them: [::]:8080 for every interface,
	// where the URLs above name 127.0.0.1. HTTPSAddr and HTTPAddr are
	// ServeHTTPS's (nil without it, HTTPAddr without a redirect listener).
	CollectorAddr, QueryAddr, HTTPSAddr, HTTPAddr net.Addr

	servers []*http.Server
	failed  chan error
	cancel  context.CancelFunc
	stopped chan struct{}
}

// Listen binds both listeners, builds the Server over db, and serves until
// Shutdown. An empty cfg.CollectorURL becomes this instance's collector.
func Listen(cfg Config, db *storage.DB, collectorAddr, queryAddr string) (*Instance, error) {
	cl, err := net.Listen("tcp", collectorAddr)
	if err != nil {
		return nil, fmt.Errorf("collector listener: %w", err)
	}
	ql, err := net.Listen("tcp", queryAddr)
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("query listener: %w", err)
	}
	inst := &Instance{DB: db, CollectorURL: baseURL(cl.Addr()), QueryURL: baseURL(ql.Addr()),
		CollectorAddr: cl.Addr(), QueryAddr: ql.Addr(), failed: make(chan error, 4), stopped: make(chan struct{})}
	if cfg.CollectorURL == "" {
		cfg.CollectorURL = inst.CollectorURL
	}
	inst.Server = New(cfg, db)
	inst.servers = []*http.Server{inst.Server.newHTTPServer(inst.Server.Collector()), inst.Server.newHTTPServer(inst.Server.Query())}
	// Debug reads that wait for decisions end when the server stops.
	inst.servers[1].RegisterOnShutdown(inst.Server.feed.stop)
	for i, ln := range []net.Listener{cl, ql} {
		go func() {
			if err := inst.servers[i].Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				inst.failed <- err
			}
		}()
	}
	ctx, cancel := context.WithCancel(context.Background())
	inst.cancel = cancel
	go func() {
		defer close(inst.stopped)
		inst.Server.Run(ctx)
	}()
	return inst, nil
}

// baseURL is http://127.0.0.1:<port> for a wildcard or loopback address:
// a URL that reaches the listener from this machine (the log names the
// bound address itself).
func baseURL(a net.Addr) string {
	tcp := a.(*net.TCPAddr)
	host := tcp.IP.String()
	if tcp.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, fmt.Sprint(tcp.Port))
}

// Failed reports a listener that stopped serving on its own.
func (inst *Instance) Failed() <-chan error { return inst.failed }

// Shutdown stops both listeners, waiting for requests in flight (whose
// events are committed before they are answered), then stops the
// background work. It does not close the database.
func (inst *Instance) Shutdown(ctx context.Context) error {
	var errs []error
	for _, s := range inst.servers {
		if err := s.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	inst.cancel()
	<-inst.stopped
	return errors.Join(errs...)
}

// newHTTPServer serves h on one of the instance's listeners.
func (s *Server) newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           s.closeWhileDraining(h),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}
