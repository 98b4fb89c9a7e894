package server

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/privacy"
	"github.com/tally-analytics/tally/schema"
	"github.com/tally-analytics/tally/storage"
)

// ingestBodyLimit caps an intake request body (CONTRACT 3).
const ingestBodyLimit = 1 << 20

// intakeAnswer is the 202 body of the intake endpoints.
type intakeAnswer struct {
	Accepted    int `json:"accepted"`
	Duplicates  int `json:"duplicates"`
	Quarantined int `json:"quarantined"`
	Dropped     int `json:"dropped"`
}

// decision is what one intake request came to; it is logged as one line
// and, in dev mode, recorded event by event in the inspection feed.
type decision struct {
	endpoint string
	site     string
	events   int
	answer   intakeAnswer
	reason   string // the gate that decided, or accepted / accepted_consent
	bots     int
	consent  int
	status   int
	details  []fault.Detail
	body     []byte
	// records holds one entry per parsed event; outcome "" means the
	// request ended before that event was decided.
	records []DebugEvent
}

// Event outcomes in the inspection feed.
const (
	outcomeAccepted    = "accepted"
	outcomeDuplicate   = "duplicate"
	outcomeQuarantined = "quarantined"
	outcomeDropped     = "dropped"
	outcomeRejected    = "rejected"
)

func (d *decision) mark(i int, outcome, reason string, details []fault.Detail) {
	if d.records != nil && d.records[i].Outcome == "" {
		d.records[i].Outcome, d.records[i].Reason, d.records[i].Details = outcome, reason, details
	}
}

// ingest returns the handler of one intake endpoint. The gates run in this
// order (README "Intake"): credential, body size, envelope, site match, bot,
// consent (require mode), rate limit, consent (cookieless form), tracking
// plan, quota, enrichment, then dedup and storage in the writer.
//
// POST /events, POST /s2s/events (collector)
func (s *Server) ingest(endpoint string) handler {
	return func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
		start := time.Now()
		m := s.metrics.Load()
		d := &decision{endpoint: endpoint, status: http.StatusAccepted}
		err := s.intake(w, r, m, d)
		if err != nil {
			if e := fault.As(err); e != nil {
				d.status = statusOf[e.Code]
				d.details = e.Details
				if d.reason == "" {
					d.reason = e.Code
				}
			} else {
				d.status = http.StatusInternalServerError
				d.reason = reasonInternal
			}
		}
		if d.events == 0 {
			d.events = 1 // a request that never got as far as events still counts once
		}
		m.received[endpoint].Add(d.events)
		m.ingest[endpoint].UpdateDuration(start)
		s.logDecision(d, time.Since(start))
		s.feed.record(d, s.now())
		if err != nil {
			return err
		}
		if reasons := d.dropReasons(); reasons != "" {
			w.Header().Set(dropReasonsHeader, reasons)
		}
		writeJSON(w, http.StatusAccepted, d.answer)
		return nil
	}
}

// dropReasonsHeader names, on a 202 that dropped events, the gates that
// dropped them, so a forwarder (DLQ replay, webhooks) can say why its event
// was not stored.
const dropReasonsHeader = "Tally-Drop-Reasons"

// dropReasons lists the gates that dropped events of a 202, comma-separated.
func (d *decision) dropReasons() string {
	var reasons []string
	if d.bots > 0 {
		reasons = append(reasons, reasonBot)
	}
	if d.answer.Dropped > d.bots {
		reasons = append(reasons, reasonConsentRequired)
	}
	return strings.Join(reasons, ", ")
}

