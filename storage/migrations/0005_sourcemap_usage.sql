-- A site's sourcemap usage (file count and bytes) is checked on every
-- upload. size is stored after the map, so reading it from the table walks
-- each map's overflow pages; this index answers the count and sum alone.
CREATE INDEX sourcemaps_usage ON sourcemaps(site_id, release, file, size);
