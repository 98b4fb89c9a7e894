package server

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/privacy"
	"github.com/tally-analytics/tally/schema"
	"github.com/tally-analytics/tally/storage"
)

// The steps of the intake pipeline (intake.go), one per gate of
// docs/intake.md#gates-in-order, in that order.

// credential authenticates the request (401/403).
func (p *intakePipeline) credential() error {
	site, tag, err := p.f.credential(p.s, p.r)
	if err != nil {
		return err
	}
	p.site, p.credentialTag, p.d.site = site, tag, site.ID
	return nil
}

// bodySize reads the body, at most ingestBodyLimit bytes (413).
func (p *intakePipeline) bodySize() error {
	limit := int64(ingestBodyLimit)
	if p.f.bodyLimit > 0 {
		limit = p.f.bodyLimit
	}
	body, err := readBody(p.w, p.r, limit)
	if err != nil {
		switch {
		case fault.Code(err) != fault.PayloadTooLarge:
			err = fault.Errorf(fault.InvalidEvent, "could not read the request body")
		case p.f.tooLarge != "":
			err = fault.Errorf(p.f.tooLarge, "the request body is larger than %d bytes", limit)
		}
		return err
	}
	if p.f.redact != nil {
		body = p.f.redact(body)
	}
	// Bytes that are not UTF-8 become U+FFFD, one per byte, as the JSON
	// decoder reads them into every field anyway: the wire text kept is
	// then the text its fields came from, and the same on both backends
	// (PostgreSQL's text refuses such bytes; docs/postgresql.md#text-with-nul-and-invalid-utf-8).
	if !utf8.Valid(body) {
		body = []byte(storage.ValidUTF8(string(body)))
	}
	p.d.body = body
	return nil
}

// envelope turns the body into events by the format's parse (400
// invalid_event) and opens the inspection feed's record of each.
func (p *intakePipeline) envelope() error {
	p.now = p.s.now()
	events, refused, err := p.f.parse(p.d.body, p.now)
	if err != nil {
		return err
	}
	if p.f.siteFromCredential {
		for i := range events {
			events[i].SiteID = p.site.ID
		}
	}
	if len(refused) > 0 && p.f.batch == allOrNothing {
		var details []fault.Detail
		for _, rf := range refused {
			details = append(details, rf.details...)
		}
		return fault.WithDetails(fault.InvalidEvent, "the event envelope is invalid", details)
	}
	p.d.events = len(events) + len(refused)
	if p.s.feed != nil {
		p.d.records = make([]DebugEvent, p.d.events)
		for i := range events {
			ev := &events[i]
			p.d.records[ev.Index] = DebugEvent{EventID: ev.ID, Type: ev.Type, AnonID: ev.AnonID, Payload: ev.Raw}
		}
		for _, rf := range refused {
			p.d.records[rf.index] = DebugEvent{Payload: rf.raw}
		}
	}
	for _, rf := range refused {
		p.d.mark(rf.index, outcomeRejected, rf.code, rf.details)
	}
	p.d.refused = refused
	p.kept, p.parsed = events, true
	if len(events) == 0 {
		p.d.reason = fault.InvalidEvent
	}
	return nil
}

// siteMismatch is the message of an event whose site_id is not the
// credential's site.
const siteMismatch = "site_id does not match the credential's site"

// siteMatch checks that every event is of the credential's site (400
// invalid_event at /site_id).
func (p *intakePipeline) siteMatch() error {
	var mismatch []fault.Detail
	for i := range p.kept {
		if p.kept[i].SiteID != p.site.ID {
			mismatch = append(mismatch, fault.Detail{Path: p.kept[i].Pointer + "/site_id", Message: siteMismatch})
		}
	}
	if len(mismatch) == 0 {
		return nil
	}
	if p.f.batch == allOrNothing {
		return fault.WithDetails(fault.InvalidEvent, "the event's site_id does not match the credential's site", mismatch)
	}
	kept := p.kept[:0]
	for i := range p.kept {
		ev := &p.kept[i]
		if ev.SiteID != p.site.ID {
			p.refuse(ev, fault.InvalidEvent, mismatch[:1:1])
			mismatch = mismatch[1:]
			continue
		}
		kept = append(kept, *ev)
	}
	p.kept = kept
	if len(kept) == 0 {
		p.d.reason = fault.InvalidEvent
	}
	return nil
}

