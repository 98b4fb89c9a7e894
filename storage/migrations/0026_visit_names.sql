-- 0026: visit sources by name and the landing's versions (docs/intake.md#source-names). Since this
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

-- The landing's browser and OS versions as Plausible shows them ("120.0",
-- "10.15"; docs/query-api.md#value-names): NULL in the rows stored before,
-- whose User-Agent was not kept, and where the User-Agent states none.
ALTER TABLE sessions ADD COLUMN browser_version TEXT;
ALTER TABLE sessions ADD COLUMN os_version TEXT;