func (s *Server) intake(w http.ResponseWriter, r *http.Request, m *collectorMetrics, d *decision) error {
	site, credential, err := s.collectorCredential(r)
	if err != nil {
		return err
	}
	d.site = site.ID
	body, err := readBody(w, r, ingestBodyLimit)
	if err != nil {
		if fault.Code(err) != fault.PayloadTooLarge {
			err = fault.Errorf(fault.InvalidEvent, "could not read the request body")
		}
		return err
	}
	d.body = body
	now := s.now()
	events, err := schema.Parse(body, now)
	if err != nil {
		return err
	}
	d.events = len(events)
	if s.feed != nil {
		d.records = make([]DebugEvent, len(events))
		for i, ev := range events {
			d.records[i] = DebugEvent{EventID: ev.ID, Type: ev.Type, AnonID: ev.AnonID, Payload: ev.Raw}
		}
	}
	var mismatch []fault.Detail
	for i := range events {
		if events[i].SiteID != site.ID {
			mismatch = append(mismatch, fault.Detail{Path: events[i].Pointer + "/site_id", Message: "site_id does not match the credential's site"})
		}
	}
	if len(mismatch) > 0 {
		return fault.WithDetails(fault.InvalidEvent, "the event's site_id does not match the credential's site", mismatch)
	}

	// Bot and consent-required drops: answered 202, counted, not stored.
	kept := events[:0:0]
	headerUA := r.UserAgent()
	for i := range events {
		ev := &events[i]
		if privacy.ParseAgent(agentOf(ev, headerUA, d.endpoint)).Bot {
			d.bots++
			d.mark(ev.Index, outcomeDropped, reasonBot, nil)
			continue
		}
		if s.cfg.ConsentMode == privacy.ConsentRequire && ev.Consent != schema.ConsentGranted {
			d.consent++
			d.mark(ev.Index, outcomeDropped, reasonConsentRequired, nil)
			continue
		}
		kept = append(kept, *ev)
	}
	m.drop(d.endpoint, reasonBot, d.bots)
	m.drop(d.endpoint, reasonConsentRequired, d.consent)
	d.answer.Dropped = d.bots + d.consent
	if len(kept) == 0 {
		d.reason = map[bool]string{true: reasonBot, false: reasonConsentRequired}[d.bots > 0]
		return nil
	}
	dropKept := func(reason string) {
		m.drop(d.endpoint, reason, len(kept))
		d.reason = reason
		for _, ev := range kept {
			d.mark(ev.Index, outcomeDropped, reason, nil)
		}
	}

	if ok, wait := s.limiter.take(site.ID, len(kept), now); !ok {
		dropKept(reasonRateLimit)
		return &fault.Error{Code: fault.RateLimited, Message: "too many events for this site, slow down", RetryAfter: wait}
	}

	// Consent-denied events take their cookieless form before the tracking
	// plan, so the plan judges, and the DLQ keeps, only what events would
	// hold. A DLQ replay of such an event is already rewritten: its anon_id
	// is not hashed again, and it keeps the browser, OS and device type of
	// the User-Agent it first came with, which the DLQ did not keep.
	ctx := context.WithoutCancel(r.Context())
	replayed, err := s.cookieless(ctx, kept, now)
	if err != nil {
		return err
	}

	var quarantined []storage.Quarantined
	if plan := s.plan.Load(); plan != nil {
		var rejected []fault.Detail
		valid := kept[:0:0]
		for i := range kept {
			ev := &kept[i]
			t0 := time.Now()
			problems := plan.Validate(ev)
			m.validation[d.endpoint].UpdateDuration(t0)
			switch {
			case problems == nil:
				valid = append(valid, *ev)
			case plan.Mode == schema.ModeReject:
				rejected = append(rejected, problems...)
				d.mark(ev.Index, outcomeDropped, reasonSchemaInvalid, problems)
			default:
				own := unprefixed(problems, ev.Pointer)
				d.mark(ev.Index, outcomeQuarantined, reasonSchemaInvalid, own)
				q := storage.Quarantined{ID: ev.ID, SiteID: ev.SiteID, Payload: ev.Raw,
					Errors: schema.MarshalDetails(own), AnonID: ev.AnonID, UserID: ev.UserID,
					Endpoint: d.endpoint, UserAgent: agentOf(ev, headerUA, d.endpoint)}
				if ev.Consent == schema.ConsentDenied {
					q.Cookieless, q.UserAgent = true, ""
					q.Agent = agentRow(ev, replayed, headerUA, d.endpoint)
				}
				quarantined = append(quarantined, q)
			}
		}
		if len(rejected) > 0 {
			dropKept(reasonSchemaInvalid)
			return fault.WithDetails(fault.SchemaValidation, "the event does not match the tracking plan", rejected)
		}
		kept = valid
	}

	if quota := s.cfg.Quota; quota > 0 && len(kept) > 0 {
		if !s.db.ReserveQuota(site.ID, len(kept), quota) {
			dropKept(reasonQuota)
			return &fault.Error{Code: fault.QuotaExceeded, Message: "this site has used its monthly event quota", RetryAfter: secondsToNextMonth(now)}
		}
		defer s.db.ReleaseQuota(site.ID, len(kept))
	}

	// Past the gates, the events are stored even if the client goes away:
	// the writer commits a queued job anyway, so waiting for it (never
	// long) keeps the metrics and the decision log true to what is stored,
	// and a retry of the request is deduplicated.
	batch := make([]storage.IngestEvent, 0, len(kept))
	loc := s.locator.Locate(r, d.endpoint == endpointEvents)
	for i := range kept {
		ev := &kept[i]
		row := s.enrich(ev, headerUA, d.endpoint, loc, credential)
		if a, ok := replayed[ev.Index]; ok {
			row.Browser, row.OS, row.DeviceType = a.Browser, a.OS, a.DeviceType
		}
		batch = append(batch, row)
	}

	res, err := s.db.Ingest(ctx, batch, quarantined, func(took time.Duration) {
		m.storage[d.endpoint].Update(took.Seconds())
	})
	if err == storage.ErrSiteGone {
		// Deleted between the credential check and the commit: the
		// answer a request for that site now gets.
		return fault.Errorf(fault.Unauthorized, "unknown site")
	}
	if err != nil {
		m.drop(d.endpoint, reasonInternal, len(batch)+len(quarantined))
		d.reason = reasonInternal
		for _, ev := range kept {
			d.mark(ev.Index, outcomeDropped, reasonInternal, nil)
		}
		return err
	}
	d.answer.Accepted = res.Accepted
	d.answer.Duplicates = len(batch) - res.Accepted
	d.answer.Quarantined = len(quarantined)
	m.accepted[d.endpoint].Add(res.Accepted)
	m.deduped[d.endpoint].Add(d.answer.Duplicates)
	m.quarantined[d.endpoint].Add(len(quarantined))
	storedDenied := 0
	for i := range batch {
		cookieless := kept[i].Consent == schema.ConsentDenied
		if res.Duplicate[i] {
			d.mark(kept[i].Index, outcomeDuplicate, "", nil)
			continue
		}
		reason := reasonAccepted
		if cookieless {
			storedDenied++
			reason = reasonAcceptedConsent
		}
		d.mark(kept[i].Index, outcomeAccepted, reason, nil)
		if d.records != nil {
			row := &batch[i]
			d.records[kept[i].Index].Enrichment = &Enrichment{AnonID: row.AnonID, Browser: row.Browser, OS: row.OS,
				DeviceType: row.DeviceType, Country: row.Country, City: row.City, Cookieless: cookieless}
		}
	}
	m.drop(d.endpoint, reasonAcceptedConsent, storedDenied)
	d.consent += storedDenied
	switch {
	case storedDenied > 0 && storedDenied == res.Accepted:
		d.reason = reasonAcceptedConsent
	default:
		d.reason = reasonAccepted
	}
	return nil
}