// refuse records that a storeValid gate refused ev on its own.
func (p *intakePipeline) refuse(ev *schema.Event, code string, details []fault.Detail) {
	p.d.refused = append(p.d.refused, refusal{index: ev.Index, raw: ev.Raw, code: code, details: details})
	p.d.mark(ev.Index, outcomeRejected, code, details)
}

// bot drops the events whose visitor User-Agent is a bot's: 202, counted,
// not stored. With BOT_FILTER=off they go on, and the feed marks them.
func (p *intakePipeline) bot() error {
	p.headerUA = p.r.UserAgent()
	filter := p.s.cfg.BotFilter == privacy.BotFilterOn
	kept := p.kept[:0]
	for i := range p.kept {
		ev := &p.kept[i]
		if !privacy.ParseAgent(p.f.agent(ev, p.headerUA)).Bot {
			kept = append(kept, *ev)
			continue
		}
		if p.d.records != nil {
			p.d.records[ev.Index].Bot = true
		}
		if !filter {
			kept = append(kept, *ev)
			continue
		}
		p.d.bots++
		p.d.mark(ev.Index, outcomeDropped, reasonBot, nil)
	}
	p.kept = kept
	p.m.drop(p.f.endpoint, reasonBot, p.d.bots)
	p.d.answer.Dropped = p.d.bots
	if len(kept) == 0 {
		p.d.reason = reasonBot
	}
	return nil
}

// consentRequire drops, with CONSENT_MODE=require, the events without
// consent "granted": 202, counted, not stored.
func (p *intakePipeline) consentRequire() error {
	if p.s.cfg.ConsentMode != privacy.ConsentRequire {
		return nil
	}
	kept := p.kept[:0]
	for i := range p.kept {
		ev := &p.kept[i]
		if ev.Consent != schema.ConsentGranted {
			p.d.consent++
			p.d.mark(ev.Index, outcomeDropped, reasonConsentRequired, nil)
			continue
		}
		kept = append(kept, *ev)
	}
	p.kept = kept
	p.m.drop(p.f.endpoint, reasonConsentRequired, p.d.consent)
	p.d.answer.Dropped = p.d.bots + p.d.consent
	if len(kept) == 0 {
		p.d.reason = reasonConsentRequired
		if p.d.bots > 0 {
			p.d.reason = reasonBot
		}
	}
	return nil
}

// rateLimit takes the request's events from the site's bucket (429
// rate_limited).
func (p *intakePipeline) rateLimit() error {
	if ok, wait := p.s.limiter.take(p.site.ID, len(p.kept), p.now); !ok {
		p.dropKept(reasonRateLimit)
		return &fault.Error{Code: fault.RateLimited, Message: "too many events for this site, slow down", RetryAfter: wait}
	}
	return nil
}

// dropKept ends the request at a request-wide gate: every kept event is
// counted and recorded as dropped there.
func (p *intakePipeline) dropKept(reason string) {
	p.m.drop(p.f.endpoint, reason, len(p.kept))
	p.d.reason = reason
	for i := range p.kept {
		p.d.mark(p.kept[i].Index, outcomeDropped, reason, nil)
	}
}

// consentCookieless rewrites the consent-denied events into their
// cookieless form, before the tracking plan, so the plan judges, and the
// DLQ keeps, only what events would hold. A DLQ replay of such an event is
// already rewritten: its anon_id is not hashed again, and it keeps the
// browser, OS and device type of the User-Agent it first came with, which
// the DLQ did not keep (replayed).
func (p *intakePipeline) consentCookieless() error {
	// From here on the events are stored even if the client goes away
	// (see store).
	p.ctx = context.WithoutCancel(p.r.Context())
	var salt []byte
	for i := range p.kept {
		ev := &p.kept[i]
		if ev.Consent != schema.ConsentDenied {
			continue
		}
		// Only an anon id of the cookieless shape can be one: browsers'
		// events never pay for the lookup.
		if privacy.IsCookielessID(ev.AnonID) {
			a, ok, err := p.s.db.CookielessQuarantine(p.ctx, ev.SiteID, ev.ID, ev.AnonID)
			if err != nil {
				return err
			}
			if ok {
				if p.replayed == nil {
					p.replayed = make(map[int]storage.QuarantinedAgent)
				}
				p.replayed[ev.Index] = a
				privacy.StripIdentifiers(ev)
				if p.f.cookieless != nil {
					p.f.cookieless(ev)
				}
				continue
			}
		}
		if salt == nil {
			var err error
			if salt, err = p.s.db.DailySalt(p.ctx, p.now); err != nil {
				return err
			}
		}
		privacy.Cookieless(ev, salt, p.visitor(ev))
		if p.f.cookieless != nil {
			p.f.cookieless(ev)
		}
	}
	return nil
}

