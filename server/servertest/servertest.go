// Package servertest runs a complete Tally service (collector and query
// API, both on loopback) over an in-memory database inside a Go test, as a
// fake analytics backend for SDK and application tests.
//
//	srv := servertest.New(t)
//	// point the SDK under test at srv.CollectorURL with srv.SiteID ...
//	events, _ := srv.Events()
//	decisions := srv.Decisions(servertest.Filter{Outcome: "dropped"})
//
// Every instance is isolated (its own database, ports, metrics and
// inspection feed), so parallel tests may each start one. It stops in
// t.Cleanup.
package servertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/tally-analytics/tally/privacy"
	"github.com/tally-analytics/tally/schema"
	"github.com/tally-analytics/tally/server"
	"github.com/tally-analytics/tally/storage"
)

// Server is a running instance. Its embedded DevSetup holds the URLs, the
// site id, the admin token and a key of each scope.
type Server struct {
	server.DevSetup
	inst *server.Instance
	db   *storage.DB
	once sync.Once
	err  error
}

// Filter selects inspection-feed decisions; see server.DebugFilter.
type Filter = server.DebugFilter

// Decision is one intake decision of the inspection feed.
type Decision = server.DebugEvent

// Event is a stored event.
type Event = storage.StoredEvent

// Answer is the collector's 202 body.
type Answer struct {
	Accepted    int `json:"accepted"`
	Duplicates  int `json:"duplicates"`
	Quarantined int `json:"quarantined"`
	Dropped     int `json:"dropped"`
}

type options struct {
	cfg         server.Config
	now         func() time.Time
	planJSON    string
	databaseURL string
}

// Option configures an instance.
type Option func(*options)

// WithClock makes now the clock of the instance: event defaults, session
// timeouts, daily cookieless salts, audit times. See Clock.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithPlan validates events against a tracking plan, in the format of
// docs/intake.md#tracking-plan.
func WithPlan(planJSON string) Option { return func(o *options) { o.planJSON = planJSON } }

// WithRequireAPIKey sets the collector's REQUIRE_API_KEY mode.
func WithRequireAPIKey(mode string) Option { return func(o *options) { o.cfg.RequireAPIKey = mode } }

// WithConsentMode sets CONSENT_MODE ("cookieless" or "require").
func WithConsentMode(mode string) Option { return func(o *options) { o.cfg.ConsentMode = mode } }

// WithRateLimit sets events per second per site (default 0: off).
func WithRateLimit(perSecond int) Option { return func(o *options) { o.cfg.RateLimit = perSecond } }

// WithQuota sets accepted events per site per month (default 0: unlimited).
func WithQuota(n int) Option { return func(o *options) { o.cfg.Quota = n } }

// WithBotFilter sets BOT_FILTER: "off" (the default, as in dev mode)
// stores the events of headless browsers and crawlers and marks them Bot
// in the decisions; "on" drops them, as production does.
func WithBotFilter(setting string) Option { return func(o *options) { o.cfg.BotFilter = setting } }

// WithProxyGeo trusts the CF-IPCountry and CF-IPCity headers, so a test
// sets each event's country and city (docs/intake.md).
func WithProxyGeo() Option {
	return func(o *options) {
		loc, err := privacy.NewLocator("", true)
		if err != nil {
			panic(err) // no database file: cannot fail
		}
		o.cfg.Locator = loc
	}
}

// WithDatabaseURL puts the instance on that PostgreSQL database (migrated
// at start, and left there at Close) instead of a fresh in-memory SQLite
// one.
func WithDatabaseURL(url string) Option { return func(o *options) { o.databaseURL = url } }

// WithLogger receives the server's logs (default: discarded).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.cfg.Logger = l } }

