package storage

// holdSite is checkSite inside tx, and holds the site there against a
// delete on another instance until tx ends (docs/api.md#tenancy-rules: a write
// racing a delete writes nothing or is deleted with the site). On SQLite the
// writer's transactions are the only ones, so the check is enough.
func (db *DB) holdSite(tx *writeTx, site *Site) error {
	if err := db.checkSite(site); err != nil {
		return err
	}
	return db.coord().holdSite(tx, site)
}
