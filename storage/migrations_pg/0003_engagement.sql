-- 0003: SQLite's 0027 (storage/migrations/0027_engagement.sql): a pageview's
-- deepest scroll in percent and its engaged milliseconds, from Plausible's
-- engagement events (docs/intake.md#engagement).
ALTER TABLE events ADD COLUMN scroll_depth integer;
ALTER TABLE events ADD COLUMN engaged_ms bigint;
