-- 0024: history imported from another product's export (docs/import.md):
-- aggregates per site and local day, with no visitor in them. imports lists
-- each import of a site with its days; imported_rows holds its per-day rollups,
-- one row per day, dimension and shown value. A site's rows of both go with it
-- (lifecycle_site_delete.go).
CREATE TABLE imports (
    -- AUTOINCREMENT: an id is never reused, so rows of a replaced import
    -- cannot be mistaken for a later one's.
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    site_id    TEXT NOT NULL,
    source     TEXT NOT NULL,
    -- the files' base names, a JSON array
    files      TEXT NOT NULL,
    first_day  TEXT,
    last_day   TEXT,
    rows       INTEGER NOT NULL DEFAULT 0,
    -- 0 while rows are written: reads count only complete imports
    complete   INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
);
CREATE INDEX imports_site ON imports(site_id, id);

CREATE TABLE imported_rows (
    site_id   TEXT NOT NULL,
    import_id INTEGER NOT NULL,
    -- '' for the whole site (Plausible's imported_visitors), else the
    -- query API's dimension (visit:source, event:page, ...)
    dim       TEXT NOT NULL,
    -- the site's local day, YYYY-MM-DD
    day       TEXT NOT NULL,
    value     TEXT NOT NULL,
    visitors  INTEGER NOT NULL,
    visits    INTEGER NOT NULL,
    pageviews INTEGER NOT NULL,
    events    INTEGER NOT NULL,
    bounces   INTEGER NOT NULL,
    -- seconds: the sum of the visits' durations
    duration  INTEGER NOT NULL,
    PRIMARY KEY (site_id, import_id, dim, day, value)
) WITHOUT ROWID;
