-- 0012: fewer bytes per event (docs/storage.md#event-bytes).
--
-- The one events index keys ts as integer milliseconds (7 bytes) rather
-- than its 24-byte text. ts_ms is a virtual column: computed from ts when
-- read, stored only in the index. ts is always written in one layout
-- (2006-01-02T15:04:05.000Z), in which ts_ms orders exactly as ts does;
-- unixepoch() floors, so times before 1970 order right too. The index
-- keeps its name; readers that rank or bound a visitor's events by time
-- use ts_ms to search it.
ALTER TABLE events ADD COLUMN ts_ms INTEGER
    GENERATED ALWAYS AS (unixepoch(ts) * 1000 + CAST(substr(ts, 21, 3) AS INTEGER)) VIRTUAL;
DROP INDEX events_site_anon_ts;
CREATE INDEX events_site_anon_ts ON events(site_id, anon_id, ts_ms);

-- events.received_at moves into raw (rawFormatV2 in storage/intake_raw_codec.go):
-- the background conversion rewrites every row from the first, rows of
-- 0010's form and rows still in text alike (a conversion of 0010 not
-- finished yet is taken over). MAX(seq) reads one entry of the table.
INSERT OR REPLACE INTO raw_conversion(id, next_seq, end_seq)
    SELECT 1, 0, MAX(seq) FROM events HAVING MAX(seq) IS NOT NULL;
