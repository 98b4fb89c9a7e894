package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
)

// DefaultQueryTimeout is QUERY_TIMEOUT's default: the deadline of each
// read of the query API (docs/benchmarks.md#query-api, Deadlines). The listener's
// WriteTimeout (60 s, instance.go) is past it, so the error reaches the
// client.
const DefaultQueryTimeout = 30 * time.Second

// MaxQueryTimeout bounds QUERY_TIMEOUT: past it the listener's write
// timeout would cut the answer off before the deadline could stop the read.
const MaxQueryTimeout = 55 * time.Second

// bounded runs h with a request context that ends at the query timeout.
// The database stops the read then too: SQLite's driver interrupts the
// statement (sqlite3_interrupt), PostgreSQL's is sent a cancel request
// (storage/internal/engine/driver_pg.go). The net/http server's own timeouts cancel
// nothing of a handler's work, so without it a read ran as long as the
// database took. A read that ends so is 503 query_timeout.
func (s *Server) bounded(h handler) handler {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.QueryTimeout)
		defer cancel()
		err := h(w, r.WithContext(ctx), ps)
		if err == nil || r.Context().Err() != nil || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return err
		}
		if fault.As(err) != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err // an answer of its own, whatever the clock says
		}
		return fault.Errorf(fault.QueryTimeout, "the read took longer than its limit of %s and was stopped: "+
			"ask for a shorter date_range or fewer filters, or raise QUERY_TIMEOUT", s.cfg.QueryTimeout)
	}
}
