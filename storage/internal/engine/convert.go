package engine

import (
	"context"
	"log/slog"
)

// A Conversion rewrites rows stored before a migration into the form the
// migration introduced, in the background after start, a chunk per writer
// job of a few milliseconds, so that writes go on meanwhile. Each step
// records how far it got in the conversion's own table, whose row is
// deleted at the end, so a restart resumes where the last committed step
// stopped. Readers and the writer accept both forms of a row throughout.
type Conversion struct {
	// Name is what the log calls it: "raw conversion".
	Name string
	// Done is the log line at its end, with the rows converted (under
	// Unit).
	Done, Unit string
	// Chunk is the rows a step reads; below 0 the conversion does not run
	// (tests run its steps themselves).
	Chunk int
	// Step converts the next chunk: how many rows it rewrote, and whether
	// nothing remains.
	Step func(ctx context.Context, chunk int) (converted int64, done bool, err error)
}

// StartConversions runs the conversions one after the other in one
// background goroutine, until each is done or stop is called; done is
// closed when the goroutine ends. A failure is logged and ends that
// conversion; the next start resumes it. With nothing to run, stop is nil
// and no goroutine starts.
func StartConversions(log *slog.Logger, list ...Conversion) (stop func(), done chan struct{}) {
	run := list[:0:0]
	for _, c := range list {
		if c.Chunk >= 0 {
			run = append(run, c)
		}
	}
	if len(run) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan struct{})
	go func() {
		defer close(done)
		for _, c := range run {
			if err := c.run(ctx, log); err != nil && ctx.Err() == nil && log != nil {
				log.Warn(c.Name+" stopped; it resumes at the next start", "err", err.Error())
			}
		}
	}()
	return cancel, done
}

// run steps c until it is done or ctx ends.
func (c Conversion) run(ctx context.Context, log *slog.Logger) error {
	converted := int64(0)
	for {
		n, done, err := c.Step(ctx, c.Chunk)
		if err != nil {
			return err
		}
		converted += n
		if done {
			if log != nil && converted > 0 {
				log.Info(c.Done, c.Unit, converted)
			}
			return nil
		}
	}
}
