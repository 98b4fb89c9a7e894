-- 0010: events.raw is stored compressed from now on
-- (docs/storage.md#event-bytes). Rows stored before keep their JSON text, which
-- readers still accept, until the conversion rewrites them a chunk per writer
-- job, from the lowest seq up to end_seq (the newest row before this migration;
-- later rows are written compressed). next_seq is where it resumes after a
-- restart; the row is deleted when it is done, and never added to a database
-- without events.
CREATE TABLE raw_conversion (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    next_seq  INTEGER NOT NULL,
    end_seq   INTEGER NOT NULL
);
INSERT INTO raw_conversion(id, next_seq, end_seq)
    SELECT 1, 0, MAX(seq) FROM events HAVING COUNT(*) > 0;

-- Event ids that are canonical UUIDs are kept in event_ids as their 16
-- bytes (see dedupKey); the ids of the last 48 hours take that form now,
-- so that a repeat sent across the upgrade is still found. event_ids holds
-- those 48 hours only, so this is one bounded pass.
UPDATE event_ids SET id = dedup_key(id) WHERE length(id) = 36;
