-- 0013: events_site_anon_ts carries seq (docs/postgresql.md#reads-at-10m). On
-- SQLite every index holds the rowid, so the timeline ranks a user's
-- candidate events (timelineNewest) and the writer's lookups read the index
-- alone; on PostgreSQL the index held no seq, and each candidate was a heap
-- fetch: 9,453 of them for a heavy user at 10M events (128 ms warm, 570 ms
-- cold, against 10.7 ms with seq in the index). The same key columns, so
-- every read of the old index reads this one. Built under a lock that holds
-- intake off events while it runs (39 s at 10M events).
CREATE INDEX events_site_anon_ts_seq ON events(site_id, anon_id, ts_ms) INCLUDE (seq);
DROP INDEX events_site_anon_ts;
ALTER INDEX events_site_anon_ts_seq RENAME TO events_site_anon_ts;
