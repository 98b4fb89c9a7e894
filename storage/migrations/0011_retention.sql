-- 0011: retention (docs/storage.md#retention). A site's retention_days is NULL
-- to follow RETENTION_DAYS, 0 to keep everything, else the days of raw rows
-- kept. purged_before is the first UTC day (YYYY-MM-DD) whose raw rows are
-- all still there: a purge may have removed those of earlier days (the
-- rollups stay). It only moves forward.
ALTER TABLE sites ADD COLUMN retention_days INTEGER;
ALTER TABLE sites ADD COLUMN purged_before TEXT;

-- The day (YYYY-MM-DD, UTC) of the last daily purge that ran to its end,
-- one row at most; a server that starts later than due runs one at once.
CREATE TABLE retention_runs (
    day  TEXT PRIMARY KEY
);
