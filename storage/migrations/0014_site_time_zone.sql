-- 0014: a site's IANA time zone (docs/query-api.md). The query API's days,
-- hours and relative ranges are in it; the older reads stay in UTC days.
ALTER TABLE sites ADD COLUMN time_zone TEXT NOT NULL DEFAULT 'UTC';