// cookieless rewrites the consent-denied events of kept into their
// cookieless form and returns, by event index, the stored agent of those
// that are DLQ replays of an event quarantined in that form (only their
// identifiers are stripped, which leaves them as they are).
func (s *Server) cookieless(ctx context.Context, kept []schema.Event, now time.Time) (map[int]storage.QuarantinedAgent, error) {
	var replayed map[int]storage.QuarantinedAgent
	var salt []byte
	for i := range kept {
		ev := &kept[i]
		if ev.Consent != schema.ConsentDenied {
			continue
		}
		// Only an anon id of the cookieless shape can be one: browsers'
		// events never pay for the lookup.
		if privacy.IsCookielessID(ev.AnonID) {
			a, ok, err := s.db.CookielessQuarantine(ctx, ev.SiteID, ev.ID, ev.AnonID)
			if err != nil {
				return nil, err
			}
			if ok {
				if replayed == nil {
					replayed = make(map[int]storage.QuarantinedAgent)
				}
				replayed[ev.Index] = a
				privacy.StripIdentifiers(ev)
				continue
			}
		}
		if salt == nil {
			var err error
			if salt, err = s.db.DailySalt(ctx, now); err != nil {
				return nil, err
			}
		}
		privacy.Cookieless(ev, salt)
	}
	return replayed, nil
}

