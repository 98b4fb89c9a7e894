-- 0004: visit sources by name and the landing's versions, as SQLite's 0026 (docs/intake.md#source-names):
-- the sessions stored before hold hosts, which the source names backfill
-- (intake_source_names.go) names, a range of ids per writer job. It is the
-- one conversion PostgreSQL runs: its rows were written in the final form of
-- their day, and the names came later. Instances that run it at once only
-- repeat each other's updates, which change nothing the second time.
CREATE TABLE source_names_backfill (
    id       bigint PRIMARY KEY CHECK (id = 1),
    next_id  bigint NOT NULL,
    end_id   bigint NOT NULL
);
INSERT INTO source_names_backfill(id, next_id, end_id)
    SELECT 1, 0, MAX(id) FROM sessions HAVING COUNT(*) > 0;

-- The landing's browser and OS versions, as SQLite's 0026.
ALTER TABLE sessions ADD COLUMN browser_version text COLLATE "C";
ALTER TABLE sessions ADD COLUMN os_version text COLLATE "C";
