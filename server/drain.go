package server

import "net/http"

// Draining is the moment between a stop signal and the listeners closing
// (docs/operations.md#behind-a-load-balancer): /healthz answers 503 "draining"
// so that a load balancer takes this instance out of rotation, while every
// other request is served as before.

// drainingReason is the reason of /healthz's 503 while draining.
const drainingReason = "the server is stopping; take it out of rotation: it serves requests until its listeners close"

// Drain turns /healthz (every listener) to 503 {"status":"draining"} for
// the rest of the process's life, and has each connection closed after its
// next answer: by the time the listeners close, a load balancer keeps no
// idle connection here on which a request could race the close. Every
// other route answers as before.
func (s *Server) Drain() { s.draining.Store(true) }

// closeWhileDraining asks for the connection to be closed after each
// answer once Drain was called ("Connection: close"; HTTP/2 sends GOAWAY).
func (s *Server) closeWhileDraining(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}
