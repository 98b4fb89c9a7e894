package engine

import (
	"database/sql/driver"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tally-analytics/tally/fault"
)

// ConnectError is a failure to connect to PostgreSQL, or to read
// DATABASE_URL, in words that may be logged and printed: pgx's own
// message names the user (`user=... database=...`, and the server's
// `role "..." does not exist`), which docs/configuration.md promises
// never to show. Unwrap keeps pgx's error, so the error classes
// (Postgres.Classify) still see it.
type ConnectError struct {
	msg string
	err error
}

func (e *ConnectError) Error() string { return e.msg }
func (e *ConnectError) Unwrap() error { return e.err }

// RedactConnect turns pgx's connect and parse errors into ConnectErrors;
// any other error is returned as is.
func RedactConnect(err error) error {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		user := ""
		if ce.Config != nil {
			user = ce.Config.User
		}
		detail := "no detail"
		if inner := ce.Unwrap(); inner != nil {
			detail = inner.Error()
		}
		// One line: each address tried is one part.
		detail = strings.Join(strings.Fields(strings.ReplaceAll(detail, "\n", " ; ")), " ")
		detail = strings.ReplaceAll(detail, " ; ", "; ")
		if user != "" {
			detail = strings.NewReplacer(`"`+user+`"`, `"(the user)"`, "user="+user, "user=(the user)").Replace(detail)
		}
		return &ConnectError{msg: "connect to PostgreSQL: " + detail, err: err}
	}
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		// "cannot parse `URL`: why": the URL (its password masked, its
		// user not) is left out.
		why := pe.Error()
		if i := strings.LastIndex(why, "`: "); i >= 0 {
			why = why[i+3:]
		} else {
			why = "not a valid connection URL"
		}
		return &ConnectError{msg: "connection settings: " + why, err: err}
	}
	return err
}

// errReadUnreachable is what a request gets when PostgreSQL cannot be
// reached (stopped, restarting, failing over): 503 with Retry-After, the
// ordinary envelope, rather than a 500
// (docs/postgresql.md#running-n-instances-on-postgresql). Writes get the
// writer's ErrUnreachable instead.
var errReadUnreachable = &fault.Error{Code: fault.Unavailable, RetryAfter: UnwritableRetryAfter,
	Message: "the database cannot be reached; retry later"}

// unreachableError is an error of the "cannot be reached" class that
// also reads as errReadUnreachable (fault.As), while errors.As and
// errors.Is still find the driver's error.
type unreachableError struct{ err error }

func (e *unreachableError) Error() string   { return e.err.Error() }
func (e *unreachableError) Unwrap() []error { return []error{e.err, errReadUnreachable} }

// unreachable marks err when it means the server cannot be reached. It
// leaves driver.ErrBadConn alone: database/sql retries on a new
// connection for it, and a connection that cannot be made comes back
// here marked.
func unreachable(err error) error {
	if err == nil || errors.Is(err, driver.ErrBadConn) || (Postgres{}).Classify(err) != ClassUnavailable {
		return err
	}
	return &unreachableError{err}
}
