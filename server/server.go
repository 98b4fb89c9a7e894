// Package server is the HTTP surface: the collector (event intake and
// metrics) and the query API (tenancy, reads, audit, DLQ, GDPR, webhooks).
// Handlers parse the request, call storage, schema or privacy, and encode
// the answer; every error goes through one envelope writer.
package server

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/storage"
)

// Modes of REQUIRE_API_KEY.
const (
	KeyModeNone    = "none"
	KeyModeTag     = "tag"
	KeyModeRequire = "require"
)

// Config holds the settings the HTTP layer needs.
type Config struct {
	// AdminToken is the operator token; empty disables admin access.
	AdminToken string
	// RequireAPIKey is KeyModeNone, KeyModeTag or KeyModeRequire.
	RequireAPIKey string
	// CollectorURL is where DLQ replay and webhooks re-POST events.
	CollectorURL string
	// Logger receives structured logs; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Server holds what both listeners share.
type Server struct {
	cfg   Config
	db    *storage.DB
	log   *slog.Logger
	now   func() time.Time
	admin adminToken
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
	return &Server{cfg: cfg, db: db, log: cfg.Logger, now: cfg.Now, admin: newAdminToken(cfg.AdminToken)}
}

// Collector returns the handler of the ingest listener.
func (s *Server) Collector() http.Handler {
	rt := newRouter(s.log)
	rt.handle(http.MethodGet, "/healthz", s.healthz)
	return rt
}

// Query returns the handler of the query API listener.
func (s *Server) Query() http.Handler {
	rt := newRouter(s.log)
	rt.handle(http.MethodGet, "/healthz", s.healthz)

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
	return rt
}

// healthz answers 200 {"status":"ok"} once the database answers.
//
// GET /healthz (both listeners)
func (s *Server) healthz(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if err := s.db.Ping(r.Context()); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}
