package engine

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// A failing checkpoint is logged once when checkpoints start failing and
// once when they work again, not at every pass.
func TestCheckpointFailuresAreLoggedOnce(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	c := checkpointFailures{log: slog.New(slog.NewTextHandler(&logs, nil))}
	broken := errors.New("disk I/O error")
	for _, err := range []error{nil, broken, broken, broken, nil, nil, broken, nil} {
		c.report(err)
	}
	for _, want := range []struct {
		line  string
		count int
	}{{"WAL checkpoints are failing", 2}, {"WAL checkpoints work again", 2}} {
		if got := strings.Count(logs.String(), want.line); got != want.count {
			t.Errorf("got %d lines %q, want %d, in:\n%s", got, want.line, want.count, logs.String())
		}
	}
}
