-- 0035: saved funnels (docs/query-api.md#saved-funnels), as Plausible keeps
-- them in a site's settings: a name and 2 to 8 steps, each one of the
-- site's goals. steps is the JSON array of the goals' ids, in order; a goal
-- a funnel names cannot be deleted (report_goals.go). A site's funnels go
-- with it (lifecycle_site_delete.go).
CREATE TABLE funnels (
    -- AUTOINCREMENT: a deleted funnel's id is never given to another.
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    site_id    TEXT NOT NULL,
    name       TEXT NOT NULL,
    steps      TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX funnels_site_name ON funnels(site_id, name);
