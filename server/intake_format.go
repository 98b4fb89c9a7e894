package server

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/tally-analytics/tally/schema"
	"github.com/tally-analytics/tally/storage"
)

// intakeFormat is what one intake endpoint's wire format decides; the
// gates themselves (intake_steps.go) are the same for every format. A new
// format (another vendor's HTTP API or tracker) maps its messages into
// schema.Event in parse and sets the other fields; it copies no gate.
type intakeFormat struct {
	// endpoint labels the format's metrics and log lines; it must be one
	// of endpoints (metrics.go), whose series exist from start-up.
	endpoint string
	// credential authenticates the request: the site it may write to and
	// the credential recorded in events.credential.
	credential func(s *Server, r *http.Request) (*storage.Site, string, error)
	// parse turns a body into events, Index and Pointer set (the position
	// and JSON Pointer of each in the request); now is the receive time.
	// An error refuses the whole request. A storeValid format returns the
	// messages it could not turn into events as refusals instead, which
	// an allOrNothing format must not do (the pipeline would refuse the
	// request with their details).
	parse func(body []byte, now time.Time) ([]schema.Event, []refusal, error)
	// agentFrom says where each event's User-Agent comes from.
	agentFrom agentSource
	// locate says whether the client address is located (the proxy
	// headers always count, docs/intake.md#gates-in-order, enrichment).
	locate bool
	// batch is what a batch with some failing events comes to.
	batch batchPolicy

	// The fields below are for formats other than Tally's own; their zero
	// values are the native behaviour.

	// siteFromCredential: the messages name no site, they are the
	// credential's (the envelope step sets SiteID).
	siteFromCredential bool
	// bodyLimit caps the body (0: ingestBodyLimit); tooLarge is the fault
	// code of a body over it ("": payload_too_large, 413).
	bodyLimit int64
	tooLarge  string
	// redact drops a credential the body carries (Segment's writeKey)
	// before the body is parsed or kept anywhere (nil: none).
	redact func(body []byte) []byte
	// okStatus and okBody are the answer of a request the pipeline took
	// (zero: 202 with the counts).
	okStatus int
	okBody   func(d *decision) any
	// okWrite writes that answer itself, when it is not JSON (Plausible's
	// text "ok"); it wins over okBody.
	okWrite func(w http.ResponseWriter, d *decision)
	// dlqPayload is what the DLQ keeps of a quarantined event, which its
	// replay re-posts (nil: Raw).
	dlqPayload func(ev *schema.Event) json.RawMessage
	// cookieless rewrites Fields and Raw of an event privacy.Cookieless
	// made cookieless into the format's own field names (nil: Tally's).
	cookieless func(ev *schema.Event)
	// engagement is what an event measures of its pageview, when it is a
	// measure instead of an event (Plausible's engagement; nil: none).
	engagement func(ev *schema.Event) *storage.Engagement
}

// agentSource is where an event's visitor User-Agent comes from.
type agentSource int

const (
	// agentHeader: the request's User-Agent header (a browser's own).
	agentHeader agentSource = iota
	// agentField: the event's user_agent field, never the header, which
	// is the sending server's own.
	agentField
)

// batchPolicy is what a format does with a batch in which some events fail
// a per-event check: the envelope, the site match or, in reject mode, the
// tracking plan. Drops (bot, consent) and request-wide gates (rate limit,
// quota) behave the same under both.
type batchPolicy int

const (
	// allOrNothing refuses the whole request (400) for one failing event
	// and stores nothing (docs/intake.md).
	allOrNothing batchPolicy = iota
	// storeValid refuses each failing event on its own, recorded in
	// decision.refused, and takes the others on through the gates.
	storeValid
)

// The formats of today's two endpoints: one event or a batch of them
// (docs/intake.md), told apart by where the visitor's User-Agent comes
// from and whether the client address is the visitor's.
var (
	// browserEvents is POST /events.
	browserEvents = &intakeFormat{endpoint: endpointEvents, credential: (*Server).collectorCredential,
		parse: parseEnvelopes, agentFrom: agentHeader, locate: true, batch: allOrNothing}
	// serverEvents is POST /s2s/events: the address is the sending
	// server's, so only trusted proxy headers locate the visitor.
	serverEvents = &intakeFormat{endpoint: endpointS2S, credential: (*Server).collectorCredential,
		parse: parseEnvelopes, agentFrom: agentField, locate: false, batch: allOrNothing}
)

// parseEnvelopes is the parse of Tally's own format: schema.Parse, which
// refuses the whole body for one broken envelope.
func parseEnvelopes(body []byte, now time.Time) ([]schema.Event, []refusal, error) {
	events, err := schema.Parse(body, now)
	return events, nil, err
}

// agent is the User-Agent that describes ev's visitor; headerUA is the
// request's own header.
func (f *intakeFormat) agent(ev *schema.Event, headerUA string) string {
	if f.agentFrom == agentHeader {
		return headerUA
	}
	if ev.UserAgent != nil {
		return *ev.UserAgent
	}
	return ""
}
