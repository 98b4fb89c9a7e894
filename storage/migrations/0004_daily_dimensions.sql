-- 0004: pageviews per day by dimension, for GET /v1/sites/:siteId/breakdown.
-- Kept by the writer in the transaction that stores the events. url is
-- stored without query string and fragment, referrer as its host; an
-- absent value is ''.
CREATE TABLE daily_dimensions (
    site_id    TEXT NOT NULL,
    day        TEXT NOT NULL,
    dimension  TEXT NOT NULL,   -- url, referrer, country, browser, os, device_type
    value      TEXT NOT NULL,
    count      INTEGER NOT NULL,
    PRIMARY KEY (site_id, day, dimension, value)
) WITHOUT ROWID;
