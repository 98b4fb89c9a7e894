-- 0010: events.raw is stored compressed from now on (README "Storage",
-- "Event bytes"). Rows stored before keep their JSON text, which readers
-- still accept, until the conversion rewrites them a chunk per writer job,
-- from the lowest seq up to end_seq (the newest row before this migration;
-- later rows are written compressed). next_seq is where it resumes after a
-- restart; the row is deleted when it is done, and never added to a
-- database without events.
CREATE TABLE raw_conversion (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    next_seq  INTEGER NOT NULL,
    end_seq   INTEGER NOT NULL
);
INSERT INTO raw_conversion(id, next_seq, end_seq)
    SELECT 1, 0, MAX(seq) FROM events HAVING COUNT(*) > 0;
