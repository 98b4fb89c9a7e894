-- 0009: an API key may be restricted to some sites of its workspace.
-- sites is a JSON array of site ids, or NULL for every site of the
-- workspace. Deleting a site removes it from every array, so a key left
-- with [] can reach no site (docs/api.md#authentication).
ALTER TABLE api_keys ADD COLUMN sites TEXT;
