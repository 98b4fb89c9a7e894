-- 0019: events.credential as a short code (docs/storage.md#event-bytes).
--
-- Every event records the credential it came with: "site" (4 bytes) or
-- "key:<key id>" (40 bytes, a UUID), repeated on every row. From this
-- migration on the column holds the decimal code of the credential in
-- this table instead (1 or 2 bytes); rows stored before keep their text,
-- which no code can equal (codes are digits only). The view gives every
-- event's credential as text, whichever form its row has, for operators'
-- SQL: SELECT credential, COUNT(*) FROM event_credentials GROUP BY 1.
-- Codes are never reused or deleted: they name a credential (a key id,
-- never a key's secret), not a person.
CREATE TABLE credentials (
    code        INTEGER PRIMARY KEY,
    credential  TEXT NOT NULL UNIQUE
);

CREATE VIEW event_credentials(seq, credential) AS
    SELECT e.seq, COALESCE(c.credential, e.credential)
    FROM events e LEFT JOIN credentials c ON c.code = e.credential;
