-- 0033: shared links (docs/sharing.md): a site's read-only dashboard at an
-- unguessable URL. token_hash is the SHA-256 of the link's 256-bit random
-- token (the token itself is shown once and stored nowhere);
-- password_hash, when set, an argon2id hash as users' are;
-- allowed_origins the JSON array of origins that may frame the page. A
-- revoked link keeps its row (revoked_at) and answers 404. A site's links
-- go with it (lifecycle_site_delete.go).
CREATE TABLE shared_links (
    id              TEXT PRIMARY KEY,
    site_id         TEXT NOT NULL,
    label           TEXT NOT NULL,
    token_hash      TEXT NOT NULL UNIQUE,
    password_hash   TEXT,
    allowed_origins TEXT NOT NULL DEFAULT '[]',
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    revoked_at      TEXT
);
CREATE INDEX shared_links_site ON shared_links(site_id);
