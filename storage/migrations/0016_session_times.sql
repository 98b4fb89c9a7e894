-- 0016: smaller sessions rows and indexes (docs/storage.md#event-bytes,
-- docs/intake.md#visits): times as integers, the source derived, the agent as a
-- code.
--
-- start_ms is the start in milliseconds since the epoch and duration_ms
-- the end minus the start (0 for a bounce, which takes no byte); the
-- 24-byte texts started_at and ended_at become start_text and end_text,
-- which hold '' in a row of the new form. The conversion below rewrites
-- the rows stored before, a chunk per writer job; until it reaches a row,
-- the generated columns read its text, so rows of both forms read the same:
--   started_ms, ended_ms  milliseconds since the epoch (both indexes key
--                         started_ms: 6 bytes instead of 24);
--   started_at, ended_at  the same text as before (2006-01-02T15:04:05.000Z),
--                         computed when read, stored nowhere.
-- Generated columns are VIRTUAL and use SQLite 3.40 functions only, so
-- the sqlite3 shell reads them too. strftime rounds start_ms / 1000.0 to
-- the millisecond, so the text is exact.
DROP INDEX sessions_site_anon_start;
DROP INDEX sessions_site_start;
ALTER TABLE sessions RENAME COLUMN started_at TO start_text;
ALTER TABLE sessions RENAME COLUMN ended_at TO end_text;
ALTER TABLE sessions ADD COLUMN start_ms INTEGER;
ALTER TABLE sessions ADD COLUMN duration_ms INTEGER;
ALTER TABLE sessions ADD COLUMN started_ms INTEGER GENERATED ALWAYS AS
    (coalesce(start_ms, unixepoch(start_text) * 1000 + CAST(substr(start_text, 21, 3) AS INTEGER))) VIRTUAL;
ALTER TABLE sessions ADD COLUMN ended_ms INTEGER GENERATED ALWAYS AS
    (coalesce(start_ms + duration_ms, unixepoch(end_text) * 1000 + CAST(substr(end_text, 21, 3) AS INTEGER))) VIRTUAL;
ALTER TABLE sessions ADD COLUMN started_at TEXT GENERATED ALWAYS AS
    (CASE WHEN start_ms IS NULL THEN start_text
     ELSE strftime('%Y-%m-%dT%H:%M:%fZ', start_ms / 1000.0, 'unixepoch') END) VIRTUAL;
ALTER TABLE sessions ADD COLUMN ended_at TEXT GENERATED ALWAYS AS
    (CASE WHEN start_ms IS NULL THEN end_text
     ELSE strftime('%Y-%m-%dT%H:%M:%fZ', (start_ms + duration_ms) / 1000.0, 'unixepoch') END) VIRTUAL;
-- A visit's source is derived from utm_source and referrer when read
-- (docs/intake.md#visits): the column source becomes source_text, NULL in a row
-- written since, and source is a generated column.
ALTER TABLE sessions RENAME COLUMN source TO source_text;
ALTER TABLE sessions ADD COLUMN source TEXT GENERATED ALWAYS AS (coalesce(source_text, utm_source,
    CASE WHEN substr(referrer, 1, 14) = 'android-app://'
         THEN nullif('android-app://' || substr(referrer, 15, instr(substr(referrer, 15) || '/', '/') - 1), 'android-app://')
         ELSE nullif(substr(referrer, 1, instr(referrer || '/', '/') - 1), '') END)) VIRTUAL;

-- The landing's browser, OS and device type as one small integer, agent =
-- browser + 32 * os + 512 * device, each a code of a fixed list (the User-Agent
-- parser's names, storage/intake_visit_codes.go; 0 is none), when all three are on
-- the lists; then browser_text, os_text and device_text (the former browser,
-- os and device) are NULL. Otherwise agent is NULL and the texts hold the
-- values. browser, os and device are generated columns that read either form.
ALTER TABLE sessions RENAME COLUMN browser TO browser_text;
ALTER TABLE sessions RENAME COLUMN os TO os_text;
ALTER TABLE sessions RENAME COLUMN device TO device_text;
ALTER TABLE sessions ADD COLUMN agent INTEGER;
ALTER TABLE sessions ADD COLUMN browser TEXT GENERATED ALWAYS AS (CASE WHEN agent IS NULL THEN browser_text ELSE
    CASE agent % 32 WHEN 1 THEN 'Chrome' WHEN 2 THEN 'Safari' WHEN 3 THEN 'Mobile Safari' WHEN 4 THEN 'Firefox' WHEN 5 THEN 'Edge' WHEN 6 THEN 'Opera' WHEN 7 THEN 'Opera Mini' WHEN 8 THEN 'Samsung Browser' WHEN 9 THEN 'Android Browser' WHEN 10 THEN 'IE' WHEN 11 THEN 'Vivaldi' WHEN 12 THEN 'Amazon Silk' WHEN 13 THEN 'Falkon' WHEN 14 THEN 'Nintendo Browser' WHEN 15 THEN 'Yandex Browser' WHEN 16 THEN 'Huawei Browser' END END) VIRTUAL;
ALTER TABLE sessions ADD COLUMN os TEXT GENERATED ALWAYS AS (CASE WHEN agent IS NULL THEN os_text ELSE
    CASE agent / 32 % 16 WHEN 1 THEN 'Windows' WHEN 2 THEN 'macOS' WHEN 3 THEN 'iOS' WHEN 4 THEN 'Android' WHEN 5 THEN 'Linux' WHEN 6 THEN 'ChromeOS' WHEN 7 THEN 'FreeBSD' WHEN 8 THEN 'OpenBSD' END END) VIRTUAL;
ALTER TABLE sessions ADD COLUMN device TEXT GENERATED ALWAYS AS (CASE WHEN agent IS NULL THEN device_text ELSE
    CASE agent / 512 WHEN 1 THEN 'desktop' WHEN 2 THEN 'mobile' WHEN 3 THEN 'tablet' WHEN 4 THEN 'other' END END) VIRTUAL;

-- Found by visitor (intake, GDPR, the query API's event-to-visit join) and
-- by site and time (the query API's visits of a range).
CREATE INDEX sessions_site_anon_start ON sessions(site_id, anon_id, started_ms);
CREATE INDEX sessions_site_start ON sessions(site_id, started_ms);

-- The conversion of the rows above, a range of ids per writer job, from
-- the lowest id up to end_id (the newest row before this migration; later
-- rows are written in the new form). next_id is where it resumes after a
-- restart; the row is deleted when it is done, and never added to a
-- database without sessions.
CREATE TABLE session_times_conversion (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    next_id  INTEGER NOT NULL,
    end_id   INTEGER NOT NULL
);
INSERT INTO session_times_conversion(id, next_id, end_id)
    SELECT 1, 0, MAX(id) FROM sessions HAVING COUNT(*) > 0;
