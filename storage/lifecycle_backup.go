package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	sqlite "modernc.org/sqlite"

	"github.com/tally-analytics/tally/fault"

	"github.com/tally-analytics/tally/storage/internal/engine"
)

// backupStepPages is how many pages (4 KiB each) one backup step copies.
// A step of the live backup runs on the write connection between two
// commits, so intake waits for at most one step (about a millisecond).
const backupStepPages = 256

// backupPause is the pause between two steps. No snapshot is held during
// it, so the WAL can start over (docs/storage.md#backup-and-restore).
const backupPause = 2 * time.Millisecond

// backupAfterStep, when set (by tests only), runs after each step: a write
// there lands between two steps for certain, which a concurrent writer
// only does when the scheduler lets it.
var backupAfterStep func()

// backupMaxRestarts is how often a backup from a connection of its own
// (BackupFile) may start over because someone else wrote, before it gives up.
const backupMaxRestarts = 3

// BackupStats says what a backup copied.
type BackupStats struct {
	Path     string        // the copy
	Pages    int           // pages of the copy
	Bytes    int64         // size of the copy
	Steps    int           // steps taken, of backupStepPages pages
	Restarts int           // times the copy started over because another connection wrote
	Duration time.Duration // from start to the copy renamed into place
}

// errBackupExists refuses to replace an existing file without force.
func errBackupExists(path string) error {
	return fault.Errorf(fault.BackupExists, "%s already exists; pass force (--force) to replace it", path)
}

// backuper is modernc.org/sqlite's driver connection, which starts backups.
type backuper interface {
	NewBackup(dstURI string) (*sqlite.Backup, error)
}

// Backup writes a consistent copy of the database to path while the
// service keeps writing. Each step runs on the write connection between two
// commits (writer.outside): SQLite's backup API starts over whenever
// another connection writes, but applies the writes of its own source
// connection to the pages already copied, so the copy always finishes.
// Between steps no snapshot is held, so the WAL starts over as usual. The
// copy holds everything committed before its last step, so every write
// acknowledged before Backup was called. An existing path is replaced only
// with force; path is written only once complete.
func (db *DB) Backup(ctx context.Context, path string, force bool) (BackupStats, error) {
	if err := db.d.fileCopies(); err != nil {
		return BackupStats{}, err
	}
	if db.path != ":memory:" && samePathOrSidecar(db.path, path) {
		return BackupStats{}, fault.Errorf(fault.InvalidBackup, "the backup cannot replace the database itself or its -wal or -shm file")
	}
	return backupInSteps(ctx, db.writer.Outside, path, force, 0)
}

// BackupFolder is the folder, next to the database file, that the running
// server writes its backups into: the only place a request can make it
// write a file (see DB.BackupIntoFolder).
const BackupFolder = "backups"

// BackupIntoFolder writes a backup, as Backup does, to a new file of its
// own naming in the folder BackupFolder next to the database (created
// readable by the server's user only), and returns its stats with the
// file's path. It never replaces a file: a request to the server cannot
// make it write or overwrite anything anywhere else. An in-memory database
// has no folder and is refused.
func (db *DB) BackupIntoFolder(ctx context.Context) (BackupStats, error) {
	if err := db.d.fileCopies(); err != nil {
		return BackupStats{}, err
	}
	if db.path == ":memory:" {
		return BackupStats{}, fault.Errorf(fault.InvalidBackup, "an in-memory database has no folder to keep a backup in")
	}
	dir := filepath.Join(filepath.Dir(db.path), BackupFolder)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return BackupStats{}, fmt.Errorf("create the backup folder: %w", err)
	}
	name := "tally-" + db.now().UTC().Format("20060102T150405Z") + "-" + engine.RandomHex(4) + ".db"
	return db.Backup(ctx, filepath.Join(dir, name), false)
}

// BackupFile copies the database at src to path from a connection of its
// own, in steps, for when no server has it open. Should another process
// write to src meanwhile, the copy starts over (SQLite's backup API), and
// after backupMaxRestarts it gives up: under steady writes it would never
// finish. The running server's database is copied by DB.Backup instead.
func BackupFile(ctx context.Context, src, path string, force bool) (BackupStats, error) {
	if _, err := os.Stat(src); err != nil {
		return BackupStats{}, fmt.Errorf("no database at %s: %w", src, err)
	}
	if samePathOrSidecar(src, path) {
		return BackupStats{}, fault.Errorf(fault.InvalidBackup, "the backup cannot replace the database itself or its -wal or -shm file")
	}
	conn, err := sql.Open("sqlite", FileURI(src)+"?_pragma=busy_timeout(10000)&_pragma=query_only(1)")
	if err != nil {
		return BackupStats{}, err
	}
	defer conn.Close()
	// ctx is for the copy's steps (backupInSteps); opening a local file
	// does not wait.
	c, err := conn.Conn(context.Background())
	if err != nil {
		return BackupStats{}, err
	}
	defer c.Close()
	return backupInSteps(ctx, func(fn func(*sql.Conn) error) error { return fn(c) }, path, force, backupMaxRestarts)
}

// CanBackup is nil when Backup can copy this database; on PostgreSQL, the
// error to answer (docs/storage.md#backup-and-restore).
func (db *DB) CanBackup() error { return db.d.fileCopies() }

