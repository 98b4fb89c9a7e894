-- 0017: identity_links without a rowid (docs/storage.md#event-bytes). The
-- primary key is the row, so the table is no longer kept twice (a rowid table
-- and its primary key's index), and created_at is Unix milliseconds (INTEGER)
-- instead of 24 bytes of text; the GDPR export shows it as text, as before.
-- The index by user holds the anon id (the primary key's columns), so a
-- user's devices are read from it alone, in anon id order.
--
-- The old table keeps its rows under a new name; they move into the new one
-- in the background after start, a chunk per writer job (intake_links.go), and the
-- old table, empty by then, is dropped at the next start. On a new
-- database it is empty and dropped at once.
ALTER TABLE identity_links RENAME TO identity_links_rowid;
CREATE TABLE identity_links (
    site_id     TEXT NOT NULL,
    anon_id     TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    created_at  INTEGER NOT NULL,   -- Unix ms
    PRIMARY KEY (site_id, anon_id, user_id)
) WITHOUT ROWID;
CREATE INDEX identity_links_user ON identity_links(site_id, user_id, anon_id);
