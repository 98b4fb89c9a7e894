-- 0031: saved segments (docs/query-api.md#saved-segments), Plausible's: a
-- site's named set of query API filters, applied by the filter
-- ["is", "segment", [id]]. segment_data is the JSON object
-- {"filters": [...], "labels": {...}} as sent, checked by the query parser.
-- A site's segments go with it (lifecycle_site_delete.go).
CREATE TABLE segments (
    -- AUTOINCREMENT: a deleted segment's id is never given to another, so a
    -- query naming a stale id gets a 400, never another segment's figures.
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    site_id      TEXT NOT NULL,
    name         TEXT NOT NULL,
    type         TEXT NOT NULL CHECK (type IN ('personal', 'site')),
    segment_data TEXT NOT NULL,
    -- The actor that created it or changed it last (Plausible's owner):
    -- admin (owner_id NULL) or api_key and the key's id.
    owner_kind   TEXT NOT NULL,
    owner_id     TEXT,
    inserted_at  TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);
CREATE INDEX segments_site ON segments(site_id);
