-- 0002: what the collector's writer keeps besides the events themselves.

-- Dedup window: ids of stored events, kept for 48 hours after arrival. A
-- random UUID key is costly in a large B-tree; this one stays small (only
-- recent ids) and so stays in the page cache.
CREATE TABLE event_ids (
    site_id      TEXT NOT NULL,
    id           TEXT NOT NULL,
    received_ms  INTEGER NOT NULL,
    PRIMARY KEY (site_id, id)
) WITHOUT ROWID;
CREATE INDEX event_ids_received ON event_ids(received_ms);

-- One random salt per UTC day for cookieless anon ids; old salts are
-- deleted, after which yesterday's hashes cannot be linked to anyone.
CREATE TABLE daily_salts (
    day   TEXT PRIMARY KEY,
    salt  BLOB NOT NULL
);

-- Per-day rollups maintained by the writer in the transaction that stores
-- the events, so reads never scan the events table.
CREATE TABLE daily_events (
    site_id  TEXT NOT NULL,
    day      TEXT NOT NULL,       -- YYYY-MM-DD of the event ts (UTC)
    type     TEXT NOT NULL,
    count    INTEGER NOT NULL,
    PRIMARY KEY (site_id, day, type)
) WITHOUT ROWID;

CREATE TABLE daily_sessions (
    site_id      TEXT NOT NULL,
    day          TEXT NOT NULL,   -- YYYY-MM-DD of the session start (UTC)
    sessions     INTEGER NOT NULL,
    duration_ms  INTEGER NOT NULL,
    events       INTEGER NOT NULL,
    bounces      INTEGER NOT NULL,
    PRIMARY KEY (site_id, day)
) WITHOUT ROWID;

-- Accepted events per site and calendar month (UTC), for INGEST_QUOTA.
CREATE TABLE site_usage (
    site_id   TEXT NOT NULL,
    month     TEXT NOT NULL,      -- YYYY-MM
    accepted  INTEGER NOT NULL,
    PRIMARY KEY (site_id, month)
) WITHOUT ROWID;
