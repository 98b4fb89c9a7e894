package server

import (
	"encoding/json"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// The bodies of the answers, by area. These types are the wire contract:
// field names, order, null versus absent (omitempty) are what clients
// read, and TestResponseShapes (testdata/shapes.golden) pins them. Storage
// rows never reach the wire themselves; each has a conversion below. The
// fields of bodies that began as JSON maps are in alphabetical order, the
// order the maps were encoded in.

// rowsOf converts a list of storage rows with f, keeping a nil list nil
// (null on the wire) and an empty one empty ([]).
func rowsOf[S, T any](in []S, f func(*S) T) []T {
	if in == nil {
		return nil
	}
	out := make([]T, len(in))
	for i := range in {
		out[i] = f(&in[i])
	}
	return out
}

// Health and errors.

// healthBody is the answer of GET /healthz (both listeners): Status is
// "ok" (200), "unavailable" or "draining" (503,
// docs/operations.md#behind-a-load-balancer).
type healthBody struct {
	Status string `json:"status"`
	// Reason says what fails when Status is "unavailable", and that the
	// server is stopping when it is "draining".
	Reason string `json:"reason,omitempty"`
}

// errorBody is the envelope of every error answer, on every route
// (docs/api.md).
type errorBody struct {
	Error errorFields `json:"error"`
}

// errorFields are an error's stable code, its message and, for request
// problems, the JSON Pointers at fault (fault.Detail, whose JSON form is
// also what the DLQ stores of a plan violation).
type errorFields struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details []fault.Detail `json:"details,omitempty"`
}

// Intake (docs/intake.md).

// intakeAnswer is the 202 body of the intake endpoints, POST /events and
// POST /s2s/events (collector).
type intakeAnswer struct {
	Accepted    int `json:"accepted"`
	Duplicates  int `json:"duplicates"`
	Quarantined int `json:"quarantined"`
	Dropped     int `json:"dropped"`
	// TraitsDropped counts the accepted identifies some of whose traits
	// the user's profile did not take, being at its caps
	// (docs/intake.md#profile-caps); absent when none.
	TraitsDropped int `json:"traits_dropped,omitempty"`
}

// segmentAnswer is the 200 of the Segment intake
// (docs/intake.md#segment-compatible-intake): Segment's {"success": true}, the
// counts of intakeAnswer, and the messages of a batch refused one by one.
type segmentAnswer struct {
	Success bool `json:"success"`
	intakeAnswer
	Rejected int `json:"rejected"`
}

// Tenancy (docs/api.md#tenancy-rules, docs/api.md#audit-log).

// workspaceBody is a workspace: the answer of POST /workspaces,
// GET and PATCH /workspaces/:slug, and an element of workspaceList.
type workspaceBody struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Slug      string `json:"slug"`
	CreatedAt string `json:"created_at"`
}

func workspaceOf(w *storage.Workspace) workspaceBody {
	return workspaceBody{ID: w.ID, Name: w.Name, Slug: w.Slug, CreatedAt: w.CreatedAt}
}

// workspaceList is the answer of GET /workspaces.
type workspaceList struct {
	Workspaces []workspaceBody `json:"workspaces"`
}

// siteBody is a site: the answer of POST /workspaces/:slug/sites and an
// element of siteList.
type siteBody struct {
	ID          string `json:"id"`
	WorkspaceID string `json:"workspace_id"`
	Name        string `json:"name"`
	CreatedAt   string `json:"created_at"`
	// RetentionDays is the site's own retention, null when it follows
	// RETENTION_DAYS (docs/storage.md#retention).
	RetentionDays *int `json:"retention_days"`
	// PurgedBefore is the first day whose raw rows are all kept, null while
	// no purge has removed any.
	PurgedBefore *string `json:"purged_before"`
	// TimeZone is the IANA zone of the query API's days (docs/query-api.md).
	TimeZone string `json:"time_zone"`
}

func siteOf(s *storage.Site) siteBody {
	return siteBody{ID: s.ID, WorkspaceID: s.WorkspaceID, Name: s.Name, CreatedAt: s.CreatedAt,
		RetentionDays: s.RetentionDays, PurgedBefore: purgedBefore(s), TimeZone: s.TimeZone}
}

// siteDetail is the answer of GET /v1/sites/:siteId and PATCH
// /sites/:siteId: the site with the names it answers to besides its id
// (docs/intake.md#plausible--and-umami-compatible-intake).
type siteDetail struct {
	siteBody
	// Aliases are the site's aliases, sorted; [] for none.
	Aliases []string `json:"aliases"`
}

func siteDetailOf(s *storage.Site, aliases []string) siteDetail {
	return siteDetail{siteBody: siteOf(s), Aliases: aliases}
}

// purgedBefore is the site's purged_before for an answer: null while no
// purge has removed raw rows.
func purgedBefore(s *storage.Site) *string {
	if s.PurgedBefore == "" {
		return nil
	}
	return &s.PurgedBefore
}

// siteList is the answer of GET /workspaces/:slug/sites.
type siteList struct {
	Sites []siteBody `json:"sites"`
}

// keyBody is an API key's metadata, never its plaintext: an element of
// keyList.
type keyBody struct {
	ID          string   `json:"id"`
	WorkspaceID string   `json:"workspace_id"`
	Label       string   `json:"label"`
	Scopes      []string `json:"scopes"`
	CreatedAt   string   `json:"created_at"`
	LastUsedAt  *string  `json:"last_used_at"`
	RevokedAt   *string  `json:"revoked_at"`
	// Sites is the key's site restriction, null for every site.
	Sites []string `json:"sites"`
}

