// Package fault defines the one error type of the service: an error carrying
// a stable, machine-readable code (part of the API contract), a human
// message, and optional per-field details. Every package returns these for
// conditions a client can act on; anything else is an internal error.
package fault

import (
	"errors"
	"fmt"
)

// Stable error codes. They appear verbatim in the API's error envelope, so
// existing values must never change meaning.
const (
	Internal             = "internal"
	NotFound             = "not_found"
	Unauthorized         = "unauthorized"
	Forbidden            = "forbidden"
	MethodNotAllowed     = "method_not_allowed"
	InvalidJSON          = "invalid_json"
	InvalidName          = "invalid_name"
	InvalidSlug          = "invalid_slug"
	InvalidSiteID        = "invalid_site_id"
	InvalidLabel         = "invalid_label"
	InvalidScopes        = "invalid_scopes"
	InvalidLimit         = "invalid_limit"
	InvalidCursor        = "invalid_cursor"
	InvalidDateParam     = "invalid_date_param"
	InvalidDateRange     = "invalid_date_range"
	InvalidDimension     = "invalid_dimension"
	InvalidSubject       = "invalid_subject"
	InvalidEvent         = "invalid_event"
	SchemaValidation     = "schema_validation_failed"
	SlugImmutable        = "slug_immutable"
	SlugTaken            = "slug_taken"
	SiteIDTaken          = "site_id_taken"
	UserNotFound         = "user_not_found"
	PayloadTooLarge      = "payload_too_large"
	UnsupportedMedia     = "unsupported_media_type"
	RateLimited          = "rate_limited"
	QuotaExceeded        = "quota_exceeded"
	Unavailable          = "unavailable"
	CollectorRejected    = "collector_rejected"
	CollectorUnreachable = "collector_unreachable"
	InvalidSignature     = "invalid_signature"
	InvalidBody          = "invalid_body"
	InvalidPlan          = "invalid_plan"
	PlanNotConfigured    = "plan_not_configured"
	InvalidSourcemap     = "invalid_sourcemap"
	InvalidAdapter       = "invalid_adapter"
	ForwardFailed        = "forward_failed"
	// InvalidFilter is a decision-list filter that cannot be read.
	InvalidFilter = "invalid_filter"
	// InvalidWait is a min or wait parameter out of range.
	InvalidWait = "invalid_wait"
	// SourcemapQuotaExceeded: a site's stored sourcemaps would pass their
	// file or byte cap.
	SourcemapQuotaExceeded = "sourcemap_quota_exceeded"
	// InvalidSites: a key's site restriction is empty or names a site that
	// is not in the workspace.
	InvalidSites = "invalid_sites"
	// InvalidRetention: a site's retention_days is not null or a whole
	// number of days from 0 to 36500.
	InvalidRetention = "invalid_retention_days"
	// InvalidFault: a fault to inject (dev mode) is not one the server can
	// play.
	InvalidFault = "invalid_fault"
	// BadGateway and GatewayTimeout are what a proxy in front of the
	// service answers; only injected faults (dev mode) use them.
	BadGateway     = "bad_gateway"
	GatewayTimeout = "gateway_timeout"
	// BackupExists: the backup's file exists and force was not given.
	BackupExists = "backup_exists"
	// InvalidBackup: a backup request the server cannot carry out as
	// asked (no path, its own database file, another server's database).
	InvalidBackup = "invalid_backup"
	// UnsupportedBackend: a command for SQLite's file (backup, vacuum)
	// asked of a server that runs on PostgreSQL.
	UnsupportedBackend = "unsupported_backend"
	// InvalidFormat: an export's format is missing or not one it writes.
	InvalidFormat = "invalid_format"
	// InvalidTimeZone: a site's time_zone is not an IANA zone name.
	InvalidTimeZone = "invalid_time_zone"
	// InvalidQuery: a query API request that is malformed (a wrong type, an
	// unknown metric, a bad date), as Plausible's Stats API would refuse it.
	InvalidQuery = "invalid_query"
	// UnsupportedQuery: a query API request that Plausible's Stats API
	// accepts but Tally does not support (a goal, a segment), named in the
	// message.
	UnsupportedQuery = "unsupported_query"
	// InvalidGoal: a goal's body is malformed (a missing or bad name,
	// event_name, page_path or property), named in the message.
	InvalidGoal = "invalid_goal"
	// GoalNameTaken: the site has a goal of that name.
	GoalNameTaken = "goal_name_taken"
	// GoalLimitReached: the site has as many goals as a site may have.
	GoalLimitReached = "goal_limit_reached"
	// InvalidSegment: a saved segment's body is malformed (a missing or
	// bad name, type or segment_data, or filters the query API refuses),
	// named in the message.
	InvalidSegment = "invalid_segment"
	// SegmentLimitReached: the site has as many saved segments as a site
	// may have.
	SegmentLimitReached = "segment_limit_reached"
	// InvalidFunnel: a saved funnel's body is malformed (a missing or bad
	// name, fewer than 2 or more than 8 steps, a step naming no goal of
	// the site), named in the message and a detail's path.
	InvalidFunnel = "invalid_funnel"
	// FunnelNameTaken: the site has a saved funnel of that name.
	FunnelNameTaken = "funnel_name_taken"
	// FunnelLimitReached: the site has as many saved funnels as a site may
	// have.
	FunnelLimitReached = "funnel_limit_reached"
	// GoalInFunnel: deleting a goal that is a step of a saved funnel.
	GoalInFunnel = "goal_in_funnel"
	// InvalidAliases: a site's aliases are not a list of host names within
	// the bounds, named in the message.
	InvalidAliases = "invalid_aliases"
	// AliasTaken: another site answers to that name already.
	AliasTaken = "alias_taken"
	// InvalidImport: an import stream (POST /v1/sites/:siteId/imports) that
	// is not one, naming its line (docs/import.md).
	InvalidImport = "invalid_import"
	// ImportsBusy: as many uploads of exports as may be in flight (for the
	// site, its workspace, or the server) are in progress; try again later
	// (docs/import.md#plausible, Uploads).
	ImportsBusy = "imports_busy"
	// ReplayInProgress: another request, on this instance or another,
	// is replaying that DLQ entry (docs/intake.md#dead-letter-queue).
	ReplayInProgress = "replay_in_progress"
	// QueryTimeout: a read ran past its deadline (QUERY_TIMEOUT) and was
	// stopped, in the database too (docs/benchmarks.md#query-api, Deadlines).
	QueryTimeout = "query_timeout"

	// Accounts (docs/accounts.md). InvalidEmail: not an address;
	// EmailTaken: a user has it already (whatever its case);
	// InvalidPassword: too short or too long; InvalidRole: not owner,
	// admin or viewer; InvalidToken: a link's token that is unknown, used or
	// expired; TOTPRequired: the password was right and the account asks for
	// a TOTP code; InvalidTOTP: a TOTP code that does not match (or was used).
	InvalidEmail    = "invalid_email"
	EmailTaken      = "email_taken"
	InvalidPassword = "invalid_password"
	InvalidRole     = "invalid_role"
	InvalidToken    = "invalid_token"
	TOTPRequired    = "totp_required"
	InvalidTOTP     = "invalid_totp"
	// LastOwner: removing the workspace's only owner.
	LastOwner = "last_owner"

	// Shared links (docs/sharing.md). InvalidSharedLink: a link's label,
	// password or allowed_origins is malformed, named in details' path;
	// SharedLinkLimitReached: the site has as many live links as a site
	// may have; SharedLinkPassword: the link asks for its password (none
	// given yet, or a wrong one).
	InvalidSharedLink      = "invalid_shared_link"
	SharedLinkLimitReached = "shared_link_limit_reached"
	SharedLinkPassword     = "shared_link_password"

	// Mail (docs/email.md). InvalidAlert: a traffic alert's thresholds
	// out of bounds, named in the message; MailNotConfigured: mail asked
	// of a server without SMTP_HOST.
	InvalidAlert      = "invalid_alert"
	MailNotConfigured = "mail_not_configured"
)

// Detail is one structured problem inside a request, addressed by a JSON
// Pointer into the payload the client sent.
type Detail struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Error is an application error with a stable code.
type Error struct {
	Code    string
	Message string
	Details []Detail
	// RetryAfter, when positive, is the number of seconds a client should
	// wait before trying again (rate limits, full queues).
	RetryAfter int
}

// Error implements the error interface.
func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WithDetails returns an *Error with code, message and details.
func WithDetails(code, message string, details []Detail) *Error {
	return &Error{Code: code, Message: message, Details: details}
}

// Code returns the code of err if it is (or wraps) an *Error, Internal for
// any other non-nil error, and "" for nil.
func Code(err error) string {
	var e *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return e.Code
	default:
		return Internal
	}
}

// As returns the *Error inside err, or nil when err is not an application
// error (which callers then treat as internal).
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}