// IsPath reports whether path names this database's file.
func (db *DB) IsPath(path string) bool {
	if db.path == "" { // PostgreSQL: no file
		return false
	}
	if db.path == ":memory:" || path == ":memory:" {
		return db.path == path
	}
	a, err1 := filepath.Abs(db.path)
	b, err2 := filepath.Abs(path)
	return err1 == nil && err2 == nil && a == b
}

// samePathOrSidecar reports whether path names the database file db or one
// of SQLite's files beside it.
func samePathOrSidecar(db, path string) bool {
	a, err1 := filepath.Abs(db)
	b, err2 := filepath.Abs(path)
	if err1 != nil || err2 != nil {
		return false
	}
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		if a+suffix == b {
			return true
		}
	}
	return false
}

// backupInSteps copies the database of the connection run gives to path,
// backupStepPages at a time with backupPause between steps. It writes a
// temporary file next to path, fsyncs it and moves it into place, so path
// is never half written. maxRestarts > 0 gives up after that many restarts.
func backupInSteps(ctx context.Context, run func(func(*sql.Conn) error) error, path string, force bool, maxRestarts int) (stats BackupStats, err error) {
	start := time.Now()
	stats.Path = path
	if _, err := os.Lstat(path); err == nil && !force {
		return stats, errBackupExists(path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		// The operator named a folder that is missing or not writable.
		return stats, fault.Errorf(fault.InvalidBackup, "cannot create the backup file: %v", err)
	}
	tmp := f.Name()
	f.Close()
	defer func() {
		if err == nil {
			return
		}
		os.Remove(tmp)
		os.Remove(tmp + "-journal")
		// A full or failing disk under the copy: the operator needs
		// SQLite's or the OS's words (no values in them), not "internal".
		if fault.As(err) == nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			err = fault.Errorf(fault.Unavailable, "the backup failed: %v", err)
		}
	}()
	var b *sqlite.Backup
	// src is the driver connection the backup reads. The pool keeps it,
	// but were it ever replaced, b would point into a closed connection:
	// every later step checks it is still the same one.
	var src any
	same := func(dc any) error {
		if dc != src {
			return errors.New("the database connection was replaced during the backup")
		}
		return nil
	}
	// The copy is private until renamed, so it needs no journal of its
	// own: a failure removes it. It is fsynced once, at the end.
	dst := FileURI(tmp) + "?_pragma=journal_mode(OFF)&_pragma=synchronous(OFF)"
	err = run(func(c *sql.Conn) error {
		return c.Raw(func(dc any) error {
			bk, ok := dc.(backuper)
			if !ok {
				return errors.New("the SQLite driver cannot make backups")
			}
			var err error
			b, err = bk.NewBackup(dst)
			src = dc
			return err
		})
	})
	if err != nil {
		return stats, fmt.Errorf("start the backup: %w", err)
	}
	finish := func() error {
		return run(func(c *sql.Conn) error {
			return c.Raw(func(dc any) error {
				if err := same(dc); err != nil {
					return err
				}
				return b.Finish()
			})
		})
	}
	copied := -1
	for {
		var more bool
		var stepErr error
		err = run(func(c *sql.Conn) error {
			return c.Raw(func(dc any) error {
				if err := same(dc); err != nil {
					return err
				}
				more, stepErr = b.Step(backupStepPages)
				stats.Pages = b.PageCount()
				// A restart copies from the first page again.
				now := b.PageCount() - b.Remaining()
				if more && now <= copied {
					stats.Restarts++
				}
				copied = now
				return nil
			})
		})
		stats.Steps++
		if backupAfterStep != nil {
			backupAfterStep()
		}
		if err == nil {
			err = stepErr
		}
		if err != nil {
			finish()
			return stats, fmt.Errorf("backup step: %w", err)
		}
		if !more {
			break
		}
		if maxRestarts > 0 && stats.Restarts > maxRestarts {
			finish()
			return stats, fmt.Errorf("the database changed during the copy %d times: something writes to it (a running server? `tally backup` asks it to make the copy when it answers at QUERY_ADDR)", stats.Restarts)
		}
		select {
		case <-ctx.Done():
			finish()
			return stats, ctx.Err()
		case <-time.After(backupPause):
		}
	}
	if err = finish(); err != nil {
		return stats, fmt.Errorf("finish the backup: %w", err)
	}
	if err = syncFile(tmp); err != nil {
		return stats, err
	}
	if force {
		err = os.Rename(tmp, path)
	} else if err = os.Link(tmp, path); err == nil { // refuses a path made meanwhile
		os.Remove(tmp)
	} else if errors.Is(err, os.ErrExist) {
		err = errBackupExists(path)
	} else if _, statErr := os.Lstat(path); errors.Is(statErr, os.ErrNotExist) {
		err = os.Rename(tmp, path) // a file system without hard links
	}
	if err != nil {
		return stats, err
	}
	if err := syncFile(filepath.Dir(path)); err != nil {
		return stats, err
	}
	if fi, err := os.Stat(path); err == nil {
		stats.Bytes = fi.Size()
	}
	stats.Duration = time.Since(start)
	return stats, nil
}

// syncFile fsyncs the file or folder at path.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	return nil
}
