package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrInUse is Vacuum's answer when another connection, usually the
// running server, has the database open.
var ErrInUse = errors.New("the database is open in another process (is the server running? stop it first)")

// VacuumResult is what Vacuum did: the sizes of the database file (with
// its WAL) before and after, and how long it took.
type VacuumResult struct {
	Before, After int64
	Took          time.Duration
}

// Vacuum rebuilds the database file at path without its free pages, so
// that it shrinks to its data (docs/storage.md#retention). It needs the file to
// itself: it takes SQLite's exclusive lock for the whole rebuild, so it
// refuses with ErrInUse when the server, or any other connection, has the
// file open, rather than stall their writes. It needs free room of up to
// twice the database's size (the rebuilt copy in the temporary folder,
// then the WAL of writing it back); the WAL is emptied and removed at the
// end.
func Vacuum(ctx context.Context, path string) (VacuumResult, error) {
	var res VacuumResult
	if path == ":memory:" {
		return res, errors.New("an in-memory database has nothing to vacuum")
	}
	if _, err := os.Stat(path); err != nil {
		return res, err
	}
	res.Before = fileSizes(path)
	// Exclusive locking mode: the first transaction takes the file's
	// exclusive lock and keeps it, which fails at once (no busy timeout)
	// while another connection holds the shared lock every WAL connection
	// keeps.
	db, err := sql.Open("sqlite", FileURI(path)+"?mode=rw&_pragma=busy_timeout(0)&_pragma=locking_mode(EXCLUSIVE)")
	if err != nil {
		return res, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		return res, inUse(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN EXCLUSIVE`); err != nil {
		return res, inUse(err)
	}
	if _, err := conn.ExecContext(ctx, `COMMIT`); err != nil {
		return res, inUse(err)
	}
	start := time.Now()
	if _, err := conn.ExecContext(ctx, `VACUUM`); err != nil {
		return res, fmt.Errorf("vacuum: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return res, fmt.Errorf("checkpoint after vacuum: %w", err)
	}
	res.Took = time.Since(start)
	conn.Close()
	if err := db.Close(); err != nil {
		return res, err
	}
	res.After = fileSizes(path)
	return res, nil
}

// inUse turns SQLite's "database is locked" into ErrInUse.
func inUse(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY {
		return ErrInUse
	}
	return err
}

// fileSizes is the size of the database file and its WAL.
func fileSizes(path string) int64 {
	var n int64
	for _, p := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}
