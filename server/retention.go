package server

import (
	"context"
	"time"

	"github.com/tally-analytics/tally/storage"
)

// retentionCheckEvery is how often the server looks whether today's purge
// has run (docs/storage.md#retention): a cheap read, so a purge starts at most
// this long after midnight UTC, or after a start that missed one.
const retentionCheckEvery = 10 * time.Minute

// retentionLoop runs the daily purge until ctx ends: at once if today's has
// not run to its end (a server down at midnight, or stopped midway), then
// whenever the UTC day changes or a site's retention_days changed.
func (s *Server) retentionLoop(ctx context.Context) {
	t := time.NewTicker(retentionCheckEvery)
	defer t.Stop()
	for {
		due, err := s.db.PurgeDue(ctx)
		if err == nil && due {
			err = s.purge(ctx)
		}
		if err != nil && ctx.Err() == nil {
			s.log.Error("retention purge", "err", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.retentionKick:
			// A changed retention applies now rather than tomorrow.
			if err := s.purge(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("retention purge", "err", err.Error())
			}
		}
	}
}

// purge runs one purge of raw rows older than each site's retention, and
// forgets the inspection feed's decisions (dev mode) made before each
// purged site's cut. With several instances on PostgreSQL one of them
// purges at a time; the others skip the round
// (docs/postgresql.md#on-postgresql).
func (s *Server) purge(ctx context.Context) error {
	var res storage.PurgeResult
	_, err := s.db.Leader(ctx, "retention", func() error {
		var err error
		res, err = s.db.Purge(ctx, s.cfg.RetentionDays)
		return err
	})
	if s.feed != nil && len(res.Cuts) > 0 {
		s.feed.forget(func(e *DebugEvent) bool {
			cut, ok := res.Cuts[e.SiteID]
			return ok && e.Time < cut
		})
	}
	if err == nil && len(res.Cuts) > 0 {
		var rows int64
		for _, n := range res.Deleted {
			rows += n
		}
		s.log.Info("retention purge", "day", res.Day, "sites", len(res.Cuts), "rows_deleted", rows)
	}
	return err
}

// kickRetention has the purge loop run a purge soon, without waiting.
func (s *Server) kickRetention() {
	select {
	case s.retentionKick <- struct{}{}:
	default: // one is pending already
	}
}
