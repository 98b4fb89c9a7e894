package storage

import (
	"os"
	"path/filepath"

	"github.com/tally-analytics/tally/storage/internal/engine"
)

// DiskUsage is the size of the database's files and the room left for
// them, so operators see a full disk coming.
type DiskUsage struct {
	// DatabaseBytes and WALBytes are the sizes of the database file and of
	// its write-ahead log (0 when absent).
	DatabaseBytes, WALBytes int64
	// FreeBytes is what the database's file system has left for an
	// unprivileged user; 0 where it cannot be known.
	FreeBytes int64
}

// DiskUsage measures the database's files now; all zero for :memory:. On
// PostgreSQL it is the database's size on the server (engine.PGSize: the
// WAL and the free space are the server's, read as 0).
func (db *DB) DiskUsage() DiskUsage {
	if db.pg.size != nil {
		return DiskUsage{DatabaseBytes: db.pg.size.Bytes()}
	}
	if db.path == ":memory:" || db.path == "" {
		return DiskUsage{}
	}
	size := func(p string) int64 {
		if fi, err := os.Stat(p); err == nil {
			return fi.Size()
		}
		return 0
	}
	free, _ := engine.FreeBytes(filepath.Dir(db.path))
	return DiskUsage{DatabaseBytes: size(db.path), WALBytes: size(db.path + "-wal"), FreeBytes: free}
}
