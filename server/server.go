// Package server is the HTTP surface: the collector (event intake and
// metrics) and the query API (tenancy, reads, audit, DLQ, GDPR, webhooks).
// Handlers parse the request, call storage, schema or privacy, and encode
// the answer; every error goes through one envelope writer.
package server

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/privacy"
	"github.com/tally-analytics/tally/schema"
	"github.com/tally-analytics/tally/storage"
)

// Modes of REQUIRE_API_KEY.
const (
	KeyModeNone    = "none"
	KeyModeTag     = "tag"
	KeyModeRequire = "require"
)

// ValidKeyMode reports whether mode is one of the REQUIRE_API_KEY modes.
func ValidKeyMode(mode string) bool {
	return mode == KeyModeNone || mode == KeyModeTag || mode == KeyModeRequire
}

// Config holds the settings the HTTP layer needs.
type Config struct {
	// AdminToken is the operator token; empty disables admin access.
	AdminToken string
	// RequireAPIKey is KeyModeNone, KeyModeTag or KeyModeRequire.
	RequireAPIKey string
	// CollectorURL is where DLQ replay and webhooks re-POST events.
	CollectorURL string
	// ConsentMode is privacy.ConsentCookieless (default) or
	// privacy.ConsentRequire.
	ConsentMode string
	// BotFilter is privacy.BotFilterOn (default: bots' events are dropped)
	// or privacy.BotFilterOff (they are stored, and marked in the feed).
	BotFilter string
	// RateLimit is events per second per site; 0 turns it off.
	RateLimit int
	// Quota is accepted events per site per UTC month; 0 means unlimited.
	Quota int
	// SourcemapUploadsPerMinute is sourcemap uploads per minute per site;
	// 0 turns the limit off.
	SourcemapUploadsPerMinute int
	// SourcemapMaxFiles is the most sourcemap files a site may store;
	// 0 means no cap.
	SourcemapMaxFiles int
	// SourcemapMaxBytes is the most decoded sourcemap bytes a site may
	// store; 0 means no cap.
	SourcemapMaxBytes int64
	// RetentionDays is how many UTC days of raw rows a site without its own
	// retention_days keeps, today included; 0 keeps everything.
	RetentionDays int
	// Plan is the tracking plan; nil disables schema validation.
	Plan *schema.Plan
	// PlanPath is the file Plan came from, re-read by ReloadPlan.
	PlanPath string
	// Locator resolves countries and cities; nil means none.
	Locator *privacy.Locator
	// DebugFeedSize, when positive, turns on the inspection feed (dev mode)
	// with room for that many decisions, and the /v1/debug/ endpoints.
	DebugFeedSize int
	// DebugAnyHost lets the /v1/debug/ endpoints answer requests addressed
	// to any host name; otherwise only to localhost or a loopback address
	// (dev mode with DEV_ALLOW_REMOTE sets it).
	DebugAnyHost bool
	// QueryTimeout is the deadline of each read of the query API
	// (read_deadline.go); 0 means DefaultQueryTimeout.
	QueryTimeout time.Duration
	// SessionIdle and SessionMaxAge are a session's idle and absolute
	// lifetimes; 0 means DefaultSessionIdle and DefaultSessionMaxAge
	// (docs/accounts.md#sessions).
	SessionIdle   time.Duration
	SessionMaxAge time.Duration
	// SecureCookies marks the session cookie Secure (HTTPS is on), so a
	// browser never sends it over plain HTTP.
	SecureCookies bool
	// Mail is the SMTP server of reports, alerts and account mail; its
	// zero value turns mail off (docs/email.md).
	Mail MailConfig
	// PublicURL is where people reach the query API and dashboard, the
	// base of links in mail (https://stats.example.com).
	PublicURL string
	// Logger receives structured logs; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Server holds what both listeners share.
type Server struct {
	cfg      Config
	db       *storage.DB
	log      *slog.Logger
	now      func() time.Time
	admin    adminToken
	limiter  *rateLimiter
	uploads  *rateLimiter // sourcemap uploads
	imports  *importUploads
	locator  *privacy.Locator
	plan     atomic.Pointer[schema.Plan]
	internal internalToken
	feed     *debugFeed
	client   *http.Client
	metrics  atomic.Pointer[collectorMetrics]
	faults   faultInjector // dev mode's injected intake faults
	// draining is set by Drain, at a stop signal
	// (docs/operations.md#behind-a-load-balancer).
	draining atomic.Bool
	// retentionKick asks the purge loop for a purge now.
	retentionKick chan struct{}
	// signins throttles failed sign-ins (auth_throttle.go).
	signins *signinThrottle
	// invitations mails invitation links; nil without SMTP
	// (auth_invitations.go, mail_accounts.go).
	invitations invitationSender
	// mailKick asks the mail loop for a round now (mail_delivery.go);
	// alertsAt is when this instance last checked the traffic alerts
	// (Unix nanoseconds, mail_alerts.go).
	mailKick chan struct{}
	alertsAt atomic.Int64
	// resets throttles password reset mails as signins does sign-ins,
	// and resetSlots bounds those being made off the request's path
	// (mail_accounts.go).
	resets     *signinThrottle
	resetSlots chan struct{}
}

// New returns a Server over db.
func New(cfg Config, db *storage.DB) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RequireAPIKey == "" {
		cfg.RequireAPIKey = KeyModeNone
	}
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = DefaultQueryTimeout
	}
	if cfg.ConsentMode == "" {
		cfg.ConsentMode = privacy.ConsentCookieless
	}
	if cfg.BotFilter == "" {
		cfg.BotFilter = privacy.BotFilterOn
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = DefaultSessionIdle
	}
	if cfg.SessionMaxAge <= 0 {
		cfg.SessionMaxAge = DefaultSessionMaxAge
	}
	s := &Server{cfg: cfg, db: db, log: cfg.Logger, now: cfg.Now, admin: newAdminToken(cfg.AdminToken),
		limiter: newRateLimiter(cfg.RateLimit), uploads: newUploadLimiter(cfg.SourcemapUploadsPerMinute), locator: cfg.Locator,
		imports: newImportUploads(), internal: newInternalToken(), client: &http.Client{Timeout: forwardTimeout},
		feed: newDebugFeed(cfg.DebugFeedSize), retentionKick: make(chan struct{}, 1),
		signins: newSigninThrottle(cfg.Now), mailKick: make(chan struct{}, 1), resets: newSigninThrottle(cfg.Now),
		resetSlots: make(chan struct{}, resetConcurrency)}
	if cfg.Mail.on() {
		s.invitations = mailInvitations{s}
	}
	s.plan.Store(cfg.Plan)
	s.metrics.Store(newCollectorMetrics(db.PoolStats, db.DiskUsage))
	return s
}

