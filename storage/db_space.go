package storage

import (
	"context"
	"fmt"
)

// ObjectSpace is the room one table or index takes in the database file.
type ObjectSpace struct {
	Name  string
	Bytes int64
}

// Space copies the whole WAL into the database file and truncates it, then
// returns the file's size and what each table and index takes of it, from
// SQLite's dbstat table, largest first, then the free pages
// (docs/storage.md#event-bytes). It reads every page of the file, so it is for
// benchmarks and maintenance, not requests.
func (db *DB) Space(ctx context.Context) (fileBytes int64, objects []ObjectSpace, err error) {
	if _, err := db.ckpt.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return 0, nil, fmt.Errorf("checkpoint: %w", err)
	}
	rows, err := db.read.QueryContext(ctx, `SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC`)
	if err != nil {
		return 0, nil, fmt.Errorf("dbstat: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var o ObjectSpace
		if err := rows.Scan(&o.Name, &o.Bytes); err != nil {
			return 0, nil, err
		}
		objects = append(objects, o)
	}
	if err := rows.Err(); err != nil {
		return 0, nil, err
	}
	// Pages freed by deletions (pruned dedup ids, erased events) are on
	// the freelist, which dbstat does not list: the file holds them until
	// new rows reuse them.
	var free int64
	if err := db.read.QueryRowContext(ctx, `SELECT f.freelist_count * p.page_size FROM pragma_freelist_count f, pragma_page_size p`).Scan(&free); err != nil {
		return 0, nil, fmt.Errorf("freelist: %w", err)
	}
	objects = append(objects, ObjectSpace{Name: "(free pages)", Bytes: free})
	u := db.DiskUsage()
	return u.DatabaseBytes + u.WALBytes, objects, nil
}