func keyOf(k *storage.APIKey) keyBody {
	return keyBody{ID: k.ID, WorkspaceID: k.WorkspaceID, Label: k.Label, Scopes: k.Scopes,
		CreatedAt: k.CreatedAt, LastUsedAt: k.LastUsedAt, RevokedAt: k.RevokedAt, Sites: k.Sites}
}

// keyList is the answer of GET /workspaces/:slug/keys.
type keyList struct {
	Keys []keyBody `json:"keys"`
}

// createdKey is the answer of POST /workspaces/:slug/keys, the one
// response that carries a key's plaintext.
type createdKey struct {
	ID          string   `json:"id"`
	WorkspaceID string   `json:"workspace_id"`
	Label       string   `json:"label"`
	Scopes      []string `json:"scopes"`
	CreatedAt   string   `json:"created_at"`
	Plaintext   string   `json:"plaintext"`
	Warning     string   `json:"warning"`
	// Sites is the key's site restriction, null for every site.
	Sites []string `json:"sites"`
}

// auditEntryBody is one audit log entry; Metadata is the JSON object
// stored with it.
type auditEntryBody struct {
	ID          string          `json:"id"`
	WorkspaceID string          `json:"workspace_id"`
	ActorKind   string          `json:"actor_kind"`
	ActorID     *string         `json:"actor_id"`
	Action      string          `json:"action"`
	Target      *string         `json:"target"`
	Metadata    json.RawMessage `json:"metadata"`
	TS          string          `json:"ts"`
}

func auditEntryOf(e *storage.AuditEntry) auditEntryBody {
	return auditEntryBody{ID: e.ID, WorkspaceID: e.WorkspaceID, ActorKind: e.ActorKind, ActorID: e.ActorID,
		Action: e.Action, Target: e.Target, Metadata: e.Metadata, TS: e.TS}
}

// auditPage is the answer of GET /workspaces/:slug/audit: entries newest
// first, and the cursor of the next page (null on the last).
type auditPage struct {
	Entries    []auditEntryBody `json:"entries"`
	NextCursor *string          `json:"next_cursor"`
}

// Tracking plan (docs/intake.md#tracking-plan).

// planBody is the answer of POST /v1/plan/reload: the new plan's mode and
// the event types it names.
type planBody struct {
	Events []string `json:"events"`
	Mode   string   `json:"mode"`
}

// backupBody is the answer of POST /v1/backup
// (docs/storage.md#backup-and-restore).
type backupBody struct {
	Path       string `json:"path"`
	Bytes      int64  `json:"bytes"`
	Pages      int    `json:"pages"`
	Steps      int    `json:"steps"`
	Restarts   int    `json:"restarts"`
	DurationMS int64  `json:"duration_ms"`
}

// Dead-letter queue (docs/intake.md#dead-letter-queue).

// dlqRowBody is a quarantined event: its wire JSON and the plan's
// violations.
type dlqRowBody struct {
	ID         string          `json:"id"`
	SiteID     string          `json:"site_id"`
	Payload    json.RawMessage `json:"payload"`
	Error      json.RawMessage `json:"error"`
	ReceivedAt string          `json:"received_at"`
}

func dlqRowOf(r *storage.DLQRow) dlqRowBody {
	return dlqRowBody{ID: r.ID, SiteID: r.SiteID, Payload: r.Payload, Error: r.Error, ReceivedAt: r.ReceivedAt}
}

// dlqPage is the answer of GET /sites/:siteId/dlq: rows newest first, and
// the cursor of the next page (null on the last).
type dlqPage struct {
	Events     []dlqRowBody `json:"events"`
	NextCursor *string      `json:"next_cursor"`
}

// replayAnswer is the answer of POST /sites/:siteId/dlq/:eventId/replay.
// Accepted, Duplicates and Requarantined say whether the event is now
// stored, or back in the DLQ.
type replayAnswer struct {
	ID            string `json:"id"`
	ReplayedAt    string `json:"replayed_at"`
	Accepted      int    `json:"accepted"`
	Duplicates    int    `json:"duplicates"`
	Requarantined bool   `json:"requarantined"`
}

// Reads (docs/query-api.md#analytics-reads, docs/query-api.md#breakdown).

// dayCount is one day of a per-day series.
type dayCount struct {
	Date  string `json:"date"`
	Count int64  `json:"count"`
}

func dayCountOf(d *storage.DayCount) dayCount { return dayCount{Date: d.Date, Count: d.Count} }

// pageviewsBody is the answer of GET /sites/:siteId/pageviews: the total
// and every day of the range, zero-filled.
type pageviewsBody struct {
	ByDay []dayCount `json:"by_day"`
	Count int64      `json:"count"`
}

// nameCount is one event type and its count.
type nameCount struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
}

func nameCountOf(n *storage.NameCount) nameCount { return nameCount{Name: n.Name, Count: n.Count} }

// eventCountsBody is the answer of GET /sites/:siteId/events.
type eventCountsBody struct {
	ByName []nameCount `json:"by_name"`
}

// sessionsBody is the answer of GET /sites/:siteId/sessions.
type sessionsBody struct {
	Count        int64   `json:"count"`
	AvgDurationS float64 `json:"avg_duration_s"`
	AvgEvents    float64 `json:"avg_events"`
	BounceRate   float64 `json:"bounce_rate"`
}

func sessionsOf(s storage.SessionStats) sessionsBody {
	return sessionsBody{Count: s.Count, AvgDurationS: s.AvgDurationS, AvgEvents: s.AvgEvents, BounceRate: s.BounceRate}
}

