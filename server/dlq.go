package server

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// listDLQ answers {events: [DLQ row], next_cursor}, newest first; limit
// 1-1000 (default 100), cursor an exclusive received_at.
//
// GET /sites/:siteId/dlq
func (s *Server) listDLQ(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	_, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	limit, cursor, err := pageParams(r, "cursor")
	if err != nil {
		return err
	}
	rows, next, err := s.db.DLQ(r.Context(), site.ID, limit, cursor)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, dlqPage{Events: rowsOf(rows, dlqRowOf), NextCursor: next})
	return nil
}

// replayDLQ re-POSTs a quarantined event's stored payload, verbatim, to the
// collector endpoint it first came to, so every gate runs again: /events
// with the User-Agent it came with, /s2s/events, where the payload's
// user_agent field is read (it need not be a valid header), or Segment's
// /v1/batch as a batch of one (a 200 there is the 202 of the others). 202 storing the
// event, or quarantining it again: the row is deleted unless requarantined
// (audit dlq.replay, same transaction) and the answer is 200 {id,
// replayed_at}. 202 dropping the event (bot, consent) or any other status:
// 502 collector_rejected naming the reason, row kept; a network error or
// timeout: 502 collector_unreachable, row kept. A replay of the entry
// under way in another request (on any instance) is 409
// replay_in_progress, and sends nothing.
//
// POST /sites/:siteId/dlq/:eventId/replay
func (s *Server) replayDLQ(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	entry, err := s.db.DLQEntry(r.Context(), site.ID, ps.ByName("eventId"))
	if err != nil {
		return err
	}
	release, err := s.db.ClaimReplay(r.Context(), site.ID, entry)
	if err != nil {
		return err
	}
	defer release()
	path, userAgent, payload, ok := pathEvents, entry.UserAgent, []byte(entry.Payload), http.StatusAccepted
	switch entry.Endpoint {
	case endpointS2S:
		path, userAgent = pathS2S, "tally-replay/1"
	case endpointSegment:
		// The stored message is the mapped one (its batch's context
		// merged in): a batch of one maps it the same way again.
		path, userAgent, ok = pathSegmentBatch, "tally-replay/1", http.StatusOK
		payload = append(append([]byte(`{"batch":[`), entry.Payload...), "]}"...)
	}
	res, err := s.forward(r.Context(), site.ID, path, payload, userAgent)
	if err != nil {
		s.log.Warn("dlq replay: collector unreachable", "site_id", site.ID, "err", err.Error())
		return fault.Errorf(fault.CollectorUnreachable, "the collector could not be reached; the event stays in the DLQ")
	}
	if res.status != ok {
		return fault.Errorf(fault.CollectorRejected, "the collector answered %s; the event stays in the DLQ", res.describe())
	}
	answer := res.answer
	if !res.stored() && answer.Quarantined == 0 {
		return fault.Errorf(fault.CollectorRejected, "the collector answered 202 but %s; the event stays in the DLQ", res.fate())
	}
	replayedAt := s.now()
	deleted, err := s.db.FinishReplay(r.Context(), p.actor(), site, entry, replayedAt, answer.Quarantined > 0)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, replayAnswer{ID: entry.ID, ReplayedAt: storage.FormatTime(replayedAt),
		Accepted: answer.Accepted, Duplicates: answer.Duplicates, Requarantined: !deleted})
	return nil
}
