-- 0026: visit sources by name (docs/intake.md#source-names). Since this
-- migration the writer stores a visit's source name in source_text where
-- the referrer list knows it ("Google" for google.de); the sessions stored
-- before hold hosts, which the source names backfill (intake_source_names.go)
-- names, a range of ids per writer job, from the lowest id up to end_id (the
-- newest row before this migration). next_id is where it resumes after a
-- restart; the row is deleted when it is done, and never added to a database
-- without sessions.
CREATE TABLE source_names_backfill (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    next_id  INTEGER NOT NULL,
    end_id   INTEGER NOT NULL
);
INSERT INTO source_names_backfill(id, next_id, end_id)
    SELECT 1, 0, MAX(id) FROM sessions HAVING COUNT(*) > 0;
