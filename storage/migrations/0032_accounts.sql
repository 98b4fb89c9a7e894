-- 0032: people who sign in to the dashboard (docs/accounts.md): users, their
-- roles per workspace, their sessions, invitations and password links. Only
-- hashes of passwords (argon2id), session ids and link tokens (SHA-256) are
-- stored. email_key is the address lowercased: an address is unique
-- whatever its case.
CREATE TABLE users (
    id                  TEXT PRIMARY KEY,
    email               TEXT NOT NULL,
    email_key           TEXT NOT NULL UNIQUE,
    password_hash       TEXT,
    password_changed_at TEXT,
    totp_secret         TEXT,
    totp_enabled_at     TEXT,
    totp_last_step      INTEGER NOT NULL DEFAULT 0,
    created_at          TEXT NOT NULL
);

-- A user's role in a workspace: owner, admin or viewer.
CREATE TABLE memberships (
    user_id      TEXT NOT NULL REFERENCES users(id),
    workspace_id TEXT NOT NULL REFERENCES workspaces(id),
    role         TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (user_id, workspace_id)
);
CREATE INDEX memberships_workspace ON memberships(workspace_id);

-- A signed-in browser: token_hash is the SHA-256 of the cookie's value; id
-- is what lists and revocations name. Idle expiry is last_seen_at plus the
-- server's idle timeout; expires_at is the absolute one.
CREATE TABLE user_sessions (
    id           TEXT PRIMARY KEY,
    token_hash   TEXT NOT NULL UNIQUE,
    user_id      TEXT NOT NULL REFERENCES users(id),
    created_at   TEXT NOT NULL,
    last_seen_at TEXT NOT NULL,
    expires_at   TEXT NOT NULL,
    revoked_at   TEXT
);
CREATE INDEX user_sessions_user ON user_sessions(user_id);

-- An invitation to a workspace, accepted once before expires_at.
CREATE TABLE invitations (
    id           TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces(id),
    email        TEXT NOT NULL,
    role         TEXT NOT NULL,
    token_hash   TEXT NOT NULL UNIQUE,
    created_at   TEXT NOT NULL,
    expires_at   TEXT NOT NULL,
    accepted_at  TEXT,
    accepted_by  TEXT
);
CREATE INDEX invitations_workspace ON invitations(workspace_id);

-- A link that sets a user's password (reset, or the first one), used once
-- before expires_at.
CREATE TABLE password_tokens (
    id          TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users(id),
    token_hash  TEXT NOT NULL UNIQUE,
    created_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL,
    used_at     TEXT
);
CREATE INDEX password_tokens_user ON password_tokens(user_id);