// timelineEvent is an event as the timeline shows it: no raw payload and
// no user agent, which may carry personal data.
type timelineEvent struct {
	ID         string  `json:"id"`
	Type       string  `json:"type"`
	URL        *string `json:"url"`
	TS         string  `json:"ts"`
	AnonID     string  `json:"anon_id"`
	Referrer   *string `json:"referrer"`
	Country    *string `json:"country"`
	City       *string `json:"city"`
	Browser    *string `json:"browser"`
	OS         *string `json:"os"`
	DeviceType *string `json:"device_type"`
}

func timelineEventOf(e *storage.TimelineEvent) timelineEvent {
	return timelineEvent{ID: e.ID, Type: e.Type, URL: e.URL, TS: e.TS, AnonID: e.AnonID, Referrer: e.Referrer,
		Country: e.Country, City: e.City, Browser: e.Browser, OS: e.OS, DeviceType: e.DeviceType}
}

// timelineBody is the answer of GET /sites/:siteId/users/:userId/timeline:
// a page of the user's events, newest first, and the cursor of the next
// page (null on the last).
type timelineBody struct {
	Events     []timelineEvent `json:"events"`
	NextBefore *string         `json:"next_before"`
	// PurgedBefore is the first day whose events are all kept: the site's
	// retention may have removed those of earlier days
	// (docs/storage.md#retention). Null while none were removed.
	PurgedBefore *string `json:"purged_before"`
}

// breakdownRow is one value of a dimension (null when absent) and its
// pageviews.
type breakdownRow struct {
	Value *string `json:"value"`
	Count int64   `json:"count"`
}

func breakdownRowOf(r *storage.BreakdownRow) breakdownRow {
	return breakdownRow{Value: r.Value, Count: r.Count}
}

// breakdownBody is the answer of GET /v1/sites/:siteId/breakdown.
type breakdownBody struct {
	Dimension string         `json:"dimension"`
	Rows      []breakdownRow `json:"rows"`
}

// realtimeBody is the answer of GET /v1/sites/:siteId/realtime: the
// distinct visitors with an event received in the last five minutes.
type realtimeBody struct {
	Visitors int `json:"visitors"`
}

// propertyNamesBody is the answer of GET /v1/sites/:siteId/properties:
// the custom property names of the site's recent events, sorted.
type propertyNamesBody struct {
	Properties []string `json:"properties"`
	// Default is the name the dashboard shows when its view names none
	// ("" for none): the one whose partials the warm-up keeps.
	Default string `json:"default"`
}

// exportEvent is one line of the NDJSON event export
// (docs/query-api.md#export): an event in the timeline's shape, plus its user
// id, properties and receive time.
type exportEvent struct {
	timelineEvent
	UserID     *string         `json:"user_id"`
	Properties json.RawMessage `json:"properties"`
	ReceivedAt string          `json:"received_at"`
}

func exportEventOf(e *storage.ExportEvent) exportEvent {
	props := e.Properties
	if props == nil {
		props = json.RawMessage("null")
	}
	return exportEvent{
		timelineEvent: timelineEvent{ID: e.ID, Type: e.Type, URL: e.URL, TS: e.TS, AnonID: e.AnonID, Referrer: e.Referrer,
			Country: e.Country, City: e.City, Browser: e.Browser, OS: e.OS, DeviceType: e.DeviceType},
		UserID: e.UserID, Properties: props, ReceivedAt: e.ReceivedAt,
	}
}

// exportCSVHeader is the first record of the CSV event export: the fields
// of exportEvent, properties as JSON text, a null as an empty cell.
var exportCSVHeader = []string{"id", "type", "url", "ts", "anon_id", "referrer", "country", "city", "browser", "os",
	"device_type", "user_id", "properties", "received_at"}

// exportCSVRecord is e as a record under exportCSVHeader.
func exportCSVRecord(e *storage.ExportEvent) []string {
	s := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	return []string{e.ID, e.Type, s(e.URL), e.TS, e.AnonID, s(e.Referrer), s(e.Country), s(e.City), s(e.Browser), s(e.OS),
		s(e.DeviceType), s(e.UserID), string(e.Properties), e.ReceivedAt}
}

// Sourcemaps (docs/intake.md#sourcemaps).

// sourcemapAnswer is the answer of POST /sites/:siteId/sourcemaps.
type sourcemapAnswer struct {
	// Size is the decoded byte count.
	Size int `json:"size"`
}

// sourcemapDeletion is the answer of DELETE /v1/sites/:siteId/sourcemaps:
// what was freed.
type sourcemapDeletion struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
}

// Webhooks (docs/intake.md#webhooks).

// webhookAnswer is the answer of POST /webhooks/:adapter/:siteId: how many
// events were stored.
type webhookAnswer struct {
	OK        bool `json:"ok"`
	Forwarded int  `json:"forwarded"`
}

// webhookSecretBody is a webhook secret's metadata, never the secret: an
// element of webhookSecretList.
type webhookSecretBody struct {
	ID        int64   `json:"id"`
	SiteID    string  `json:"site_id"`
	Adapter   string  `json:"adapter"`
	CreatedAt string  `json:"created_at"`
	RevokedAt *string `json:"revoked_at"`
}

func webhookSecretOf(s *storage.WebhookSecret) webhookSecretBody {
	return webhookSecretBody{ID: s.ID, SiteID: s.SiteID, Adapter: s.Adapter, CreatedAt: s.CreatedAt, RevokedAt: s.RevokedAt}
}

// webhookSecretList is the answer of GET /v1/sites/:siteId/webhook-secrets.
type webhookSecretList struct {
	Secrets []webhookSecretBody `json:"secrets"`
}

