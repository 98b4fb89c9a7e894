-- 0029: a goal's currency (docs/query-api.md#goals-and-funnels): an ISO 4217
-- code on a custom event goal makes it a revenue goal, as Plausible's goals
-- have one; the revenue metrics answer the amounts of its events in it.
-- NULL: a goal without revenue (every goal stored before).
ALTER TABLE goals ADD COLUMN currency TEXT;
