-- 0013: a session is a visit, with the attributes of docs/intake.md#visits,
-- kept by the writer with the session. Added columns, no table rewrite:
-- rows stored before read NULL, 0 and visit_ready 0 until the backfill
-- (visit_backfill below) or the next event of the session computes them
-- from its events.
ALTER TABLE sessions ADD COLUMN entry_page TEXT;    -- path of the earliest pageview
ALTER TABLE sessions ADD COLUMN exit_page TEXT;     -- path of the latest pageview
ALTER TABLE sessions ADD COLUMN pageviews INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN referrer TEXT;      -- earliest referrer from another host
ALTER TABLE sessions ADD COLUMN source TEXT;        -- utm_source, else the referrer's host
ALTER TABLE sessions ADD COLUMN utm_source TEXT;    -- utm_* and the rest: of the earliest event
ALTER TABLE sessions ADD COLUMN utm_medium TEXT;
ALTER TABLE sessions ADD COLUMN utm_campaign TEXT;
ALTER TABLE sessions ADD COLUMN utm_term TEXT;
ALTER TABLE sessions ADD COLUMN utm_content TEXT;
ALTER TABLE sessions ADD COLUMN country TEXT;
ALTER TABLE sessions ADD COLUMN city TEXT;
ALTER TABLE sessions ADD COLUMN browser TEXT;
ALTER TABLE sessions ADD COLUMN os TEXT;
ALTER TABLE sessions ADD COLUMN device TEXT;
-- When the entry pageview, the exit pageview and the referrer's event
-- happened, as small integers (ms after started_at, ms before ended_at,
-- ms after started_at; usually 0, which takes no byte), so that an event
-- that arrives late is placed as if it had come in order.
ALTER TABLE sessions ADD COLUMN entry_ms INTEGER;
ALTER TABLE sessions ADD COLUMN exit_ms INTEGER;
ALTER TABLE sessions ADD COLUMN referrer_ms INTEGER;
-- 1 once the attributes are computed; 0 for a row of before 0013 whose
-- attributes the backfill has not computed yet.
ALTER TABLE sessions ADD COLUMN visit_ready INTEGER NOT NULL DEFAULT 0;

-- A site's visits by time, for the query API.
CREATE INDEX sessions_site_start ON sessions(site_id, started_at);

-- The backfill of the rows above, a chunk per writer job, from the lowest
-- id up to end_id (the newest row before this migration; later rows are
-- written ready). next_id is where it resumes after a restart; the row is
-- deleted when it is done, and never added to a database without sessions.
CREATE TABLE visit_backfill (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    next_id  INTEGER NOT NULL,
    end_id   INTEGER NOT NULL
);
INSERT INTO visit_backfill(id, next_id, end_id)
    SELECT 1, 0, MAX(id) FROM sessions HAVING COUNT(*) > 0;
