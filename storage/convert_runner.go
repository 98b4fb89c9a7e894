package storage

import (
	"context"
	"log/slog"
)

// A conversion rewrites rows stored before a migration into the form the
// migration introduced, in the background after start, a chunk per writer
// job of a few milliseconds, so that intake goes on meanwhile. Each job
// records how far it got in the conversion's own table (raw_conversion,
// visit_backfill), whose row is deleted at the end, so a restart resumes
// where the last committed job stopped. Readers and the writer accept both
// forms of a row throughout.
type conversion struct {
	// name is what the log calls it: "raw conversion".
	name string
	// done is the log line at its end, with the rows converted (under unit).
	done, unit string
	// chunk is the rows a step reads; below 0 the conversion does not run
	// (tests run its steps themselves).
	chunk int
	// step converts the next chunk: how many rows it rewrote, and whether
	// nothing remains.
	step func(ctx context.Context, chunk int) (converted int64, done bool, err error)
}

// startConversions runs the conversions one after the other in one
// background goroutine, until each is done or the database is closed. A
// failure is logged and ends that conversion; the next start resumes it.
func (db *DB) startConversions(log *slog.Logger, list ...conversion) {
	run := list[:0:0]
	for _, c := range list {
		if c.chunk >= 0 {
			run = append(run, c)
		}
	}
	if len(run) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	db.conv = background{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(db.conv.done)
		for _, c := range run {
			if err := c.run(ctx, log); err != nil && ctx.Err() == nil && log != nil {
				log.Warn(c.name+" stopped; it resumes at the next start", "err", err.Error())
			}
		}
	}()
}

// run steps c until it is done or ctx ends.
func (c conversion) run(ctx context.Context, log *slog.Logger) error {
	converted := int64(0)
	for {
		n, done, err := c.step(ctx, c.chunk)
		if err != nil {
			return err
		}
		converted += n
		if done {
			if log != nil && converted > 0 {
				log.Info(c.done, c.unit, converted)
			}
			return nil
		}
	}
}