// visitor is what ev's cookieless id is made of (docs/intake.md#gates-in-order,
// gate 5): the visitor's address and User-Agent where the collector knows the
// address, else nothing, and the id comes from ev's anon_id. The address
// is a message's own (Segment's context.ip), else the request's where the
// format locates by it: a browser's on /events; on Segment's intake only
// for a message that describes its browser (context.userAgent, which the
// browser SDK sends from the visitor's browser), since a server SDK's
// request address is its server's, which would make all its visitors one.
// On /s2s/events the address is always the sending server's.
func (p *intakePipeline) visitor(ev *schema.Event) privacy.Visitor {
	ua := p.f.agent(ev, p.headerUA)
	if a, err := netip.ParseAddr(strings.TrimSpace(ev.ClientIP)); err == nil {
		return privacy.Visitor{Addr: a, UserAgent: ua}
	}
	if !p.f.locate || (p.f.agentFrom == agentField && ev.UserAgent == nil) {
		return privacy.Visitor{}
	}
	a, ok := p.s.locator.ClientAddr(p.r)
	if !ok {
		return privacy.Visitor{}
	}
	return privacy.Visitor{Addr: a, UserAgent: ua}
}

// trackingPlan validates the events against the loaded plan, if any:
// reject mode refuses them (400 schema_validation_failed, per the batch
// policy), quarantine mode moves them into DLQ rows (202, quarantined).
func (p *intakePipeline) trackingPlan() error {
	plan := p.s.plan.Load()
	if plan == nil {
		return nil
	}
	var rejected []fault.Detail
	refused := 0
	valid := p.kept[:0:0]
	for i := range p.kept {
		ev := &p.kept[i]
		if p.f.engagement != nil && p.f.engagement(ev) != nil {
			// A measure of a pageview, not an event the plan describes
			// (docs/intake.md#engagement).
			valid = append(valid, *ev)
			continue
		}
		t0 := time.Now()
		problems := plan.Validate(ev)
		p.m.validation[p.f.endpoint].UpdateDuration(t0)
		switch {
		case problems == nil:
			valid = append(valid, *ev)
		case plan.Mode == schema.ModeReject && p.f.batch == storeValid:
			refused++
			p.refuse(ev, fault.SchemaValidation, problems)
		case plan.Mode == schema.ModeReject:
			rejected = append(rejected, problems...)
			p.d.mark(ev.Index, outcomeDropped, reasonSchemaInvalid, problems)
		default:
			p.quarantine(ev, unprefixed(problems, ev.Pointer))
		}
	}
	if len(rejected) > 0 {
		p.dropKept(reasonSchemaInvalid)
		return fault.WithDetails(fault.SchemaValidation, "the event does not match the tracking plan", rejected)
	}
	p.m.drop(p.f.endpoint, reasonSchemaInvalid, refused)
	p.kept = valid
	if len(valid) == 0 && len(p.quarantined) == 0 {
		p.d.reason = reasonSchemaInvalid
	}
	return nil
}

