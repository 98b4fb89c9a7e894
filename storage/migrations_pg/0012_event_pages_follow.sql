-- 0012 (issue 33): event_pages without its foreign key to events. The key
-- checked every event_pages insert with a row lock on its event (a SELECT
-- ... FOR KEY SHARE per row): 54 bytes of WAL per event (a heap LOCK
-- record, 3% of intake's) and about 17 µs of PostgreSQL CPU per event (100
-- batches of 100 events and pages rows on the dev cluster: 773 ms with the
-- key, 425 ms without), which no read needs: only intake writes the rows,
-- in the statement that inserts their events (intake_rows_pg.go), and
-- `tally migrate-to` copies them. What the key did besides, deleting an
-- event's row with it whoever deletes it (retention, erasure, site
-- deletion, an operator's SQL), these statement triggers do, as SQLite's
-- delete trigger does, once per statement rather than once per row; a
-- TRUNCATE of events, which the key refused unless event_pages went too,
-- now takes event_pages with it.
ALTER TABLE event_pages DROP CONSTRAINT event_pages_seq_fkey;

-- = ANY(ARRAY(...)) reads event_pages by its primary key whatever the
-- planner guesses of the transition table's size.
CREATE FUNCTION tally_event_pages_follow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        TRUNCATE event_pages;
    ELSE
        DELETE FROM event_pages WHERE seq = ANY (ARRAY(SELECT seq FROM gone));
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER events_delete_pages AFTER DELETE ON events REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION tally_event_pages_follow();
CREATE TRIGGER events_truncate_pages AFTER TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION tally_event_pages_follow();
