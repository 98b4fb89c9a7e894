package engine

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver
)

// SQLiteDSNs returns the data source names of the write and read pools of
// the SQLite file at path (":memory:" for a throw-away database of its own):
// the pragmas of each, synchronous as durability says.
func SQLiteDSNs(path string, durability Durability) (write, read string, err error) {
	if path == "" {
		return "", "", errors.New("database path is empty")
	}
	synchronous, err := durability.Synchronous()
	if err != nil {
		return "", "", err
	}
	common := "_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)"
	if path == ":memory:" {
		// The memdb VFS shares one in-memory database between all
		// connections that name it; a random name isolates each Open.
		name := "/tally-" + RandomHex(8)
		base := "file:" + name + "?vfs=memdb&" + common
		return base + "&_txlock=immediate", base, nil
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", "", fmt.Errorf("create database folder: %w", err)
		}
	}
	// synchronous follows DURABILITY: see Durability for what each survives.
	base := FileURI(path) + "?" + common + "&_pragma=journal_mode(WAL)&_pragma=synchronous(" + synchronous + ")"
	// _txlock=immediate takes the write lock at BEGIN, so the writer never
	// upgrades a read transaction and hits SQLITE_BUSY mid-transaction.
	//
	// The writer never checkpoints (wal_autocheckpoint=0): copying the WAL
	// into the database and its fsync would stall every caller queued behind
	// that commit. CheckpointLoop does it from its own connection instead.
	// temp_store=MEMORY keeps the per-job savepoints' sub-journals in RAM.
	// secure_delete overwrites deleted content, so erased rows do not
	// linger in free pages of the file.
	return base + "&_pragma=cache_size(-65536)&_pragma=temp_store(2)&_pragma=secure_delete(1)&_pragma=wal_autocheckpoint(0)&_txlock=immediate",
		base + "&_pragma=query_only(1)", nil
}

// FileURI is the SQLite URI of the database file at path, for
// database/sql's "sqlite" driver (parameters may follow after a '?').
// SQLite reads the name as a URI, where '#' would end the path and '?'
// start the parameters: unescaped, a file named "a#b.db" would silently
// be "a".
func FileURI(path string) string {
	return "file:" + strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
}

// WALRestartFrames is the WAL length (in frames of one 4 KiB page) past
// which the checkpoint loop has the WAL start over: 64 MiB.
const WALRestartFrames = 16384

// CheckpointLoop copies committed WAL frames into the database file from a
// connection of its own, without blocking the writer (PASSIVE), every
// interval until stop is closed; then it checkpoints once more and
// truncates the WAL.
//
// SQLite starts the WAL over from its beginning only when a write
// transaction begins with every frame already copied. Under steady load the
// writer commits while this loop copies, so that moment never comes: at
// 2,000 events/s the WAL file grew by about 85 MB a second, without bound.
// So once the WAL holds restartFrames frames, the loop copies twice more
// (each pass only what was committed during the previous one) and asks the
// writer to copy the last few frames itself, between two batches
// (Writer.loop): its next transaction then overwrites the WAL from the
// start. No journal_size_limit is set: truncating a WAL file that a burst
// made long stalled the next commit for 30 ms, while a WAL that starts over
// at 64 MiB stays near that size. Failures are logged (checkpointFailures).
func CheckpointLoop(db *sql.DB, w *Writer, interval time.Duration, restartFrames int, log *slog.Logger, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(interval)
	defer t.Stop()
	failures := checkpointFailures{log: log}
	for {
		select {
		case <-stop:
			if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil && log != nil {
				log.Warn("final WAL checkpoint failed; the WAL file stays and is copied after the next start", "err", err.Error())
			}
			return
		case <-t.C:
			var busy, frames, copied int
			err := db.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied)
			failures.report(err)
			if err != nil || frames < restartFrames {
				continue
			}
			// Copy what was committed during that pass, then during this
			// one, so that the writer's share is a few frames.
			for range 2 {
				_, err := db.Exec(`PRAGMA wal_checkpoint(PASSIVE)`)
				failures.report(err)
			}
			w.RequestCheckpoint()
		}
	}
}

// checkpointFailures logs the checkpoint loop's failures: one line when
// checkpoints start failing, one when they work again. The WAL grows until
// one succeeds, which the operator should know, but a pass every interval
// must not flood the log.
type checkpointFailures struct {
	log     *slog.Logger // nil: no log
	failing bool
}

// report records the outcome of one checkpoint.
func (c *checkpointFailures) report(err error) {
	switch {
	case c.log == nil:
	case err != nil && !c.failing:
		// SQLite's message names the condition, never a value.
		c.log.Warn("WAL checkpoints are failing; the WAL grows until one succeeds", "err", err.Error())
	case err == nil && c.failing:
		c.log.Info("WAL checkpoints work again")
	}
	c.failing = err != nil
}

func RandomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return hex.EncodeToString(b)
}
