package storage

import "fmt"

// Engagement is what an engagement event of Plausible's trackers measures
// of the pageview it follows (docs/intake.md#engagement).
type Engagement struct {
	// ScrollDepth is the page's deepest scroll so far, in percent of its
	// height, 0 to 100.
	ScrollDepth int
	// EngagedMS is the milliseconds the page was visible and focused
	// since the last engagement event.
	EngagedMS int64
}

// engageSQL adds an engagement to the newest pageview of the same visitor,
// site and URL at or before it: the deepest scroll kept, the time summed.
// The lookup reads events_site_anon_ts. An engagement whose pageview is
// not found (gone, or never stored) changes nothing.
const engageSQL = `UPDATE events SET scroll_depth = CASE WHEN scroll_depth IS NULL OR scroll_depth < ? THEN ? ELSE scroll_depth END,
	engaged_ms = COALESCE(engaged_ms, 0) + ?
	WHERE seq = (SELECT seq FROM events WHERE site_id = ? AND anon_id = ? AND ts_ms <= ? AND type = 'pageview' AND url = ?
		ORDER BY ts_ms DESC LIMIT 1)`

// engage stores e's engagement on its pageview instead of storing e: an
// engagement is a measure of a pageview, not an event of the visit, so it
// adds to no count, visit, rollup or quota.
func (j *ingestRun) engage(e *IngestEvent) error {
	if e.URL == nil {
		return nil
	}
	g := e.Engagement
	if _, err := j.stmt(j.db.ingest.engage).Exec(g.ScrollDepth, g.ScrollDepth, g.EngagedMS, e.SiteID, e.AnonID, e.TS.UnixMilli(), *e.URL); err != nil {
		return fmt.Errorf("engagement: %w", err)
	}
	return nil
}
