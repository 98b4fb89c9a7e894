package server

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
)

// handler is the shape of every endpoint: it returns an error instead of
// writing one, and the adapter below writes the envelope.
type handler func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error

// router wraps httprouter so each route is registered under /v1 and as its
// unprefixed alias, and every failure goes through writeError.
type router struct {
	*httprouter.Router
	log *slog.Logger
	// gate, when set, runs before every registered route's handler with
	// the route's pattern; its error is the answer (the query API's
	// shared-link allow-list, sharing_access.go).
	gate func(r *http.Request, pattern string) error
	// routes are the registered routes, "METHOD pattern", in order, for
	// the tests that walk the route table.
	routes []string
}

func newRouter(log *slog.Logger) *router {
	rt := &router{Router: httprouter.New(), log: log}
	rt.RedirectTrailingSlash = false
	rt.RedirectFixedPath = false
	rt.NotFound = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(log, w, r, unmatchedRoute, fault.Errorf(fault.NotFound, "no route for %s %s", r.Method, r.URL.Path))
	})
	rt.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(log, w, r, unmatchedRoute, fault.Errorf(fault.MethodNotAllowed, "method %s is not allowed on %s", r.Method, r.URL.Path))
	})
	// Panics in registered routes are caught by adapt, which knows the
	// route; this one catches those of the rest (preflight, say).
	rt.PanicHandler = func(w http.ResponseWriter, r *http.Request, v any) {
		if v == http.ErrAbortHandler {
			panic(v) // see adapt
		}
		writeError(log, w, r, unmatchedRoute, fmt.Errorf("panic: %v", v))
	}
	return rt
}

// handle registers h at path and at /v1+path: every v1 endpoint has both,
// /v1 canonical and the bare path an alias (docs/api.md).
func (rt *router) handle(method, path string, h handler) {
	rt.route(method, path, h)
	rt.route(method, "/v1"+path, h)
}

// handleV1 registers an endpoint added after v1.0: it exists only under /v1.
func (rt *router) handleV1(method, path string, h handler) {
	rt.route(method, "/v1"+path, h)
}

// route registers h at exactly path.
func (rt *router) route(method, path string, h handler) {
	rt.routes = append(rt.routes, method+" "+path)
	rt.Handle(method, path, rt.adapt(path, h))
}

// routePlausible registers h at exactly path, a route of Plausible's API:
// its failures are written in Plausible's error body
// (docs/query-api.md#plausible-compatibility).
func (rt *router) routePlausible(method, path string, h handler) {
	rt.routes = append(rt.routes, method+" "+path)
	rt.Handle(method, path, rt.adaptWith(path, h, writePlausibleError))
}

// unmatchedRoute names the route of a request that matched none in logs.
const unmatchedRoute = "(unmatched)"

// adapt turns h into an httprouter handle whose failures, panics included,
// are logged under pattern: the request path can hold a user id, which
// logs must not.
func (rt *router) adapt(pattern string, h handler) httprouter.Handle {
	return rt.adaptWith(pattern, h, writeError)
}

// adaptWith is adapt with the error body that write writes.
func (rt *router) adaptWith(pattern string, h handler, write func(*slog.Logger, http.ResponseWriter, *http.Request, string, error)) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v) // a handler ending a response it started: net/http drops the connection
				}
				write(rt.log, w, r, pattern, fmt.Errorf("panic: %v", v))
			}
		}()
		if rt.gate != nil {
			if err := rt.gate(r, pattern); err != nil {
				write(rt.log, w, r, pattern, err)
				return
			}
		}
		if err := h(w, r, ps); err != nil {
			write(rt.log, w, r, pattern, err)
		}
	}
}