// createdWebhookSecret is the answer of POST
// /v1/sites/:siteId/webhook-secrets, the one response that carries the
// secret. RevokedAt is always null: a new secret is active.
type createdWebhookSecret struct {
	Adapter   string  `json:"adapter"`
	CreatedAt string  `json:"created_at"`
	ID        int64   `json:"id"`
	RevokedAt *string `json:"revoked_at"`
	Secret    string  `json:"secret"`
	SiteID    string  `json:"site_id"`
	Warning   string  `json:"warning"`
}

// GDPR (docs/gdpr.md).

// subjectBody is the person of a GDPR request: exactly one id is set.
type subjectBody struct {
	AnonID string `json:"anon_id,omitempty"`
	UserID string `json:"user_id,omitempty"`
}

func subjectOf(s storage.Subject) subjectBody {
	return subjectBody{AnonID: s.AnonID, UserID: s.UserID}
}

// subjectCounts counts a subject's rows per table.
type subjectCounts struct {
	Events        int64 `json:"events"`
	Sessions      int64 `json:"sessions"`
	UserProfiles  int64 `json:"user_profiles"`
	IdentityLinks int64 `json:"identity_links"`
}

func subjectCountsOf(c storage.SubjectCounts) subjectCounts {
	return subjectCounts{Events: c.Events, Sessions: c.Sessions, UserProfiles: c.UserProfiles, IdentityLinks: c.IdentityLinks}
}

// exportCounts counts the rows of an export, the DLQ rows tagged with the
// subject included.
type exportCounts struct {
	subjectCounts
	DLQ int64 `json:"dlq"`
}

// storedRow is a table's row as stored, every column by its name (JSON
// columns as JSON), so that an export stays complete whatever columns
// later migrations add.
type storedRow map[string]any

func storedRowOf(r *map[string]any) storedRow { return *r }

// gdprExportBody is the answer of POST /sites/:siteId/gdpr/export: every
// row of the subject, complete (events with raw).
type gdprExportBody struct {
	SiteID        string       `json:"site_id"`
	Subject       subjectBody  `json:"subject"`
	Counts        exportCounts `json:"counts"`
	Events        []storedRow  `json:"events"`
	Sessions      []storedRow  `json:"sessions"`
	UserProfiles  []storedRow  `json:"user_profiles"`
	IdentityLinks []storedRow  `json:"identity_links"`
	DLQ           []storedRow  `json:"dlq"`
}

func gdprExportOf(siteID string, subj storage.Subject, x *storage.SubjectExport) gdprExportBody {
	return gdprExportBody{SiteID: siteID, Subject: subjectOf(subj),
		Counts: exportCounts{subjectCounts: subjectCountsOf(x.Counts.SubjectCounts), DLQ: x.Counts.DLQ},
		Events: rowsOf(x.Events, storedRowOf), Sessions: rowsOf(x.Sessions, storedRowOf),
		UserProfiles: rowsOf(x.UserProfiles, storedRowOf), IdentityLinks: rowsOf(x.IdentityLinks, storedRowOf),
		DLQ: rowsOf(x.DLQ, storedRowOf)}
}

// gdprDeleteBody is the answer of POST /sites/:siteId/gdpr/delete: the
// rows erased.
type gdprDeleteBody struct {
	SiteID  string        `json:"site_id"`
	Subject subjectBody   `json:"subject"`
	Counts  subjectCounts `json:"counts"`
}

// Dev mode (docs/testing.md#dev-mode).

// Enrichment is what the collector derived for a stored event.
type Enrichment struct {
	AnonID     string `json:"anon_id"` // as stored: the cookieless hash for consent-denied events
	Browser    string `json:"browser,omitempty"`
	OS         string `json:"os,omitempty"`
	DeviceType string `json:"device_type,omitempty"`
	Country    string `json:"country,omitempty"`
	City       string `json:"city,omitempty"`
	Cookieless bool   `json:"cookieless"`
}

