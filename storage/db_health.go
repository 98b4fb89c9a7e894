package storage

import (
	"context"

	"github.com/tally-analytics/tally/storage/internal/engine"
)

// WriteHealth reports whether writes reach the database, as intake meets
// them: nil, or an *fault.Error with code unavailable. It is unavailable
// while the SQLite file's file system has too little room left for the
// largest write (engine.RoomHealth; never on PostgreSQL, whose disk is the
// server's), and otherwise as the writer's own health says
// (engine.Writer.Health: a refusal held, a recent commit trusted, or a
// probe write).
func (db *DB) WriteHealth(ctx context.Context) error {
	if db.pg.size == nil {
		if err := engine.RoomHealth(db.path); err != nil {
			return err
		}
	}
	return db.writer.Health(ctx)
}
