-- 0025: imported events (docs/import.md). An imported event's id is kept here
-- for good, per site, so that running the same import again stores nothing
-- twice however long after: event_ids forgets an id after 48 hours, and events
-- has no index by id. The id takes the form event_ids gives it (16 bytes for a
-- canonical UUID). A site's rows go with it (lifecycle_site_delete.go); erasure and
-- retention leave them, so an import run again does not bring back what they
-- removed.
CREATE TABLE imported_ids (
    site_id TEXT NOT NULL,
    id      ANY NOT NULL,
    PRIMARY KEY (site_id, id)
) WITHOUT ROWID;
