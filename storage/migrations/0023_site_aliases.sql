-- 0023: the names a site answers to besides its id
-- (docs/intake.md#plausible--and-umami-compatible-intake): Plausible's `domain`
-- and Umami's `website` are looked up here, then among site ids. A name belongs
-- to one site at most; a site's aliases go with it (lifecycle_site_delete.go).
CREATE TABLE site_aliases (
    site_id TEXT NOT NULL,
    alias   TEXT NOT NULL UNIQUE
);
CREATE INDEX site_aliases_site ON site_aliases(site_id);
