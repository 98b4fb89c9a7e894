package storage

import (
	"context"
	"database/sql"
)

// SQLiteVersion is the version of the SQLite library compiled into the
// driver, which is the one every database file is opened with.
func SQLiteVersion(ctx context.Context) (string, error) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return "", err
	}
	defer db.Close()
	var v string
	err = db.QueryRowContext(ctx, `SELECT sqlite_version()`).Scan(&v)
	return v, err
}
