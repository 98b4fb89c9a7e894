package server

import (
	"context"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/schema"
	"github.com/tally-analytics/tally/storage"
)

// ingestBodyLimit caps an intake request body (docs/intake.md).
const ingestBodyLimit = 1 << 20

// ingest returns the handler of the intake endpoint of format f: it runs
// the intake pipeline, then counts, logs and records what it came to.
//
// POST /events, POST /s2s/events (collector)
func (s *Server) ingest(f *intakeFormat) handler {
	return func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
		start := time.Now()
		m := s.metrics.Load()
		p := &intakePipeline{s: s, f: f, m: m, w: w, r: r}
		d := &p.d
		d.endpoint, d.status = f.endpoint, http.StatusAccepted
		if f.okStatus != 0 {
			d.status = f.okStatus
		}
		err := p.run()
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
		m.received[f.endpoint].Add(d.events)
		m.ingest[f.endpoint].UpdateDuration(start)
		s.logDecision(d, time.Since(start))
		s.feed.record(d, s.now())
		if err != nil {
			return err
		}
		if reasons := d.dropReasons(); reasons != "" {
			w.Header().Set(dropReasonsHeader, reasons)
		}
		if f.okWrite != nil {
			f.okWrite(w, d)
			return nil
		}
		if f.okBody != nil {
			writeJSON(w, d.status, f.okBody(d))
			return nil
		}
		writeJSON(w, http.StatusAccepted, d.answer)
		return nil
	}
}

// intakePipeline is the state of one intake request as it passes the
// gates. Each step reads what the earlier ones left and records into d.
type intakePipeline struct {
	s *Server
	f *intakeFormat
	m *collectorMetrics
	w http.ResponseWriter
	r *http.Request

	site          *storage.Site
	credentialTag string    // events.credential: site, key:<id> or internal
	now           time.Time // the receive time
	parsed        bool      // the envelope step has run: kept holds what is left
	headerUA      string
	// kept are the events still on their way to storage, in request order.
	kept []schema.Event
	// quarantined are the DLQ rows of events that failed the tracking plan
	// in quarantine mode.
	quarantined []storage.Quarantined
	// replayed holds, by event index, the stored agent of DLQ replays of
	// events quarantined in their cookieless form.
	replayed map[int]storage.QuarantinedAgent
	// ctx outlives the client once the events are past the rate limit
	// (see the store step).
	ctx      context.Context
	rows     []storage.IngestEvent // kept, enriched: what the writer stores
	reserved int                   // events of quota reserved, released after the store step
	d        decision
}

// intakeStep is one gate of the pipeline, named as
// docs/intake.md#gates-in-order names it.
type intakeStep struct {
	gate string
	run  func(*intakePipeline) error
}

// intakeSteps are the gates in the order docs/intake.md documents; that
// order is behaviour (which error a request gets, what is counted where).
var intakeSteps = []intakeStep{
	{"credential", (*intakePipeline).credential},
	{"body size", (*intakePipeline).bodySize},
	{"injected fault", (*intakePipeline).injectedFault},
	{"envelope", (*intakePipeline).envelope},
	{"site match", (*intakePipeline).siteMatch},
	{"bot", (*intakePipeline).bot},
	{"consent, require mode", (*intakePipeline).consentRequire},
	{"rate limit", (*intakePipeline).rateLimit},
	{"consent, cookieless form", (*intakePipeline).consentCookieless},
	{"tracking plan", (*intakePipeline).trackingPlan},
	{"quota", (*intakePipeline).quota},
	{"enrichment", (*intakePipeline).enrichment},
	{"dedup and storage", (*intakePipeline).store},
}

// run takes the request through the steps in order. It stops at the first
// error, or with a 202 once the events are parsed and none is left to
// store (all dropped or refused); the step that left none set the reason.
func (p *intakePipeline) run() error {
	err := p.runSteps()
	if p.reserved > 0 {
		p.s.db.ReleaseQuota(p.site.ID, p.reserved)
	}
	return err
}

func (p *intakePipeline) runSteps() error {
	for i := range intakeSteps {
		if err := intakeSteps[i].run(p); err != nil {
			return err
		}
		if p.parsed && len(p.kept) == 0 && len(p.quarantined) == 0 {
			return nil
		}
	}
	return nil
}
