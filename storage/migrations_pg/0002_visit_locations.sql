-- 0002: SQLite's 0028, a visit's region (ISO 3166-2) and its city's
-- GeoNames id (docs/query-api.md#locations).
ALTER TABLE sessions ADD COLUMN region text COLLATE "C";
ALTER TABLE sessions ADD COLUMN city_id text COLLATE "C";
