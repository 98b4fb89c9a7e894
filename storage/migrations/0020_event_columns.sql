-- 0020: smaller events rows (docs/storage.md#event-bytes): the browser, OS and
-- device type as one code, the wire id of a canonical UUID as its 16 bytes.
--
-- The browser, OS and device type as one small integer, as sessions hold
-- their landing's since 0016: agent = browser + 32 * os + 512 * device,
-- each a code of a fixed list (the User-Agent parser's names,
-- storage/intake_visit_codes.go; 0 is none, read as NULL), when all three are on
-- the lists; then browser_text, os_text and device_type_text (the former
-- browser, os and device_type) are NULL. Otherwise agent is NULL and the
-- texts hold the values. browser, os and device_type are generated columns
-- that read either form.
ALTER TABLE events RENAME COLUMN browser TO browser_text;
ALTER TABLE events RENAME COLUMN os TO os_text;
ALTER TABLE events RENAME COLUMN device_type TO device_type_text;
ALTER TABLE events ADD COLUMN agent INTEGER;
ALTER TABLE events ADD COLUMN browser TEXT GENERATED ALWAYS AS (CASE WHEN agent IS NULL THEN browser_text ELSE
    CASE agent % 32 WHEN 1 THEN 'Chrome' WHEN 2 THEN 'Safari' WHEN 3 THEN 'Mobile Safari' WHEN 4 THEN 'Firefox' WHEN 5 THEN 'Edge' WHEN 6 THEN 'Opera' WHEN 7 THEN 'Opera Mini' WHEN 8 THEN 'Samsung Browser' WHEN 9 THEN 'Android Browser' WHEN 10 THEN 'IE' WHEN 11 THEN 'Vivaldi' WHEN 12 THEN 'Amazon Silk' WHEN 13 THEN 'Falkon' WHEN 14 THEN 'Nintendo Browser' WHEN 15 THEN 'Yandex Browser' WHEN 16 THEN 'Huawei Browser' END END) VIRTUAL;
ALTER TABLE events ADD COLUMN os TEXT GENERATED ALWAYS AS (CASE WHEN agent IS NULL THEN os_text ELSE
    CASE agent / 32 % 16 WHEN 1 THEN 'Windows' WHEN 2 THEN 'macOS' WHEN 3 THEN 'iOS' WHEN 4 THEN 'Android' WHEN 5 THEN 'Linux' WHEN 6 THEN 'ChromeOS' WHEN 7 THEN 'FreeBSD' WHEN 8 THEN 'OpenBSD' END END) VIRTUAL;
ALTER TABLE events ADD COLUMN device_type TEXT GENERATED ALWAYS AS (CASE WHEN agent IS NULL THEN device_type_text ELSE
    CASE agent / 512 WHEN 1 THEN 'desktop' WHEN 2 THEN 'mobile' WHEN 3 THEN 'tablet' WHEN 4 THEN 'other' END END) VIRTUAL;

-- The wire id: id_text (the former id) holds the 16 bytes of a canonical
-- UUID (lower case, with hyphens: most ids), as event_ids does, or else the
-- id's text. id is a generated column giving the text of either form, so
-- every reader (and the raw codec, which puts the id back into raw) reads
-- the same id as before.
ALTER TABLE events RENAME COLUMN id TO id_text;
-- SQLite computes it on every insert too: hex of each part of the blob
-- (substr of a blob counts bytes) is about 0.6 µs.
ALTER TABLE events ADD COLUMN id TEXT GENERATED ALWAYS AS (CASE WHEN typeof(id_text) = 'blob' THEN
    lower(hex(substr(id_text, 1, 4)) || '-' || hex(substr(id_text, 5, 2)) || '-' || hex(substr(id_text, 7, 2)) || '-' ||
    hex(substr(id_text, 9, 2)) || '-' || hex(substr(id_text, 11))) ELSE id_text END) VIRTUAL;

-- The rows stored before are rewritten in the new form in the background,
-- a range of seq per writer job, from the lowest seq up to end_seq (the
-- newest row before this migration; later rows are written in the new
-- form). next_seq is where it resumes after a restart; the row is deleted
-- when it is done, and never added to a database without events.
CREATE TABLE event_columns_conversion (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    next_seq  INTEGER NOT NULL,
    end_seq   INTEGER NOT NULL
);
INSERT INTO event_columns_conversion(id, next_seq, end_seq)
    SELECT 1, 0, MAX(seq) FROM events HAVING MAX(seq) IS NOT NULL;
