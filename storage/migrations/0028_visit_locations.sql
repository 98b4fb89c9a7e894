-- 0028: a visit's region and its city's id, beside its country and city
-- (docs/query-api.md#locations), from a City database at GEOIP_DB_PATH:
-- region is the ISO 3166-2 code of the first-level subdivision ("DE-BE"),
-- city_id the city's GeoNames id as text ("2950159"), so that the query
-- API's visit:region and visit:city read them as they read every other
-- visit attribute. Rows of before stay NULL: the address they came from is
-- gone.
ALTER TABLE sessions ADD COLUMN region TEXT;
ALTER TABLE sessions ADD COLUMN city_id TEXT;
