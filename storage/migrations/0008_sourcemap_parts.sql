-- 0008: a sourcemap is stored as parts of at most 1 MiB, each written and
-- deleted in a writer job of its own, so a 25 MiB map no longer holds the
-- writer (and all intake) for one long transaction. sourcemaps.upload
-- names the parts that hold the row's map; its map column is then empty.
-- Rows from before keep their inline map (upload NULL) until replaced or
-- deleted. created_at comes before data so that reading it does not walk
-- a part's overflow pages.
CREATE TABLE sourcemap_parts (
    site_id     TEXT NOT NULL,
    upload      TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    created_at  TEXT NOT NULL,
    data        BLOB NOT NULL,
    PRIMARY KEY (site_id, upload, seq)
);
-- Orphans (of an upload or a freeing cut short) are found by age.
CREATE INDEX sourcemap_parts_age ON sourcemap_parts(created_at, site_id, upload);

ALTER TABLE sourcemaps ADD COLUMN upload TEXT;
-- Whether any row points at an upload's parts.
CREATE INDEX sourcemaps_upload ON sourcemaps(upload);
-- The usage index also answers which parts a (release, file) points at,
-- without reading a row stored after its inline map.
DROP INDEX sourcemaps_usage;
CREATE INDEX sourcemaps_usage ON sourcemaps(site_id, release, file, size, upload);