// quarantine makes ev a DLQ row with its own problems.
func (p *intakePipeline) quarantine(ev *schema.Event, own []fault.Detail) {
	p.d.mark(ev.Index, outcomeQuarantined, reasonSchemaInvalid, own)
	agent := p.f.agent(ev, p.headerUA)
	payload := ev.Raw
	if p.f.dlqPayload != nil {
		payload = p.f.dlqPayload(ev)
	}
	q := storage.Quarantined{ID: ev.ID, SiteID: ev.SiteID, Payload: payload,
		Errors: schema.MarshalDetails(own), AnonID: ev.AnonID, UserID: ev.UserID,
		Endpoint: p.f.endpoint, UserAgent: agent}
	if ev.Consent == schema.ConsentDenied {
		// A cookieless row keeps the browser, OS and device type events
		// would hold, not the User-Agent itself.
		q.Cookieless, q.UserAgent = true, ""
		if a, ok := p.replayed[ev.Index]; ok {
			q.Agent = a
		} else {
			a := privacy.ParseAgent(agent)
			q.Agent = storage.QuarantinedAgent{Browser: a.Browser, OS: a.OS, DeviceType: a.DeviceType}
		}
	}
	p.quarantined = append(p.quarantined, q)
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

// quota reserves the kept events of the site's monthly quota (429
// quota_exceeded); run releases the reservation after the store step.
func (p *intakePipeline) quota() error {
	quota := p.s.cfg.Quota
	if quota <= 0 || len(p.kept) == 0 {
		return nil
	}
	ok, err := p.s.db.ReserveQuota(p.ctx, p.site.ID, len(p.kept), quota)
	if err != nil {
		return err
	}
	if !ok {
		p.dropKept(reasonQuota)
		return &fault.Error{Code: fault.QuotaExceeded, Message: "this site has used its monthly event quota", RetryAfter: secondsToNextMonth(p.now)}
	}
	p.reserved = len(p.kept)
	return nil
}

// secondsToNextMonth is the Retry-After of quota_exceeded.
func secondsToNextMonth(now time.Time) int {
	now = now.UTC()
	next := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	return max(1, int(next.Sub(now).Seconds()))
}

// enrichment turns the kept events into storage rows: browser, OS and
// device type from the visitor's User-Agent, country and city from the
// request (its address only where the format locates it).
func (p *intakePipeline) enrichment() error {
	p.rows = make([]storage.IngestEvent, 0, len(p.kept))
	loc := p.s.locator.Locate(p.r, p.f.locate)
	for i := range p.kept {
		ev := &p.kept[i]
		at := loc
		if ev.ClientIP != "" {
			at = p.s.locator.LocateAddr(p.r, ev.ClientIP)
		}
		row := enrich(ev, p.f.agent(ev, p.headerUA), at, p.credentialTag)
		if p.f.engagement != nil {
			row.Engagement = p.f.engagement(ev)
		}
		if a, ok := p.replayed[ev.Index]; ok {
			row.Browser, row.OS, row.DeviceType = a.Browser, a.OS, a.DeviceType
		}
		p.rows = append(p.rows, row)
	}
	return nil
}

// maxJob is the most events (and DLQ rows) one writer job holds: a
// native request's largest batch, so a longer Segment batch holds the
// writer no longer at a time than a native one
// (docs/intake.md#segment-compatible-intake). A job also merges
// identifies into at most storage.MaxJobProfiles profiles
// (storage.JobLength).
const maxJob = schema.MaxBatch

// ingestJobs has the writer store the rows, then the DLQ rows, in jobs of
// at most maxJob, one after the other. committed is how many of the rows
// the jobs that succeeded stored (or found duplicates); res covers those.
func (p *intakePipeline) ingestJobs() (res storage.IngestResult, committed int, err error) {
	stats := func(took time.Duration) { p.m.storage[p.f.endpoint].Update(took.Seconds()) }
	if len(p.rows)+len(p.quarantined) <= maxJob && storage.JobLength(p.rows, maxJob) == len(p.rows) {
		res, err = p.s.db.Ingest(p.ctx, p.rows, p.quarantined, stats)
		if err == nil {
			committed = len(p.rows)
		}
		return res, committed, err
	}
	res.Duplicate = make([]bool, 0, len(p.rows))
	for committed < len(p.rows) {
		chunk := p.rows[committed:]
		chunk = chunk[:storage.JobLength(chunk, maxJob)]
		r, err := p.s.db.Ingest(p.ctx, chunk, nil, stats)
		if err != nil {
			return res, committed, err
		}
		res.Accepted += r.Accepted
		res.Duplicate = append(res.Duplicate, r.Duplicate...)
		res.TraitsDropped = append(res.TraitsDropped, r.TraitsDropped...)
		committed += len(chunk)
	}
	for start := 0; start < len(p.quarantined); start += maxJob {
		if _, err := p.s.db.Ingest(p.ctx, nil, p.quarantined[start:min(start+maxJob, len(p.quarantined))], stats); err != nil {
			return res, committed, err
		}
	}
	return res, committed, nil
}

// enrich turns a validated event into a storage row; ua is its visitor's
// User-Agent.
func enrich(ev *schema.Event, ua string, loc privacy.Location, credential string) storage.IngestEvent {
	agent := privacy.ParseAgent(ua)
	row := storage.IngestEvent{
		ID: ev.ID, SiteID: ev.SiteID, Type: ev.Type, AnonID: ev.AnonID,
		UserID: ev.UserID, URL: ev.URL, Referrer: ev.Referrer, TS: ev.TS, Raw: ev.Raw,
		Country: loc.Country, City: loc.City, Region: loc.Region, CityID: loc.CityID,
		Browser: agent.Browser, OS: agent.OS, DeviceType: agent.DeviceType,
		Credential: credential, Campaign: storage.ParseCampaign(ev.Campaign),
	}
	if ev.Type == "identify" {
		row.Traits = ev.Traits
	}
	return row
}

// store has the writer deduplicate and store the rows and DLQ rows, then
// records each event's fate. Past the gates, the events are stored even if
// the client goes away: the writer commits a queued job anyway, so waiting
// for it (never long) keeps the metrics and the decision log true to what
// is stored, and a retry of the request is deduplicated.
func (p *intakePipeline) store() error {
	m, d, endpoint := p.m, &p.d, p.f.endpoint
	res, committed, err := p.ingestJobs()
	if errors.Is(err, storage.ErrSiteGone) {
		// Deleted between the credential check and the commit: the
		// answer a request for that site now gets.
		return fault.Errorf(fault.Unauthorized, "unknown site")
	}
	if err != nil {
		// The jobs before the failing one are stored: they count as
		// such, and a retry of the request finds them duplicates.
		m.drop(endpoint, reasonInternal, len(p.rows)-committed+len(p.quarantined))
		m.accepted[endpoint].Add(res.Accepted)
		m.deduped[endpoint].Add(committed - res.Accepted)
		d.answer.Accepted, d.answer.Duplicates = res.Accepted, committed-res.Accepted
		for i := range committed {
			if res.Duplicate[i] {
				d.mark(p.kept[i].Index, outcomeDuplicate, "", nil)
			} else {
				d.mark(p.kept[i].Index, outcomeAccepted, reasonAccepted, nil)
			}
		}
		d.reason = reasonInternal
		for i := range p.kept {
			d.mark(p.kept[i].Index, outcomeDropped, reasonInternal, nil)
		}
		return err
	}
	d.answer.Accepted = res.Accepted
	d.answer.Duplicates = len(p.rows) - res.Accepted
	d.answer.Quarantined = len(p.quarantined)
	m.accepted[endpoint].Add(res.Accepted)
	m.deduped[endpoint].Add(d.answer.Duplicates)
	m.quarantined[endpoint].Add(len(p.quarantined))
	storedDenied := 0
	for i := range p.rows {
		ev := &p.kept[i]
		cookieless := ev.Consent == schema.ConsentDenied
		if res.Duplicate[i] {
			d.mark(ev.Index, outcomeDuplicate, "", nil)
			continue
		}
		reason := reasonAccepted
		if cookieless {
			storedDenied++
			reason = reasonAcceptedConsent
		}
		var details []fault.Detail
		if names := res.TraitsDropped[i]; names != nil {
			d.answer.TraitsDropped++
			details = []fault.Detail{{Path: ev.Pointer + "/traits", Message: traitsDroppedMessage(names)}}
		}
		d.mark(ev.Index, outcomeAccepted, reason, details)
		if d.records != nil {
			row := &p.rows[i]
			d.records[ev.Index].Enrichment = &Enrichment{AnonID: row.AnonID, Browser: row.Browser, OS: row.OS,
				DeviceType: row.DeviceType, Country: row.Country, City: row.City, Cookieless: cookieless}
		}
	}
	m.drop(endpoint, reasonAcceptedConsent, storedDenied)
	d.consent += storedDenied
	d.reason = reasonAccepted
	if storedDenied > 0 && storedDenied == res.Accepted {
		d.reason = reasonAcceptedConsent
	}
	return nil
}