// New starts an instance for the test and stops it in t.Cleanup. It fails
// the test if the instance cannot start.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s, err := start(t, opts...)
	if err != nil {
		t.Fatalf("servertest: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Start starts an instance outside a test; call Close when done.
func Start(opts ...Option) (*Server, error) { return start(nil, opts...) }

// testStorage, set by this package's own tests, puts the instances of a
// test (t) on the database the test run is on
// (docs/development.md#both-backends).
var testStorage func(t testing.TB, o storage.Options) storage.Options

func start(t testing.TB, opts ...Option) (*Server, error) {
	o := &options{cfg: server.Config{BotFilter: privacy.BotFilterOff}}
	for _, opt := range opts {
		opt(o)
	}
	if o.cfg.Logger == nil {
		o.cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.planJSON != "" {
		plan, err := schema.ParsePlan([]byte(o.planJSON))
		if err != nil {
			return nil, fmt.Errorf("plan: %w", err)
		}
		o.cfg.Plan = plan
	}
	o.cfg.Now = o.now
	o.cfg.AdminToken = "servertest-admin"
	o.cfg.DebugFeedSize = server.DefaultDebugFeedSize
	sopts := storage.Options{Path: ":memory:", Now: o.now}
	if testStorage != nil && t != nil {
		sopts = testStorage(t, sopts)
	}
	if o.databaseURL != "" {
		sopts.DatabaseURL = o.databaseURL
	}
	db, err := storage.Open(context.Background(), sopts)
	if err != nil {
		return nil, err
	}
	inst, err := server.Listen(o.cfg, db, "127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		db.Close()
		return nil, err
	}
	setup, err := server.SeedDev(context.Background(), inst, o.cfg.AdminToken)
	if err != nil {
		inst.Shutdown(context.Background())
		db.Close()
		return nil, err
	}
	return &Server{DevSetup: setup, inst: inst, db: db}, nil
}

// Close stops the listeners and drops the database. A second Close does
// nothing.
func (s *Server) Close() error {
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.err = s.inst.Shutdown(ctx)
		if err := s.db.Close(); s.err == nil {
			s.err = err
		}
	})
	return s.err
}

// Send posts events (anything that encodes to an event object) to the
// collector's /v1/events as one batch, authenticated as the site, and
// returns the 202 answer; any other answer is an error carrying its body.
// Fields your events omit are not filled in: the point is to check what
// your SDK sends.
func (s *Server) Send(events ...any) (Answer, error) {
	body, err := json.Marshal(events)
	if err != nil {
		return Answer{}, err
	}
	req, err := http.NewRequest(http.MethodPost, s.CollectorURL+"/v1/events", bytes.NewReader(body))
	if err != nil {
		return Answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+s.SiteID)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusAccepted {
		return Answer{}, fmt.Errorf("collector answered %d: %s", res.StatusCode, b)
	}
	var a Answer
	return a, json.Unmarshal(b, &a)
}

// Events returns every event stored for the site, in arrival order, with
// its enrichment and exact wire bytes (Raw).
func (s *Server) Events() ([]Event, error) {
	return s.db.SiteEvents(context.Background(), s.SiteID)
}

// WaitEvents returns the site's stored events once there are at least n,
// for clients that deliver asynchronously (an SDK's background flush, a
// browser), or an error naming how many arrived if within passes first.
// It checks every 20 ms: a test waits for the events, not for a time.
func (s *Server) WaitEvents(n int, within time.Duration) ([]Event, error) {
	deadline := time.Now().Add(within)
	for {
		events, err := s.Events()
		if err != nil || len(events) >= n {
			return events, err
		}
		if time.Now().After(deadline) {
			return events, fmt.Errorf("servertest: %d events stored after %v, want %d", len(events), within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// MustWaitEvents is WaitEvents for a test: it fails t, showing the
// inspection feed's decisions (why events did not arrive), when fewer
// than n events are stored within the time given.
func (s *Server) MustWaitEvents(t testing.TB, n int, within time.Duration) []Event {
	t.Helper()
	events, err := s.WaitEvents(n, within)
	if err != nil {
		t.Fatalf("%v; decisions: %+v", err, s.Decisions(Filter{}))
	}
	return events
}

// Decisions returns the inspection feed's decisions matching f, newest
// first: why each event was accepted, deduplicated, quarantined, dropped
// (with the gate's reason) or rejected (with the error code and details).
func (s *Server) Decisions(f Filter) []Decision {
	return s.inst.Server.Decisions(f)
}

// Reset deletes all events, sessions, DLQ rows, identity data, rollups
// and dedup ids, and clears the inspection feed; the site and keys stay.
func (s *Server) Reset() error {
	req, _ := http.NewRequest(http.MethodPost, s.QueryURL+"/v1/debug/reset", nil)
	req.Header.Set("Content-Type", "application/json") // the reset refuses what a cross-site form could send
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("reset answered %d", res.StatusCode)
	}
	return nil
}

// Fault is a failure or stall of the next intake requests, to test what an
// SDK does when the backend fails (docs/testing.md#retry-testing).
type Fault struct {
	// Status is 429, 500, 502, 503 or 504; 0 only stalls.
	Status int `json:"status,omitempty"`
	// RetryAfter is the failure's Retry-After in seconds; 0 keeps the
	// default: 1 for 429 and 503, no header for the others.
	RetryAfter int `json:"retry_after,omitempty"`
	// Delay stalls each request this long (at most 30 s), to the
	// millisecond, before it fails or is served.
	Delay time.Duration `json:"-"`
	// Count is how many requests it applies to (1 to 1,000; 0 means 1).
	Count int `json:"count,omitempty"`
	// SiteID, when set, limits it to that site's requests.
	SiteID string `json:"site_id,omitempty"`
}

// InjectFault makes the next f.Count intake requests (of f.SiteID, if set)
// stall for f.Delay, then fail with f.Status, storing nothing; it replaces
// the fault pending for that site. ClearFaults or Reset removes it.
func (s *Server) InjectFault(f Fault) error {
	type wire struct {
		Fault
		DelayMS int64 `json:"delay_ms,omitempty"`
	}
	return s.debugCall(http.MethodPost, "/v1/debug/faults", wire{f, f.Delay.Milliseconds()}, http.StatusOK, nil)
}

// ClearFaults removes every pending fault.
func (s *Server) ClearFaults() error {
	return s.debugCall(http.MethodDelete, "/v1/debug/faults", nil, http.StatusOK, nil)
}

// Site is a throw-away site and the plaintexts of its ingest and query
// keys, for one test of a suite that shares a server.
type Site struct {
	ID   string `json:"site_id"`
	Keys struct {
		Ingest string `json:"ingest"`
		Query  string `json:"query"`
	} `json:"keys"`
}

// NewSite makes a throw-away site in the dev workspace, with id, or a
// generated one when id is "".
func (s *Server) NewSite(id string) (Site, error) {
	body := map[string]string{}
	if id != "" {
		body["id"] = id
	}
	var site Site
	err := s.debugCall(http.MethodPost, "/v1/debug/sites", body, http.StatusCreated, &site)
	return site, err
}

// DeleteSite removes a site NewSite made, with its events and its keys.
func (s *Server) DeleteSite(id string) error {
	return s.debugCall(http.MethodDelete, "/v1/debug/sites/"+url.PathEscape(id), nil, http.StatusNoContent, nil)
}

// debugCall sends body (nil for none) to a dev endpoint of the query API,
// requires status, and decodes the answer into out, if given.
func (s *Server) debugCall(method, path string, body any, status int, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.QueryURL+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != status {
		return fmt.Errorf("%s %s answered %d: %s", method, path, res.StatusCode, b)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// Clock is a settable clock for WithClock: it starts at a fixed time and
// moves only when told.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock standing at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}
