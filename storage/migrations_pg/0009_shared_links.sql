-- 0009: shared links, as SQLite's 0033 (docs/sharing.md): only the SHA-256
-- of a link's token and an argon2id hash of its password are stored.
CREATE TABLE shared_links (
    id              text COLLATE "C" PRIMARY KEY,
    site_id         text COLLATE "C" NOT NULL,
    label           text COLLATE "C" NOT NULL,
    token_hash      text COLLATE "C" NOT NULL UNIQUE,
    password_hash   text COLLATE "C",
    allowed_origins text COLLATE "C" NOT NULL DEFAULT '[]',
    created_at      text COLLATE "C" NOT NULL,
    updated_at      text COLLATE "C" NOT NULL,
    revoked_at      text COLLATE "C"
);
CREATE INDEX shared_links_site ON shared_links(site_id);