// Run does the server's background work until ctx ends: sampling the DLQ
// size for the metrics, pruning expired dedup ids and salts, the daily
// retention purge, mail (when SMTP is set), and the query API's partials
// warm-up, which Run waits for (it reads and writes the database, which
// closes after Run).
func (s *Server) Run(ctx context.Context) {
	go s.db.PruneLoop(ctx, func(err error) { s.log.Error("prune", "err", err.Error()) })
	go s.retentionLoop(ctx)
	if s.cfg.Mail.on() {
		go s.mailLoop(ctx)
	}
	warm := make(chan struct{})
	go func() {
		defer close(warm)
		s.db.WarmPartials(ctx, s.log)
	}()
	s.sampleDLQ(ctx)
	<-warm
}

// Collector returns the handler of the ingest listener.
func (s *Server) Collector() http.Handler { return cors(s.collectorRouter()) }

// collectorRouter holds the collector's routes, which the shared HTTPS
// listener also looks up.
func (s *Server) collectorRouter() *router {
	rt := newRouter(s.log)
	rt.handle(http.MethodGet, "/healthz", s.healthz)
	rt.handle(http.MethodGet, "/metrics", s.serveMetrics)
	rt.handle(http.MethodPost, "/events", s.ingest(browserEvents))
	rt.handle(http.MethodPost, "/s2s/events", s.ingest(serverEvents))
	rt.handleV1(http.MethodGet, "/script.js", s.script)
	s.segmentRoutes(rt)
	s.trackerRoutes(rt)
	rt.route(http.MethodGet, "/v1/projects/:writeKey/settings", s.segmentSettings)
	rt.GlobalOPTIONS = http.HandlerFunc(preflight)
	return rt
}

// cors lets pages on any origin send events: every answer carries
// Access-Control-Allow-Origin *, and preflights are answered by preflight.
// Credentials (cookies) are never involved: auth is a bearer header.
func cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		// A page's script may read only the headers listed here: SDKs
		// (Segment's browser SDK among them) wait as long as they say.
		w.Header().Set("Access-Control-Expose-Headers", "Retry-After, X-RateLimit-Reset")
		next.ServeHTTP(w, r)
	})
}

