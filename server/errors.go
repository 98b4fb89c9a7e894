package server

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/tally-analytics/tally/fault"
)

// statusOf maps each stable error code to its HTTP status. It is the one
// place where codes meet statuses; an unknown code is a 500.
var statusOf = map[string]int{
	fault.NotFound:             http.StatusNotFound,
	fault.UserNotFound:         http.StatusNotFound,
	fault.Unauthorized:         http.StatusUnauthorized,
	fault.Forbidden:            http.StatusForbidden,
	fault.MethodNotAllowed:     http.StatusMethodNotAllowed,
	fault.InvalidJSON:          http.StatusBadRequest,
	fault.InvalidName:          http.StatusBadRequest,
	fault.InvalidSlug:          http.StatusBadRequest,
	fault.InvalidSiteID:        http.StatusBadRequest,
	fault.InvalidLabel:         http.StatusBadRequest,
	fault.InvalidScopes:        http.StatusBadRequest,
	fault.InvalidSites:         http.StatusBadRequest,
	fault.InvalidRetention:     http.StatusBadRequest,
	fault.InvalidLimit:         http.StatusBadRequest,
	fault.InvalidCursor:        http.StatusBadRequest,
	fault.InvalidDateParam:     http.StatusBadRequest,
	fault.InvalidDateRange:     http.StatusBadRequest,
	fault.InvalidDimension:     http.StatusBadRequest,
	fault.InvalidSubject:       http.StatusBadRequest,
	fault.InvalidEvent:         http.StatusBadRequest,
	fault.SchemaValidation:     http.StatusBadRequest,
	fault.SlugImmutable:        http.StatusBadRequest,
	fault.InvalidSignature:     http.StatusBadRequest,
	fault.InvalidBody:          http.StatusBadRequest,
	fault.InvalidPlan:          http.StatusBadRequest,
	fault.InvalidSourcemap:     http.StatusBadRequest,
	fault.InvalidAdapter:       http.StatusBadRequest,
	fault.InvalidFilter:        http.StatusBadRequest,
	fault.InvalidWait:          http.StatusBadRequest,
	fault.InvalidFault:         http.StatusBadRequest,
	fault.PlanNotConfigured:    http.StatusConflict,
	fault.SlugTaken:            http.StatusConflict,
	fault.SiteIDTaken:          http.StatusConflict,
	fault.PayloadTooLarge:      http.StatusRequestEntityTooLarge,
	fault.UnsupportedMedia:     http.StatusUnsupportedMediaType,
	fault.RateLimited:          http.StatusTooManyRequests,
	fault.QuotaExceeded:        http.StatusTooManyRequests,
	fault.Unavailable:          http.StatusServiceUnavailable,
	fault.CollectorRejected:    http.StatusBadGateway,
	fault.CollectorUnreachable: http.StatusBadGateway,
	fault.BadGateway:           http.StatusBadGateway,
	fault.GatewayTimeout:       http.StatusGatewayTimeout,
	fault.Internal:             http.StatusInternalServerError,
	fault.ForwardFailed:        http.StatusInternalServerError,

	// A site's sourcemap storage is full: like a body too large, sending
	// the same again cannot succeed, so not 429.
	fault.SourcemapQuotaExceeded: http.StatusRequestEntityTooLarge,

	fault.BackupExists:  http.StatusConflict,
	fault.InvalidBackup: http.StatusBadRequest,

	fault.UnsupportedBackend: http.StatusBadRequest,
	fault.InvalidFormat:      http.StatusBadRequest,

	fault.InvalidTimeZone:  http.StatusBadRequest,
	fault.InvalidQuery:     http.StatusBadRequest,
	fault.UnsupportedQuery: http.StatusBadRequest,

	fault.InvalidGoal:      http.StatusBadRequest,
	fault.InvalidImport:    http.StatusBadRequest,
	fault.GoalNameTaken:    http.StatusConflict,
	fault.GoalLimitReached: http.StatusConflict,

	fault.InvalidSegment:      http.StatusBadRequest,
	fault.SegmentLimitReached: http.StatusConflict,
	fault.InvalidFunnel:       http.StatusBadRequest,
	fault.FunnelNameTaken:     http.StatusConflict,
	fault.FunnelLimitReached:  http.StatusConflict,
	fault.GoalInFunnel:        http.StatusConflict,

	fault.InvalidAliases: http.StatusBadRequest,
	fault.AliasTaken:     http.StatusConflict,

	fault.ReplayInProgress: http.StatusConflict,

	// Uploads in flight: another may be taken once one ends.
	fault.ImportsBusy: http.StatusTooManyRequests,
	// A read past its deadline: the server's limit, not the request's
	// shape, so not a 400; a narrower query or a quieter moment passes.
	fault.QueryTimeout: http.StatusServiceUnavailable,

	// Accounts (docs/accounts.md).
	fault.InvalidEmail:    http.StatusBadRequest,
	fault.EmailTaken:      http.StatusConflict,
	fault.InvalidPassword: http.StatusBadRequest,
	fault.InvalidRole:     http.StatusBadRequest,
	fault.InvalidToken:    http.StatusBadRequest,
	fault.TOTPRequired:    http.StatusUnauthorized,
	fault.InvalidTOTP:     http.StatusBadRequest,
	fault.LastOwner:       http.StatusConflict,

	// Shared links (docs/sharing.md).
	fault.InvalidSharedLink:      http.StatusBadRequest,
	fault.SharedLinkLimitReached: http.StatusConflict,
	fault.SharedLinkPassword:     http.StatusUnauthorized,

	// Mail (docs/email.md): no SMTP is the server's settings, not the
	// request's shape.
	fault.InvalidAlert:      http.StatusBadRequest,
	fault.MailNotConfigured: http.StatusServiceUnavailable,
}

// writeError writes err as the error envelope. Application errors show
// their code and message; anything else is logged once, with the route
// pattern that r matched (never the path, which can hold a user id), and
// shown as a generic internal error, so no internals leak to clients.
func writeError(log *slog.Logger, w http.ResponseWriter, r *http.Request, route string, err error) {
	e, status := faultOf(log, w, r, route, err)
	writeJSON(w, status, errorBody{Error: errorFields{Code: e.Code, Message: e.Message, Details: e.Details}})
}

// plausibleErrorBody is Plausible's error body: the message alone
// (docs/query-api.md#plausible-compatibility).
type plausibleErrorBody struct {
	Error string `json:"error"`
}

// writePlausibleError writes err as Plausible's routes do,
// {"error": "<message>"}, with the status and logging of writeError.
func writePlausibleError(log *slog.Logger, w http.ResponseWriter, r *http.Request, route string, err error) {
	e, status := faultOf(log, w, r, route, err)
	writeJSON(w, status, plausibleErrorBody{Error: e.Message})
}

// faultOf turns err into the application error shown to the client and
// its status, logging an internal one and setting Retry-After when due.
func faultOf(log *slog.Logger, w http.ResponseWriter, r *http.Request, route string, err error) (*fault.Error, int) {
	e := fault.As(err)
	var tooBig *http.MaxBytesError
	switch {
	case e != nil:
	case errors.As(err, &tooBig):
		e = fault.Errorf(fault.PayloadTooLarge, "request body is larger than %d bytes", tooBig.Limit)
	default:
		log.Error("internal error", "method", r.Method, "route", route, "err", err.Error())
		e = fault.Errorf(fault.Internal, "internal error")
	}
	status, ok := statusOf[e.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	return e, status
}

// writeJSON writes v as a JSON response with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the client may be gone; nothing useful to do
}
