-- 0027: what Plausible's engagement events measure of a pageview
-- (docs/intake.md#engagement): the deepest scroll of the page, in percent of
-- its height (0 to 100), and the milliseconds it was visible and focused,
-- summed over the page's engagement events. NULL on every other row: an
-- engagement event is not stored as an event, only added to its pageview, so
-- erasure, retention and site deletion take it with the row.
ALTER TABLE events ADD COLUMN scroll_depth INTEGER;
ALTER TABLE events ADD COLUMN engaged_ms INTEGER;
