-- 0012 (issue 33): two costs of every event's insert that no read needs.
--
-- First, event_pages without its foreign key to events. The key
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

-- Second, tally_text_ms without STRICT, and so inlined. events.ts_ms is
-- tally_text_ms(ts), computed for every event inserted; PostgreSQL inlines
-- a SQL function into the expression only when a STRICT one's body is
-- strict too, which a CASE is not, so each row ran the function through
-- the SQL function executor: about 35 µs of PostgreSQL CPU per event (dev
-- cluster under load, 20,000 rows of 100 a statement: 1,108 to 1,365 ms
-- with it, 429 to 524 ms with ts_ms written as a constant; inlined, 645 to
-- 710 ms). The value is the same for every input: NULL for NULL (every
-- function of the ELSE branch is strict) and for '', the same
-- milliseconds otherwise (TestPostgresGeneratedColumnsMatchSQLite).
CREATE OR REPLACE FUNCTION tally_text_ms(t text) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN t = '' THEN NULL ELSE
        extract(epoch FROM make_timestamp(substr(t, 1, 4)::int, substr(t, 6, 2)::int, substr(t, 9, 2)::int,
            substr(t, 12, 2)::int, substr(t, 15, 2)::int, substr(t, 18, 2)::int))::bigint * 1000
        + substr(t, 21, 3)::int END;
