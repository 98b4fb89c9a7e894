package storage

import (
	"log/slog"

	"github.com/tally-analytics/tally/storage/internal/engine"
)

// conversion is a background conversion of rows stored before a
// migration (engine.Conversion): raw, visits, session times, event
// columns, event pages, identity links. Each records its progress in a
// table of its own (raw_conversion, visit_backfill...).
type conversion = engine.Conversion

// startConversions runs the conversions in the background, through the
// engine's one chunked, resumable runner; Close stops them (db.conv).
func (db *DB) startConversions(log *slog.Logger, list ...conversion) {
	if stop, done := engine.StartConversions(log, list...); stop != nil {
		db.conv = background{stop: stop, done: done}
	}
}