// DebugEvent is one intake decision, an element of decisionsAnswer (and
// servertest's Decision): an event's fate, or a whole request refused
// before its events could be read.
type DebugEvent struct {
	Seq      int64  `json:"seq"`
	Time     string `json:"time"`
	Endpoint string `json:"endpoint"`
	SiteID   string `json:"site_id,omitempty"`
	Status   int    `json:"status"`
	// Outcome is accepted, duplicate, quarantined, dropped (a gate dropped
	// it; see Reason) or rejected (the request was refused: Reason is the
	// error code).
	Outcome    string          `json:"outcome"`
	Reason     string          `json:"reason,omitempty"`
	EventID    string          `json:"event_id,omitempty"`
	Type       string          `json:"type,omitempty"`
	AnonID     string          `json:"anon_id,omitempty"`
	Details    []fault.Detail  `json:"details,omitempty"`
	Enrichment *Enrichment     `json:"enrichment,omitempty"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	// Bot says the event's User-Agent looked like a bot's, whether or not
	// the bot filter (BOT_FILTER) dropped it.
	Bot bool `json:"bot,omitempty"`
	// InjectedDelayMS is how long an injected fault stalled the request
	// (docs/testing.md#retry-testing).
	InjectedDelayMS int64 `json:"injected_delay_ms,omitempty"`
}

// decisionsAnswer is the answer of GET /v1/debug/decisions, newest first.
type decisionsAnswer struct {
	Decisions []DebugEvent `json:"decisions"`
}

// debugSummary is the answer of GET /v1/debug/summary: decisions counted
// by outcome since the start or the last reset, as the feed records them.
type debugSummary struct {
	Total       int64 `json:"total"`
	Accepted    int64 `json:"accepted"`
	Duplicates  int64 `json:"duplicates"`
	Quarantined int64 `json:"quarantined"`
	Dropped     int64 `json:"dropped"`
	Rejected    int64 `json:"rejected"`
}

// faultsAnswer is the answer of GET, POST and DELETE /v1/debug/faults: the
// faults still pending.
type faultsAnswer struct {
	Faults []pendingFault `json:"faults"`
}

// pendingFault is one injected fault still to play; SiteID is absent for
// the one that applies to any site.
type pendingFault struct {
	SiteID     string `json:"site_id,omitempty"`
	Status     int    `json:"status,omitempty"`
	RetryAfter int    `json:"retry_after,omitempty"`
	DelayMS    int    `json:"delay_ms,omitempty"`
	Remaining  int    `json:"remaining"`
}

// throwAwaySite is the answer of POST /v1/debug/sites: the site made and
// the plaintexts of its keys, as dev mode's setup shows the seeded site's.
type throwAwaySite struct {
	Workspace string        `json:"workspace"`
	SiteID    string        `json:"site_id"`
	Keys      throwAwayKeys `json:"keys"`
}

// throwAwayKeys are the plaintexts of a throw-away site's keys.
type throwAwayKeys struct {
	Ingest string `json:"ingest"`
	Query  string `json:"query"`
}

// resetAnswer is the answer of POST /v1/debug/reset: the rows deleted, by
// table.
type resetAnswer struct {
	OK      bool             `json:"ok"`
	Deleted map[string]int64 `json:"deleted"`
}

// Segment's browser SDK settings (docs/intake.md#segment-compatible-intake).

// segmentSettingsBody is the answer of GET /v1/projects/:writeKey/settings:
// the part of Segment's CDN settings document that analytics-next reads
// to send to the collector.
type segmentSettingsBody struct {
	Integrations segmentSettingsIntegrations `json:"integrations"`
	Metrics      segmentSettingsMetrics      `json:"metrics"`
}

// segmentSettingsIntegrations holds the one destination the SDK loads.
type segmentSettingsIntegrations struct {
	SegmentIO segmentIOSettings `json:"Segment.io"`
}

// segmentIOSettings points the SDK's Segment.io destination at the
// collector: APIHost is host[:port]/v1, without the scheme.
type segmentIOSettings struct {
	APIKey   string `json:"apiKey"`
	APIHost  string `json:"apiHost"`
	Protocol string `json:"protocol"`
}

// segmentSettingsMetrics turns the SDK's own telemetry (posted to /v1/m)
// off: SampleRate is always 0.
type segmentSettingsMetrics struct {
	SampleRate float64 `json:"sampleRate"`
}

// queryAnswer is the answer of the query API (docs/query-api.md), in the
// shape of Plausible's Stats API v2.
type queryAnswer struct {
	Results []queryResult `json:"results"`
	Meta    queryMeta     `json:"meta"`
	Query   queryEcho     `json:"query"`
}

// queryResult is one group: its dimension values and its metrics, in the
// query's orders, and with include.comparisons its counterpart.
type queryResult struct {
	Dimensions []string `json:"dimensions"`
	// Metrics are numbers, revenue metrics objects (revenueValue), null
	// for none.
	Metrics    []any            `json:"metrics"`
	Comparison *queryComparison `json:"comparison,omitempty"`
}

// queryComparison is a result's counterpart in the comparison range; change
// is each metric's change (null where it has none).
type queryComparison struct {
	Dimensions []string   `json:"dimensions"`
	Metrics    []any      `json:"metrics"`
	Change     []*float64 `json:"change"`
}

// queryMeta holds what include asked for, and the warnings of metrics
// whose figures are estimates.
type queryMeta struct {
	TimeLabels     []string                      `json:"time_labels,omitempty"`
	TotalRows      *int                          `json:"total_rows,omitempty"`
	MetricWarnings map[string]queryMetricWarning `json:"metric_warnings,omitempty"`
	// RevenueCurrency is the currency of total_revenue and average_revenue
	// (docs/query-api.md#goals-and-funnels).
	RevenueCurrency string `json:"revenue_currency,omitempty"`
	// With include.imports (docs/query-api.md): whether imported days
	// are counted, Plausible's reason and warning when not, and the
	// imported days of the range, [first, last] per import.
	ImportsIncluded   *bool      `json:"imports_included,omitempty"`
	ImportsSkipReason string     `json:"imports_skip_reason,omitempty"`
	ImportsWarning    string     `json:"imports_warning,omitempty"`
	ImportedRanges    [][]string `json:"imported_ranges,omitempty"`
}

// queryMetricWarning is one entry of meta.metric_warnings (Plausible's
// field for a metric's caveat): a code and a message.
type queryMetricWarning struct {
	Code    string `json:"code"`
	Warning string `json:"warning"`
}

// queryEcho is the query as run, defaults filled in.
type queryEcho struct {
	SiteID     string          `json:"site_id"`
	Metrics    []string        `json:"metrics"`
	DateRange  []string        `json:"date_range"`
	Filters    []any           `json:"filters"`
	Dimensions []string        `json:"dimensions"`
	OrderBy    [][]string      `json:"order_by"`
	Include    queryInclude    `json:"include"`
	Pagination queryPagination `json:"pagination"`
}

// queryInclude is the include of queryEcho.
type queryInclude struct {
	TotalRows   bool              `json:"total_rows,omitempty"`
	TimeLabels  bool              `json:"time_labels,omitempty"`
	Comparisons *queryComparisons `json:"comparisons,omitempty"`
	Imports     bool              `json:"imports,omitempty"`
}

// queryComparisons is the comparison asked for and the range it compared
// with.
type queryComparisons struct {
	Mode      string   `json:"mode"`
	DateRange []string `json:"date_range"`
}

// queryPagination is the pagination of queryEcho.
type queryPagination struct {
	Limit  int `json:"limit"`
	Offset int `json:"offset"`
}

func queryAnswerOf(a *storage.QueryAnswer) queryAnswer {
	meta := queryMeta{TimeLabels: a.Meta.TimeLabels, TotalRows: a.Meta.TotalRows, RevenueCurrency: a.Meta.RevenueCurrency}
	if a.Meta.MetricWarnings != nil {
		meta.MetricWarnings = map[string]queryMetricWarning{}
		for m, w := range a.Meta.MetricWarnings {
			meta.MetricWarnings[m] = queryMetricWarning{Code: w.Code, Warning: w.Warning}
		}
	}
	if in := a.Meta.Imports; in != nil {
		meta.ImportsIncluded, meta.ImportsSkipReason, meta.ImportsWarning = &in.Included, in.SkipReason, in.Warning
		meta.ImportedRanges = rowsOf(in.Ranges, func(r *[2]string) []string { return r[:] })
	}
	results := make([]queryResult, len(a.Results))
	for i := range a.Results {
		results[i] = queryResultOf(&a.Results[i], a.Query.Metrics)
	}
	return queryAnswer{Results: results, Meta: meta, Query: queryEchoOf(&a.Query)}
}

func queryResultOf(r *storage.QueryResult, metrics []string) queryResult {
	res := queryResult{Dimensions: r.Dims, Metrics: queryMetrics(metrics, r.Metrics, r.Currency)}
	if c := r.Comparison; c != nil {
		res.Comparison = &queryComparison{Dimensions: c.Dims, Metrics: queryMetrics(metrics, c.Metrics, r.Currency), Change: c.Change}
	}
	return res
}

func queryEchoOf(e *storage.QueryEcho) queryEcho {
	order := make([][]string, len(e.OrderBy))
	for i, o := range e.OrderBy {
		order[i] = []string{o[0], o[1]}
	}
	echo := queryEcho{SiteID: e.SiteID, Metrics: e.Metrics, DateRange: e.DateRange, Filters: e.Filters,
		Dimensions: e.Dimensions, OrderBy: order,
		Include:    queryInclude{TotalRows: e.TotalRows, TimeLabels: e.TimeLabels, Imports: e.Imports},
		Pagination: queryPagination{Limit: e.Limit, Offset: e.Offset}}
	if c := e.Comparison; c != nil {
		echo.Include.Comparisons = &queryComparisons{Mode: c.Mode, DateRange: c.DateRange}
	}
	return echo
}

// goalBody is a goal: the answer of POST /v1/sites/:siteId/goals and an
// element of goalList. Exactly one of EventName and PagePath is set.
type goalBody struct {
	ID        int64             `json:"id"`
	SiteID    string            `json:"site_id"`
	Name      string            `json:"name"`
	EventName *string           `json:"event_name"`
	PagePath  *string           `json:"page_path"`
	Property  *goalPropertyBody `json:"property"`
	// Currency is a revenue goal's ISO 4217 code, null for another goal.
	Currency  *string `json:"currency"`
	CreatedAt string  `json:"created_at"`
}

// goalPropertyBody is a goal's custom property match.
type goalPropertyBody struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

func goalOf(g *storage.Goal) goalBody {
	b := goalBody{ID: g.ID, SiteID: g.SiteID, Name: g.Name, CreatedAt: g.CreatedAt}
	if g.EventName != "" {
		b.EventName = &g.EventName
	} else {
		b.PagePath = &g.PagePath
	}
	if g.PropName != "" {
		b.Property = &goalPropertyBody{Name: g.PropName, Value: g.PropValue}
	}
	if g.Currency != "" {
		b.Currency = &g.Currency
	}
	return b
}

// goalList is the answer of GET /v1/sites/:siteId/goals.
type goalList struct {
	Goals []goalBody `json:"goals"`
}

// segmentBody is a saved segment (docs/query-api.md#saved-segments): the
// answer of its POST, GET and PATCH, and an element of segmentList.
// segment_data is as stored, {"filters": [...], "labels": {...}}; the owner
// is the actor that created or last changed it (owner_id null for the admin
// token), as audit entries name actors.
type segmentBody struct {
	ID          int64           `json:"id"`
	SiteID      string          `json:"site_id"`
	Name        string          `json:"name"`
	Type        string          `json:"type"`
	SegmentData json.RawMessage `json:"segment_data"`
	OwnerKind   string          `json:"owner_kind"`
	OwnerID     *string         `json:"owner_id"`
	InsertedAt  string          `json:"inserted_at"`
	UpdatedAt   string          `json:"updated_at"`
}

// segmentOf is seg as the API answers it.
func segmentOf(seg *storage.Segment) segmentBody {
	b := segmentBody{ID: seg.ID, SiteID: seg.SiteID, Name: seg.Name, Type: seg.Type,
		SegmentData: json.RawMessage(seg.Data), OwnerKind: seg.Owner.Kind,
		InsertedAt: seg.InsertedAt, UpdatedAt: seg.UpdatedAt}
	if seg.Owner.ID != "" {
		b.OwnerID = &seg.Owner.ID
	}
	return b
}

// segmentList is the answer of GET /v1/sites/:siteId/segments.
type segmentList struct {
	Segments []segmentBody `json:"segments"`
}

// savedFunnelBody is a saved funnel (docs/query-api.md#saved-funnels): the
// answer of its POST and PATCH, and an element of savedFunnelList. Each step
// names its goal by id and by name (what POST /v1/sites/:siteId/funnel
// takes as a step).
type savedFunnelBody struct {
	ID        int64            `json:"id"`
	SiteID    string           `json:"site_id"`
	Name      string           `json:"name"`
	Steps     []funnelGoalBody `json:"steps"`
	CreatedAt string           `json:"created_at"`
	UpdatedAt string           `json:"updated_at"`
}

// funnelGoalBody is one step of a saved funnel.
type funnelGoalBody struct {
	GoalID int64  `json:"goal_id"`
	Name   string `json:"name"`
}

// savedFunnelOf is f as the API answers it.
func savedFunnelOf(f *storage.SavedFunnel) savedFunnelBody {
	b := savedFunnelBody{ID: f.ID, SiteID: f.SiteID, Name: f.Name, CreatedAt: f.CreatedAt, UpdatedAt: f.UpdatedAt,
		Steps: make([]funnelGoalBody, len(f.Steps))}
	for i, st := range f.Steps {
		b.Steps[i] = funnelGoalBody{GoalID: st.GoalID, Name: st.Name}
	}
	return b
}

// savedFunnelList is the answer of GET /v1/sites/:siteId/funnels.
type savedFunnelList struct {
	Funnels []savedFunnelBody `json:"funnels"`
}

// importBody is one import of a site's history (docs/import.md): its source,
// files, rows and days.
type importBody struct {
	ID        int64    `json:"id"`
	Source    string   `json:"source"`
	Files     []string `json:"files"`
	FirstDay  *string  `json:"first_day"`
	LastDay   *string  `json:"last_day"`
	Rows      int64    `json:"rows"`
	CreatedAt string   `json:"created_at"`
}

func importOf(i *storage.ImportInfo) importBody {
	b := importBody{ID: i.ID, Source: i.Source, Files: i.Files, Rows: i.Rows, CreatedAt: i.CreatedAt}
	if i.FirstDay != "" {
		b.FirstDay, b.LastDay = &i.FirstDay, &i.LastDay
	}
	return b
}

// importList is the answer of GET /v1/sites/:siteId/imports.
type importList struct {
	Imports []importBody `json:"imports"`
}

// funnelAnswer is the answer of POST /v1/sites/:siteId/funnel.
// PurgedRange is the part of the range whose raw events retention purged
// (its first and last second, as the query API shows a range), null when
// none: those days count no step.
type funnelAnswer struct {
	Steps       []funnelStep `json:"steps"`
	DateRange   []string     `json:"date_range"`
	PurgedRange []string     `json:"purged_range"`
}

// funnelStep is one step of a funnel answer.
type funnelStep struct {
	Goal           string  `json:"goal"`
	Visitors       int     `json:"visitors"`
	ConversionRate float64 `json:"conversion_rate"`
	Dropoff        int     `json:"dropoff"`
}

func funnelAnswerOf(a *storage.FunnelAnswer) funnelAnswer {
	return funnelAnswer{Steps: rowsOf(a.Steps, funnelStepOf), DateRange: a.DateRange, PurgedRange: a.PurgedRange}
}

func funnelStepOf(st *storage.FunnelStep) funnelStep {
	return funnelStep{Goal: st.Goal, Visitors: st.Visitors, ConversionRate: st.ConversionRate, Dropoff: st.Dropoff}
}

// importAnswer is the answer of POST /v1/sites/:siteId/imports: the
// source, the rows of the stream, how many were stored now and how many
// had been before, the rows its sender left out, and how long it took.
type importAnswer struct {
	Source     string `json:"source"`
	Rows       int64  `json:"rows"`
	Imported   int64  `json:"imported"`
	Duplicates int64  `json:"duplicates"`
	Skipped    int64  `json:"skipped"`
	DurationMS int64  `json:"duration_ms"`
}

// Accounts (docs/accounts.md).

// accountUser is a user as its own session and the member list show it.
type accountUser struct {
	ID          string `json:"id"`
	Email       string `json:"email"`
	TOTPEnabled bool   `json:"totp_enabled"`
	CreatedAt   string `json:"created_at"`
}

func accountUserOf(u *storage.User) accountUser {
	return accountUser{ID: u.ID, Email: u.Email, TOTPEnabled: u.TOTPEnabled, CreatedAt: u.CreatedAt}
}

// accountWorkspace is one of a signed-in user's workspaces: its role and
// the sites the dashboard offers.
type accountWorkspace struct {
	ID    string        `json:"id"`
	Slug  string        `json:"slug"`
	Name  string        `json:"name"`
	Role  string        `json:"role"`
	Sites []accountSite `json:"sites"`
}

// accountSite is a site of an accountWorkspace.
type accountSite struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// sessionInfo describes a session: in the list, and the current one.
type sessionInfo struct {
	ID         string `json:"id"`
	CreatedAt  string `json:"created_at"`
	LastSeenAt string `json:"last_seen_at"`
	ExpiresAt  string `json:"expires_at"`
	Current    bool   `json:"current"`
}

func sessionInfoOf(s *storage.UserSession, current string) sessionInfo {
	return sessionInfo{ID: s.ID, CreatedAt: s.CreatedAt, LastSeenAt: s.LastSeenAt, ExpiresAt: s.ExpiresAt, Current: s.ID == current}
}

// sessionAnswer is the answer of a sign-in and of GET /v1/auth/session:
// who is signed in, where, and the CSRF token its state-changing requests
// send in X-CSRF-Token.
type sessionAnswer struct {
	User       accountUser        `json:"user"`
	Workspaces []accountWorkspace `json:"workspaces"`
	Session    sessionInfo        `json:"session"`
	CSRFToken  string             `json:"csrf_token"`
}

// sessionList is the answer of GET /v1/auth/sessions.
type sessionList struct {
	Sessions []sessionInfo `json:"sessions"`
}

// totpEnrolment is the answer of POST /v1/auth/totp: the secret, shown
// this once, as text and as the otpauth:// URI an authenticator app reads.
type totpEnrolment struct {
	Secret string `json:"secret"`
	URI    string `json:"uri"`
}

// invitationInfo is an invitation in a list.
type invitationInfo struct {
	ID          string `json:"id"`
	WorkspaceID string `json:"workspace_id"`
	Email       string `json:"email"`
	Role        string `json:"role"`
	CreatedAt   string `json:"created_at"`
	ExpiresAt   string `json:"expires_at"`
}

func invitationInfoOf(inv *storage.Invitation) invitationInfo {
	return invitationInfo{ID: inv.ID, WorkspaceID: inv.WorkspaceID, Email: inv.Email, Role: inv.Role, CreatedAt: inv.CreatedAt, ExpiresAt: inv.ExpiresAt}
}

// createdInvitation is the answer of POST /v1/workspaces/:slug/invitations:
// the invitation and its link's token, shown this once.
type createdInvitation struct {
	invitationInfo
	Token string `json:"token"`
	// Path is the dashboard's page that accepts it, token included.
	Path string `json:"path"`
}

// invitationList is the answer of GET /v1/workspaces/:slug/invitations.
type invitationList struct {
	Invitations []invitationInfo `json:"invitations"`
}

// member is a user's role in a workspace.
type member struct {
	UserID    string `json:"user_id"`
	Email     string `json:"email"`
	Role      string `json:"role"`
	CreatedAt string `json:"created_at"`
}

func memberOf(m *storage.Membership) member {
	return member{UserID: m.UserID, Email: m.Email, Role: m.Role, CreatedAt: m.CreatedAt}
}

// memberList is the answer of GET /v1/workspaces/:slug/members.
type memberList struct {
	Members []member `json:"members"`
}

// createdUser is the answer of POST /v1/users (the admin token's, for
// `tally user add`): the user, its role, and, when no password was given,
// a set-password link's token.
type createdUser struct {
	accountUser
	Workspace string        `json:"workspace"`
	Role      string        `json:"role"`
	Link      *passwordLink `json:"password_link"`
}

// passwordLink is a single-use link that sets a password: its token, the
// dashboard's path that takes it, and its expiry.
type passwordLink struct {
	Token     string `json:"token"`
	Path      string `json:"path"`
	ExpiresAt string `json:"expires_at"`
}

// Shared links (docs/sharing.md).

// sharedLinkBody is a shared link as settings list it: never its token.
type sharedLinkBody struct {
	ID     string `json:"id"`
	SiteID string `json:"site_id"`
	Label  string `json:"label"`
	// Password says whether the link asks for one (never the password).
	Password       bool     `json:"password"`
	AllowedOrigins []string `json:"allowed_origins"`
	CreatedAt      string   `json:"created_at"`
	UpdatedAt      string   `json:"updated_at"`
}

func sharedLinkOf(l *storage.SharedLink) sharedLinkBody {
	return sharedLinkBody{ID: l.ID, SiteID: l.SiteID, Label: l.Label, Password: l.HasPassword,
		AllowedOrigins: l.AllowedOrigins, CreatedAt: l.CreatedAt, UpdatedAt: l.UpdatedAt}
}

// createdSharedLink is the answer of POST /v1/sites/:siteId/shared-links:
// the link and, this once, its token, its path and its URL on the query
// API's origin.
type createdSharedLink struct {
	sharedLinkBody
	Token string `json:"token"`
	Path  string `json:"path"`
	URL   string `json:"url"`
}

// sharedLinkList is the answer of GET /v1/sites/:siteId/shared-links.
type sharedLinkList struct {
	SharedLinks []sharedLinkBody `json:"shared_links"`
}

// sharedSite is what a shared link shows of its site: GET /v1/share's
// site, and GET /v1/sites/:siteId's answer to a link.
type sharedSite struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	TimeZone string `json:"time_zone"`
}

func sharedSiteOf(s *storage.Site) sharedSite {
	return sharedSite{ID: s.ID, Name: s.Name, TimeZone: s.TimeZone}
}

// shareAnswer is the answer of GET /v1/share: whether the link asks for a
// password and the browser gave it; the site once it may be read.
type shareAnswer struct {
	PasswordRequired bool        `json:"password_required"`
	Unlocked         bool        `json:"unlocked"`
	Site             *sharedSite `json:"site,omitempty"`
}

// Mail (docs/email.md).

// statusBody is an answer that only says what happened.
type statusBody struct {
	Status string `json:"status"`
}

// emailReportList is a site's report recipients; mail_configured says
// whether the server has SMTP settings (without them nothing is sent).
type emailReportList struct {
	Recipients     []emailReportBody `json:"recipients"`
	MailConfigured bool              `json:"mail_configured"`
}

// emailReportBody is one recipient's reports of a site.
type emailReportBody struct {
	Email     string `json:"email"`
	Weekly    bool   `json:"weekly"`
	Monthly   bool   `json:"monthly"`
	CreatedAt string `json:"created_at"`
}

// trafficAlertBody is a site's traffic alerts: a null threshold is a
// rule turned off.
type trafficAlertBody struct {
	Recipients     []string `json:"recipients"`
	SpikeVisitors  *int     `json:"spike_visitors"`
	DropPercent    *int     `json:"drop_percent"`
	UpdatedAt      *string  `json:"updated_at"`
	MailConfigured bool     `json:"mail_configured"`
}
