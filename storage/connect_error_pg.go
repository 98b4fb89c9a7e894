package storage

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// connectError is a failure to connect to PostgreSQL, or to read
// DATABASE_URL, in words that may be logged and printed: pgx's own
// message names the user (`user=... database=...`, and the server's
// `role "..." does not exist`), which README "Configuration" promises
// never to show. Unwrap keeps pgx's error, so the error classes
// (dialect_pg.go) still see it.
type connectError struct {
	msg string
	err error
}

func (e *connectError) Error() string { return e.msg }
func (e *connectError) Unwrap() error { return e.err }

// redactConnect turns pgx's connect and parse errors into connectErrors;
// any other error is returned as is.
func redactConnect(err error) error {
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
		return &connectError{msg: "connect to PostgreSQL: " + detail, err: err}
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
		return &connectError{msg: "connection settings: " + why, err: err}
	}
	return err
}
