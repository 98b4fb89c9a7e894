-- 0001: every table the contract names, with the indexes their reads need.
-- Timestamps are ISO 8601 text in UTC with exactly three fraction digits
-- ('2026-01-31T09:05:00.120Z'): fixed width, so text order is time order.
-- Only syntax understood by SQLite 3.40 is used, so operators' older shells
-- can read the file.

CREATE TABLE workspaces (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    slug        TEXT NOT NULL UNIQUE,
    created_at  TEXT NOT NULL,
    updated_at  TEXT
);

CREATE TABLE sites (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id),
    name          TEXT NOT NULL,
    created_at    TEXT NOT NULL
);
CREATE INDEX sites_workspace ON sites(workspace_id, id);

-- Only the SHA-256 of a key's plaintext is kept; the plaintext is shown once.
CREATE TABLE api_keys (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id),
    label         TEXT NOT NULL,
    scopes        TEXT NOT NULL,            -- JSON array of scope names
    key_hash      TEXT NOT NULL UNIQUE,     -- hex SHA-256 of the plaintext
    created_at    TEXT NOT NULL,
    last_used_at  TEXT,
    revoked_at    TEXT
);
CREATE INDEX api_keys_workspace ON api_keys(workspace_id, created_at);

-- Append-only: the triggers below refuse UPDATE and DELETE for every
-- connection, including a hand-opened sqlite3 shell.
CREATE TABLE audit_log (
    seq           INTEGER PRIMARY KEY,      -- insertion order
    id            TEXT NOT NULL UNIQUE,
    workspace_id  TEXT NOT NULL,
    actor_kind    TEXT NOT NULL CHECK (actor_kind IN ('admin', 'apiKey', 'system')),
    actor_id      TEXT,
    action        TEXT NOT NULL,
    target        TEXT,
    metadata      TEXT NOT NULL DEFAULT '{}',
    ts            TEXT NOT NULL
);
-- No two entries of one workspace share a ts (the writer moves a colliding
-- ts 1 ms forward), so a ts cursor never skips or repeats an entry.
CREATE UNIQUE INDEX audit_log_workspace_ts ON audit_log(workspace_id, ts);

CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only: UPDATE refused');
END;

CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only: DELETE refused');
END;

-- Events live in rowid order (seq grows with arrival), so inserts append to
-- the table's B-tree instead of landing at random places as a UUID key would.
CREATE TABLE events (
    seq          INTEGER PRIMARY KEY,
    id           TEXT NOT NULL,             -- the event's wire id
    site_id      TEXT NOT NULL,
    type         TEXT NOT NULL,
    url          TEXT,
    ts           TEXT NOT NULL,
    anon_id      TEXT NOT NULL,
    user_id      TEXT,
    referrer     TEXT,
    country      TEXT,
    city         TEXT,
    browser      TEXT,
    os           TEXT,
    device_type  TEXT,
    raw          TEXT NOT NULL,             -- verbatim wire JSON of this event
    received_at  TEXT NOT NULL,
    credential   TEXT                       -- 'site' or 'key:<key id>'
);
-- The one secondary index: every read by person (timeline, GDPR) resolves a
-- user to anon ids through identity_links first, since an event carrying a
-- user_id always links its anon_id. Counts come from rollups (0002), so no
-- (site_id, ts) index is paid for on every insert.
CREATE INDEX events_site_anon_ts ON events(site_id, anon_id, ts);

CREATE TABLE sessions (
    id           INTEGER PRIMARY KEY,
    site_id      TEXT NOT NULL,
    anon_id      TEXT NOT NULL,
    user_id      TEXT,
    started_at   TEXT NOT NULL,
    ended_at     TEXT NOT NULL,
    event_count  INTEGER NOT NULL
);
-- Sessions are found by visitor (ingest, GDPR); counts by day come from
-- the daily_sessions rollup (0002), so no index by start time is kept.
CREATE INDEX sessions_site_anon_start ON sessions(site_id, anon_id, started_at);

CREATE TABLE user_profiles (
    site_id     TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    traits      TEXT NOT NULL DEFAULT '{}',
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (site_id, user_id)
);

CREATE TABLE identity_links (
    site_id     TEXT NOT NULL,
    anon_id     TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (site_id, anon_id, user_id)
);
CREATE INDEX identity_links_site_user ON identity_links(site_id, user_id);

CREATE TABLE dlq (
    id           TEXT NOT NULL,             -- the event's wire id
    site_id      TEXT NOT NULL,
    payload      TEXT NOT NULL,             -- original wire JSON
    error        TEXT NOT NULL,             -- JSON array of {path, message}
    received_at  TEXT NOT NULL,
    anon_id      TEXT,
    user_id      TEXT,
    endpoint     TEXT,
    PRIMARY KEY (site_id, id)
);
CREATE INDEX dlq_site_received ON dlq(site_id, received_at);
CREATE INDEX dlq_site_anon ON dlq(site_id, anon_id);
CREATE INDEX dlq_site_user ON dlq(site_id, user_id);

-- Operators insert and revoke secrets with plain SQL; created_at defaults to
-- now so a bare INSERT of (site_id, adapter, secret) works.
CREATE TABLE webhook_secrets (
    site_id     TEXT NOT NULL,
    adapter     TEXT NOT NULL,
    secret      TEXT NOT NULL,
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    revoked_at  TEXT NULL
);
CREATE INDEX webhook_secrets_site_adapter ON webhook_secrets(site_id, adapter);

CREATE TABLE sourcemaps (
    site_id     TEXT NOT NULL,
    release     TEXT NOT NULL,
    file        TEXT NOT NULL,
    map         BLOB NOT NULL,
    size        INTEGER NOT NULL,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (site_id, release, file)
);