// agentRow is what a cookieless DLQ row keeps of ev's User-Agent: the
// browser, OS and device type events would hold.
func agentRow(ev *schema.Event, replayed map[int]storage.QuarantinedAgent, headerUA, endpoint string) storage.QuarantinedAgent {
	if a, ok := replayed[ev.Index]; ok {
		return a
	}
	a := privacy.ParseAgent(agentOf(ev, headerUA, endpoint))
	return storage.QuarantinedAgent{Browser: a.Browser, OS: a.OS, DeviceType: a.DeviceType}
}

// enrich turns a validated event into a storage row: browser, OS and device
// type from the User-Agent (the header for /events, the user_agent field
// for /s2s/events), country and city from the request.
func (s *Server) enrich(ev *schema.Event, headerUA, endpoint string, loc privacy.Location, credential string) storage.IngestEvent {
	agent := privacy.ParseAgent(agentOf(ev, headerUA, endpoint))
	row := storage.IngestEvent{
		ID: ev.ID, SiteID: ev.SiteID, Type: ev.Type, AnonID: ev.AnonID,
		UserID: ev.UserID, URL: ev.URL, Referrer: ev.Referrer, TS: ev.TS, Raw: ev.Raw,
		Country: loc.Country, City: loc.City,
		Browser: agent.Browser, OS: agent.OS, DeviceType: agent.DeviceType,
		Credential: credential,
	}
	if ev.Type == "identify" {
		row.Traits = ev.Traits
	}
	return row
}

// agentOf is the User-Agent that describes ev's visitor: the request's
// header on /events, the event's user_agent field on /s2s/events (where the
// header is the sending server's own).
func agentOf(ev *schema.Event, headerUA, endpoint string) string {
	if endpoint != endpointS2S {
		return headerUA
	}
	if ev.UserAgent != nil {
		return *ev.UserAgent
	}
	return ""
}

// unprefixed rewrites details of one batch element so their pointers are
// relative to that event, as the DLQ row stores the event alone.
func unprefixed(details []fault.Detail, prefix string) []fault.Detail {
	out := make([]fault.Detail, len(details))
	for i, d := range details {
		d.Path = d.Path[len(prefix):]
		out[i] = d
	}
	return out
}

func secondsToNextMonth(now time.Time) int {
	now = now.UTC()
	next := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	return max(1, int(next.Sub(now).Seconds()))
}

// logDecision writes the one log line of an intake request: no IP, no
// credential, no property or trait values.
func (s *Server) logDecision(d *decision, took time.Duration) {
	attrs := []any{"endpoint", d.endpoint, "site_id", d.site, "status", d.status, "reason", d.reason,
		"events", d.events, "accepted", d.answer.Accepted, "duplicates", d.answer.Duplicates,
		"quarantined", d.answer.Quarantined, "dropped", d.answer.Dropped, "duration_ms", float64(took.Microseconds()) / 1000}
	if len(d.details) > 0 {
		paths := make([]string, 0, len(d.details))
		for _, dt := range d.details {
			paths = append(paths, dt.Path)
		}
		attrs = append(attrs, "problems", paths)
	}
	if d.status >= 500 {
		s.log.Error("intake", attrs...)
		return
	}
	s.log.Info("intake", attrs...)
}
