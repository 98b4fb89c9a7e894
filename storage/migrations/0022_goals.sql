-- 0022: goals (docs/query-api.md#goals-and-funnels): per site, by event name
-- (optionally with a custom property's value) or by page path pattern.
-- Names are unique per site; a site's goals go with it (lifecycle_site_delete.go).
CREATE TABLE goals (
    -- AUTOINCREMENT: a deleted goal's id is never given to another, so a
    -- stale id cannot delete a newer goal.
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    site_id    TEXT NOT NULL,
    name       TEXT NOT NULL,
    event_name TEXT,
    page_path  TEXT,
    prop_name  TEXT,
    prop_value TEXT,
    created_at TEXT NOT NULL,
    UNIQUE (site_id, name),
    CHECK ((event_name IS NULL) <> (page_path IS NULL)),
    CHECK ((prop_name IS NULL) = (prop_value IS NULL))
);
