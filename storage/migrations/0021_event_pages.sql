-- 0021: a narrow copy of what reports read of each event
-- (docs/query-api.md#how-reports-stay-fast): its name and its page path, one
-- row per event under the event's seq. A filtered report reads an event's index
-- entry and this row of ~17 bytes instead of the wide events row (~165 bytes),
-- a 4 KiB page read per event at 10M events.
--
-- name is NULL for a pageview (most events: nothing stored) and the
-- event's type otherwise; path is tally_page_path(url), NULL for a NULL url.
CREATE TABLE event_pages (
    seq   INTEGER PRIMARY KEY,
    name  TEXT,
    path  TEXT
);

-- The triggers keep it in step with events on every path that writes
-- events, now and later. The insert calls tally_page_path, a function of
-- the service's process: an INSERT into events from a plain sqlite3 shell
-- fails with "no such function". Deletes are plain SQL, so a delete from
-- the shell keeps both tables consistent. OR REPLACE: a seq freed by a
-- delete of the newest event can be given again.
CREATE TRIGGER event_pages_insert AFTER INSERT ON events BEGIN
    INSERT OR REPLACE INTO event_pages(seq, name, path)
        VALUES (new.seq, CASE WHEN new.type = 'pageview' THEN NULL ELSE new.type END, tally_page_path(new.url));
END;
CREATE TRIGGER event_pages_delete AFTER DELETE ON events BEGIN
    DELETE FROM event_pages WHERE seq = old.seq;
END;
CREATE TRIGGER event_pages_update AFTER UPDATE OF url, type ON events BEGIN
    INSERT OR REPLACE INTO event_pages(seq, name, path)
        VALUES (new.seq, CASE WHEN new.type = 'pageview' THEN NULL ELSE new.type END, tally_page_path(new.url));
END;

-- The events stored before get their rows in the background, a range of
-- seq per writer job, from the lowest seq up to end_seq (the newest event
-- before this migration; later ones get theirs from the trigger). next_seq
-- is where it resumes after a restart; the row is deleted when it is done,
-- and never added to a database without events. Reports read event_pages
-- only once this row is gone.
CREATE TABLE event_pages_backfill (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    next_seq  INTEGER NOT NULL,
    end_seq   INTEGER NOT NULL
);
INSERT INTO event_pages_backfill(id, next_seq, end_seq)
    SELECT 1, 0, MAX(seq) FROM events HAVING MAX(seq) IS NOT NULL;
