-- 0015: the query API's per-day partials
-- (docs/query-api.md#how-reports-stay-fast): for one local day of a site in a
-- time zone, per value of one dimension ('' for none), the sums of the day's
-- events or visits (basis) and a sketch of their visitors. A cache: any row may
-- be deleted at any time, and every write that changes a day's events or visits
-- deletes the rows of that day.
CREATE TABLE day_partials (
    site_id   TEXT NOT NULL,
    zone      TEXT NOT NULL,
    dim       TEXT NOT NULL,
    basis     TEXT NOT NULL,    -- events or visits
    day_start INTEGER NOT NULL, -- UTC ms of the local day's start
    day_end   INTEGER NOT NULL, -- UTC ms of the next day's start
    data      BLOB NOT NULL,
    PRIMARY KEY (site_id, zone, dim, basis, day_start)
) WITHOUT ROWID;
-- Writers delete a site's rows by time, whatever their zone and dimension.
CREATE INDEX day_partials_day ON day_partials(site_id, day_start);