// preflight answers CORS preflight requests of the collector.
//
// OPTIONS * (collector)
func preflight(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Methods", "POST, GET, OPTIONS")
	// X-Retry-Count: Segment's browser SDK marks its retries with it;
	// X-Umami-Cache: Umami's tracker sends back the token of its last answer.
	h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Site-Id, X-Retry-Count, X-Umami-Cache")
	h.Set("Access-Control-Max-Age", "86400")
	w.WriteHeader(http.StatusNoContent)
}

// Query returns the handler of the query API listener.
func (s *Server) Query() http.Handler {
	rt := newRouter(s.log)
	rt.handle(http.MethodGet, "/healthz", s.healthz)
	rt.route(http.MethodGet, "/", s.dashboard)
	rt.handleV1(http.MethodGet, "/ui/*filepath", s.dashboard)

	rt.handle(http.MethodGet, "/workspaces", s.listWorkspaces)
	rt.handle(http.MethodPost, "/workspaces", s.createWorkspace)
	rt.handle(http.MethodGet, "/workspaces/:slug", s.getWorkspace)
	rt.handle(http.MethodPatch, "/workspaces/:slug", s.updateWorkspace)
	rt.handle(http.MethodGet, "/workspaces/:slug/sites", s.listSites)
	rt.handle(http.MethodPost, "/workspaces/:slug/sites", s.createSite)
	rt.handle(http.MethodDelete, "/workspaces/:slug/sites/:id", s.deleteSite)
	rt.handle(http.MethodGet, "/workspaces/:slug/keys", s.listKeys)
	rt.handle(http.MethodPost, "/workspaces/:slug/keys", s.createKey)
	rt.handle(http.MethodDelete, "/workspaces/:slug/keys/:keyId", s.revokeKey)
	rt.handle(http.MethodGet, "/workspaces/:slug/audit", s.listAudit)

	rt.handleV1(http.MethodGet, "/workspaces/:slug/invitations", s.listInvitations)
	rt.handleV1(http.MethodPost, "/workspaces/:slug/invitations", s.createInvitation)
	rt.handleV1(http.MethodGet, "/workspaces/:slug/members", s.listMembers)
	rt.handleV1(http.MethodDelete, "/workspaces/:slug/invitations/:id", s.revokeInvitation)
	rt.handleV1(http.MethodPatch, "/workspaces/:slug/members/:userId", s.updateMember)
	rt.handleV1(http.MethodDelete, "/workspaces/:slug/members/:userId", s.removeMember)
	s.accountRoutes(rt)
	s.shareRoutes(rt)
	rt.gate = s.shareGate

	rt.handleV1(http.MethodPost, "/plan/reload", s.reloadPlan)
	rt.handleV1(http.MethodPost, "/backup", s.backup)
	if s.feed != nil {
		rt.handleV1(http.MethodGet, "/debug/decisions", s.listDecisions)
		rt.handleV1(http.MethodGet, "/debug/summary", s.summary)
		rt.handleV1(http.MethodPost, "/debug/reset", s.reset)
		rt.handleV1(http.MethodGet, "/debug/faults", s.listFaults)
		rt.handleV1(http.MethodPost, "/debug/faults", s.setFault)
		rt.handleV1(http.MethodDelete, "/debug/faults", s.clearFaults)
		rt.handleV1(http.MethodPost, "/debug/sites", s.createThrowAwaySite)
		rt.handleV1(http.MethodDelete, "/debug/sites/:siteId", s.removeThrowAwaySite)
	}

	rt.handleV1(http.MethodGet, "/sites/:siteId", s.bounded(s.getSite))
	rt.handle(http.MethodPatch, "/sites/:siteId", s.updateSite)
	rt.handle(http.MethodGet, "/sites/:siteId/pageviews", s.bounded(s.pageviews))
	rt.handle(http.MethodGet, "/sites/:siteId/events", s.bounded(s.eventCounts))
	rt.handle(http.MethodGet, "/sites/:siteId/sessions", s.bounded(s.sessions))
	rt.handle(http.MethodGet, "/sites/:siteId/users/:userId/timeline", s.bounded(s.timeline))
	rt.handleV1(http.MethodGet, "/sites/:siteId/breakdown", s.bounded(s.breakdown))
	rt.handleV1(http.MethodGet, "/sites/:siteId/realtime", s.bounded(s.realtime))
	rt.handleV1(http.MethodGet, "/sites/:siteId/properties", s.bounded(s.propertyNames))
	rt.handleV1(http.MethodGet, "/sites/:siteId/export", s.export)
	rt.handleV1(http.MethodPost, "/sites/:siteId/query", s.bounded(s.siteQuery))
	rt.handleV1(http.MethodPost, "/sites/:siteId/goals", s.createGoal)
	rt.handleV1(http.MethodGet, "/sites/:siteId/goals", s.bounded(s.listGoals))
	rt.handleV1(http.MethodDelete, "/sites/:siteId/goals/:goalId", s.deleteGoal)
	rt.handleV1(http.MethodPatch, "/sites/:siteId/goals/:goalId", s.updateGoal)
	rt.handleV1(http.MethodPost, "/sites/:siteId/segments", s.createSegment)
	rt.handleV1(http.MethodGet, "/sites/:siteId/segments", s.bounded(s.listSegments))
	rt.handleV1(http.MethodGet, "/sites/:siteId/segments/:segmentId", s.bounded(s.getSegment))
	rt.handleV1(http.MethodPatch, "/sites/:siteId/segments/:segmentId", s.updateSegment)
	rt.handleV1(http.MethodDelete, "/sites/:siteId/segments/:segmentId", s.deleteSegment)
	rt.handleV1(http.MethodPost, "/sites/:siteId/funnels", s.createFunnel)
	rt.handleV1(http.MethodGet, "/sites/:siteId/funnels", s.bounded(s.listFunnels))
	rt.handleV1(http.MethodPatch, "/sites/:siteId/funnels/:funnelId", s.updateFunnel)
	rt.handleV1(http.MethodDelete, "/sites/:siteId/funnels/:funnelId", s.deleteFunnel)
	rt.handleV1(http.MethodGet, "/sites/:siteId/imports", s.bounded(s.listImports))
	rt.handleV1(http.MethodPost, "/sites/:siteId/funnel", s.bounded(s.funnel))
	rt.handleV1(http.MethodPost, "/sites/:siteId/imports", s.importEvents)
	rt.handleV1(http.MethodPost, "/sites/:siteId/imports/:source", s.importUpload)
	rt.routePlausible(http.MethodPost, "/api/v2/query", s.bounded(s.plausibleQuery))
	rt.handle(http.MethodPost, "/sites/:siteId/sourcemaps", s.uploadSourcemap)
	rt.handleV1(http.MethodDelete, "/sites/:siteId/sourcemaps", s.deleteSourcemaps)
	rt.handle(http.MethodGet, "/sites/:siteId/dlq", s.listDLQ)
	rt.handle(http.MethodPost, "/sites/:siteId/dlq/:eventId/replay", s.replayDLQ)
	rt.handle(http.MethodPost, "/webhooks/:adapter/:siteId", s.webhook)
	rt.handleV1(http.MethodPost, "/sites/:siteId/webhook-secrets", s.createWebhookSecret)
	rt.handleV1(http.MethodGet, "/sites/:siteId/webhook-secrets", s.listWebhookSecrets)
	rt.handleV1(http.MethodDelete, "/sites/:siteId/webhook-secrets/:secretId", s.revokeWebhookSecret)
	rt.handle(http.MethodPost, "/sites/:siteId/gdpr/export", s.gdprExport)
	rt.handle(http.MethodPost, "/sites/:siteId/gdpr/delete", s.gdprDelete)
	s.mailRoutes(rt)
	return rt
}

// healthz answers 200 {"status":"ok"} while the database answers reads
// and takes writes, else 503 {"status":"unavailable","reason":...}, so
// that a load balancer or orchestrator can act on a full disk; from Drain
// on, 503 {"status":"draining"} whatever the database's state. How the
// write path is judged (the latest commit, or a probe write when idle) is
// storage.DB.WriteHealth's.
//
// GET /healthz (both listeners)
func (s *Server) healthz(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if s.draining.Load() {
		writeJSON(w, http.StatusServiceUnavailable, healthBody{Status: "draining", Reason: drainingReason})
		return nil
	}
	if err := s.db.Ping(r.Context()); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, healthBody{Status: "unavailable", Reason: "the database does not answer reads"})
		return nil
	}
	if err := s.db.WriteHealth(r.Context()); err != nil {
		reason := "the database does not take writes"
		if e := fault.As(err); e != nil {
			reason = e.Message
		}
		writeJSON(w, http.StatusServiceUnavailable, healthBody{Status: "unavailable", Reason: reason})
		return nil
	}
	writeJSON(w, http.StatusOK, healthBody{Status: "ok"})
	return nil
}
