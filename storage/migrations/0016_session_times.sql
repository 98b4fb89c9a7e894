-- 0016: a session's times as integers (README "Event bytes", "Visits").
--
-- start_ms is the start in milliseconds since the epoch and duration_ms
-- the end minus the start (0 for a bounce, which takes no byte); the
-- 24-byte texts started_at and ended_at become start_text and end_text,
-- which hold '' in a row of the new form. The conversion below rewrites
-- the rows stored before, a chunk per writer job; until it reaches a row,
-- the generated columns read its text, so rows of both forms read the same:
--   started_ms, ended_ms  milliseconds since the epoch (both indexes key
--                         started_ms: 6 bytes instead of 24);
--   started_at, ended_at  the same text as before (2006-01-02T15:04:05.000Z),
--                         computed when read, stored nowhere.
-- Generated columns are VIRTUAL and use SQLite 3.40 functions only, so
-- the sqlite3 shell reads them too. strftime rounds start_ms / 1000.0 to
-- the millisecond, so the text is exact.
DROP INDEX sessions_site_anon_start;
DROP INDEX sessions_site_start;
ALTER TABLE sessions RENAME COLUMN started_at TO start_text;
ALTER TABLE sessions RENAME COLUMN ended_at TO end_text;
ALTER TABLE sessions ADD COLUMN start_ms INTEGER;
ALTER TABLE sessions ADD COLUMN duration_ms INTEGER;
ALTER TABLE sessions ADD COLUMN started_ms INTEGER GENERATED ALWAYS AS
    (coalesce(start_ms, unixepoch(start_text) * 1000 + CAST(substr(start_text, 21, 3) AS INTEGER))) VIRTUAL;
ALTER TABLE sessions ADD COLUMN ended_ms INTEGER GENERATED ALWAYS AS
    (coalesce(start_ms + duration_ms, unixepoch(end_text) * 1000 + CAST(substr(end_text, 21, 3) AS INTEGER))) VIRTUAL;
ALTER TABLE sessions ADD COLUMN started_at TEXT GENERATED ALWAYS AS
    (CASE WHEN start_ms IS NULL THEN start_text
     ELSE strftime('%Y-%m-%dT%H:%M:%fZ', start_ms / 1000.0, 'unixepoch') END) VIRTUAL;
ALTER TABLE sessions ADD COLUMN ended_at TEXT GENERATED ALWAYS AS
    (CASE WHEN start_ms IS NULL THEN end_text
     ELSE strftime('%Y-%m-%dT%H:%M:%fZ', (start_ms + duration_ms) / 1000.0, 'unixepoch') END) VIRTUAL;
-- Found by visitor (intake, GDPR, the query API's event-to-visit join) and
-- by site and time (the query API's visits of a range).
CREATE INDEX sessions_site_anon_start ON sessions(site_id, anon_id, started_ms);
CREATE INDEX sessions_site_start ON sessions(site_id, started_ms);

-- The conversion of the rows above, a range of ids per writer job, from
-- the lowest id up to end_id (the newest row before this migration; later
-- rows are written in the new form). next_id is where it resumes after a
-- restart; the row is deleted when it is done, and never added to a
-- database without sessions.
CREATE TABLE session_times_conversion (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    next_id  INTEGER NOT NULL,
    end_id   INTEGER NOT NULL
);
INSERT INTO session_times_conversion(id, next_id, end_id)
    SELECT 1, 0, MAX(id) FROM sessions HAVING COUNT(*) > 0;
