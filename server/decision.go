package server

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

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
	// injectedDelay is how long an injected fault stalled the request.
	injectedDelay time.Duration
	// records holds one entry per parsed event; outcome "" means the
	// request ended before that event was decided.
	records []DebugEvent
	// refused lists the events a storeValid format refused one by one
	// while the rest of the batch went on; always empty for allOrNothing
	// formats, which refuse the whole request instead.
	refused []refusal
}

// refusal is one event of a storeValid batch that a gate refused on its
// own: its position in the request, its wire bytes, the error code the
// whole request would have got under allOrNothing, and that error's
// details for this event (pointers into the request, as in the error).
type refusal struct {
	index   int
	raw     json.RawMessage
	code    string
	details []fault.Detail
}

// Event outcomes in the inspection feed.
const (
	outcomeAccepted    = "accepted"
	outcomeDuplicate   = "duplicate"
	outcomeQuarantined = "quarantined"
	outcomeDropped     = "dropped"
	outcomeRejected    = "rejected"
)

// mark records the fate of event i, once: the first gate to decide an
// event wins, so a request-wide refusal does not overwrite it.
func (d *decision) mark(i int, outcome, reason string, details []fault.Detail) {
	if d.records != nil && d.records[i].Outcome == "" {
		d.records[i].Outcome, d.records[i].Reason, d.records[i].Details = outcome, reason, details
	}
}

// logDecision writes the one log line of an intake request: no IP, no
// credential, no property or trait values.
func (s *Server) logDecision(d *decision, took time.Duration) {
	attrs := []any{"endpoint", d.endpoint, "site_id", d.site, "status", d.status, "reason", d.reason,
		"events", d.events, "accepted", d.answer.Accepted, "duplicates", d.answer.Duplicates,
		"quarantined", d.answer.Quarantined, "dropped", d.answer.Dropped, "duration_ms", float64(took.Microseconds()) / 1000}
	if d.answer.TraitsDropped > 0 {
		attrs = append(attrs, "traits_dropped", d.answer.TraitsDropped)
	}
	if len(d.details) > 0 {
		paths := make([]string, 0, len(d.details))
		for _, dt := range d.details {
			paths = append(paths, dt.Path)
		}
		attrs = append(attrs, "problems", paths)
	}
	if len(d.refused) > 0 {
		// The events a storeValid batch refused one by one: where, not what.
		paths := make([]string, 0, len(d.refused))
		for _, rf := range d.refused {
			for _, dt := range rf.details {
				paths = append(paths, dt.Path)
			}
		}
		attrs = append(attrs, "rejected", len(d.refused), "refused", paths)
	}
	if d.status >= 500 && d.reason != reasonInjected { // an injected failure is no server error
		s.log.Error("intake", attrs...)
		return
	}
	s.log.Info("intake", attrs...)
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

// traitsDroppedMessage is the inspection feed's detail of an identify
// whose traits names its user's profile did not take: how many, the first
// few (each cut to 64 bytes), and why.
func traitsDroppedMessage(names []string) string {
	const shown, nameMax = 5, 64
	quoted := make([]string, 0, shown)
	for _, n := range names[:min(len(names), shown)] {
		if len(n) > nameMax {
			cut := nameMax
			for cut > 0 && !utf8.RuneStart(n[cut]) {
				cut--
			}
			n = n[:cut] + "…"
		}
		quoted = append(quoted, strconv.Quote(n))
	}
	list := strings.Join(quoted, ", ")
	if more := len(names) - shown; more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	return fmt.Sprintf("the event is stored, but %d of its traits were not merged into the user's profile (%s): a profile holds at most %d traits and %d bytes; past that, its traits still change and go, new ones are not taken",
		len(names), list, storage.MaxProfileTraits, storage.MaxProfileBytes)
}
