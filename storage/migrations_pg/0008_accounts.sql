-- 0008: as SQLite's 0032: people who sign in to the dashboard (docs/accounts.md): users, their
-- roles per workspace, their sessions, invitations and password links. Only
-- hashes of passwords (argon2id), session ids and link tokens (SHA-256) are
-- stored. email_key is the address lowercased: an address is unique
-- whatever its case.
CREATE TABLE users (
    id                  text COLLATE "C" PRIMARY KEY,
    email               text COLLATE "C" NOT NULL,
    email_key           text COLLATE "C" NOT NULL UNIQUE,
    password_hash       text COLLATE "C",
    password_changed_at text COLLATE "C",
    totp_secret         text COLLATE "C",
    totp_enabled_at     text COLLATE "C",
    totp_last_step      bigint NOT NULL DEFAULT 0,
    created_at          text COLLATE "C" NOT NULL
);

-- A user's role in a workspace: owner, admin or viewer.
CREATE TABLE memberships (
    user_id      text COLLATE "C" NOT NULL REFERENCES users(id),
    workspace_id text COLLATE "C" NOT NULL REFERENCES workspaces(id),
    role         text COLLATE "C" NOT NULL,
    created_at   text COLLATE "C" NOT NULL,
    PRIMARY KEY (user_id, workspace_id)
);
CREATE INDEX memberships_workspace ON memberships(workspace_id);

-- A signed-in browser: token_hash is the SHA-256 of the cookie's value; id
-- is what lists and revocations name. Idle expiry is last_seen_at plus the
-- server's idle timeout; expires_at is the absolute one.
CREATE TABLE user_sessions (
    id           text COLLATE "C" PRIMARY KEY,
    token_hash   text COLLATE "C" NOT NULL UNIQUE,
    user_id      text COLLATE "C" NOT NULL REFERENCES users(id),
    created_at   text COLLATE "C" NOT NULL,
    last_seen_at text COLLATE "C" NOT NULL,
    expires_at   text COLLATE "C" NOT NULL,
    revoked_at   text COLLATE "C"
);
CREATE INDEX user_sessions_user ON user_sessions(user_id);

-- An invitation to a workspace, accepted once before expires_at.
CREATE TABLE invitations (
    id           text COLLATE "C" PRIMARY KEY,
    workspace_id text COLLATE "C" NOT NULL REFERENCES workspaces(id),
    email        text COLLATE "C" NOT NULL,
    role         text COLLATE "C" NOT NULL,
    token_hash   text COLLATE "C" NOT NULL UNIQUE,
    created_at   text COLLATE "C" NOT NULL,
    expires_at   text COLLATE "C" NOT NULL,
    accepted_at  text COLLATE "C",
    accepted_by  text COLLATE "C"
);
CREATE INDEX invitations_workspace ON invitations(workspace_id);

-- A link that sets a user's password (reset, or the first one), used once
-- before expires_at.
CREATE TABLE password_tokens (
    id          text COLLATE "C" PRIMARY KEY,
    user_id     text COLLATE "C" NOT NULL REFERENCES users(id),
    token_hash  text COLLATE "C" NOT NULL UNIQUE,
    created_at  text COLLATE "C" NOT NULL,
    expires_at  text COLLATE "C" NOT NULL,
    used_at     text COLLATE "C"
);
CREATE INDEX password_tokens_user ON password_tokens(user_id);
