-- 0005: a goal's currency, as SQLite's 0029 (docs/query-api.md#goals-and-funnels):
-- an ISO 4217 code on a custom event goal makes it a revenue goal; NULL is a
-- goal without revenue (every goal stored before).
ALTER TABLE goals ADD COLUMN currency text COLLATE "C";
