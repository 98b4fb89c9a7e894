package storage

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/internal/dbtest"
	"github.com/tally-analytics/tally/internal/smallfs"
)

// holdFor shortens the time a refused write keeps the health check
// unavailable, so that a test sees the hold end.
func holdFor(db *DB, d time.Duration) {
	db.writer.HoldRefusalsFor(d)
}

// healthWithin polls WriteHealth until ok(err) holds, failing after limit.
func healthWithin(t *testing.T, db *DB, limit time.Duration, what string, ok func(error) bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := db.WriteHealth(context.Background())
		if ok(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("got write health %v after %v, want %s", err, limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// setWritable makes the writer's connection refuse writes (or take them
// again) the way a read-only file (SQLite) or a standby (PostgreSQL) does.
func setWritable(t *testing.T, db *DB, writable bool) {
	t.Helper()
	stmt := map[bool]string{true: `PRAGMA query_only = 0`, false: `PRAGMA query_only = 1`}
	if dbtest.Postgres() {
		stmt = map[bool]string{true: `SET default_transaction_read_only = off`, false: `SET default_transaction_read_only = on`}
	}
	if _, err := db.write.Exec(stmt[writable]); err != nil {
		t.Fatal(err)
	}
}

// A write refused because the database cannot be written keeps the health
// check unavailable for the hold, even when commits succeed in between
// (on a disk nearly full a single event fits where a batch does not): the
// health check reports what intake meets. The writer logs one line when
// writes start failing and one when the hold is over.
func TestHealthHoldsARefusal(t *testing.T) {
	t.Parallel()
	var logs lockedLog // written by the writer's goroutine, on any commit
	db, err := openTestDB(t, context.Background(), Options{Path: filepath.Join(t.TempDir(), "a.db"), Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	withSites(t, db, "s1")
	ctx := context.Background()
	ev := func(id string) []IngestEvent {
		return []IngestEvent{{ID: id, SiteID: "s1", Type: "pageview", AnonID: "v1", TS: db.now(), Raw: []byte(`{}`)}}
	}
	const hold = time.Second
	holdFor(db, hold)

	setWritable(t, db, false)
	if _, err := db.Ingest(ctx, ev("e1"), nil, nil); fault.Code(err) != fault.Unavailable {
		t.Fatalf("got ingest error %v on a read-only database, want unavailable", err)
	}
	refused := time.Now()
	setWritable(t, db, true)
	if _, err := db.Ingest(ctx, ev("e2"), nil, nil); err != nil {
		t.Fatalf("ingest once writable again: %v", err)
	}
	err = db.WriteHealth(ctx)
	if held := time.Since(refused) < hold; held {
		if e := fault.As(err); e == nil || e.Code != fault.Unavailable || !strings.Contains(e.Message, "read-only") {
			t.Fatalf("got write health %v within the hold after a refusal, want unavailable, read-only", err)
		}
	}
	healthWithin(t, db, 5*time.Second, "nil once the hold is over", func(err error) bool { return err == nil })
	if got := strings.Count(logs.String(), "database writes are failing"); got != 1 {
		t.Errorf("got %d lines saying writes fail, want 1:\n%s", got, logs.String())
	}
	// The line saying writes work again comes with the first commit after
	// the hold.
	if _, err := db.Ingest(ctx, ev("e3"), nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(logs.String(), "database writes work again"); got != 1 {
		t.Errorf("got %d lines saying writes work again, want 1:\n%s", got, logs.String())
	}
}

// On SQLite the health check reports a disk with less room than the
// largest write may need as full, before any write fails, and a write
// refused for room as long as the hold lasts, though smaller ones commit.
func TestHealthFollowsTheRoomLeft(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "fills the disk under the SQLite file")
	dir := smallfs.Mount(t, "24m")
	db := openTest(t, filepath.Join(dir, "a.db"))
	withSites(t, db, "s1")
	ctx := context.Background()
	n := 0
	ingest := func() error {
		n++
		_, err := db.Ingest(ctx, []IngestEvent{{ID: fmt.Sprintf("e%d", n), SiteID: "s1", Type: "pageview", AnonID: "v1", TS: db.now(), Raw: []byte(`{}`)}}, nil, nil)
		return err
	}
	if err := ingest(); err != nil {
		t.Fatal(err)
	}
	if err := db.WriteHealth(ctx); err != nil {
		t.Fatalf("got write health %v on an empty disk, want nil", err)
	}
	const hold = time.Second
	holdFor(db, hold)

	// Room for a small write but less than healthMinFree: no write failed
	// yet, and a single event still commits, but health says full.
	free := smallfs.Fill(t, dir, 256<<10)
	if err := ingest(); err != nil {
		t.Fatalf("ingest with 256 KiB left: %v", err)
	}
	err := db.WriteHealth(ctx)
	if e := fault.As(err); e == nil || e.Code != fault.Unavailable || !strings.Contains(e.Message, "disk is full") || !strings.Contains(e.Message, "KiB left") {
		t.Fatalf("got write health %v with 256 KiB left, want unavailable, disk full, the room left", err)
	}
	free()

	// More room than healthMinFree, but a write needs more than that:
	// refused, and health follows the refusal (by the hold, and by the
	// room its WAL frames took before the disk ran out) although a single
	// event still fits.
	free = smallfs.Fill(t, dir, 3<<20)
	if err := db.WriteHealth(ctx); err != nil {
		t.Fatalf("got write health %v with 3 MiB left, want nil", err)
	}
	big := func(tx *writeTx) error {
		tx.MarkWritten()
		_, err := tx.Exec(`INSERT INTO schema_migrations(version, name, applied_at) VALUES (-1, hex(randomblob(3145728)), '')`)
		return err
	}
	if err := db.writer.submit(ctx, 1, big); fault.Code(err) != fault.Unavailable {
		t.Fatalf("got %v for a 6 MiB write with 3 MiB left, want unavailable", err)
	}
	refused := time.Now()
	if err := ingest(); err != nil {
		t.Fatalf("ingest of one event after the refusal: %v", err)
	}
	err = db.WriteHealth(ctx)
	if held := time.Since(refused) < hold; held {
		if e := fault.As(err); e == nil || e.Code != fault.Unavailable || !strings.Contains(e.Message, "disk is full") {
			t.Fatalf("got write health %v within the hold after a refusal for room, want unavailable, disk full", err)
		}
	}
	free()
	healthWithin(t, db, 5*time.Second, "nil once room is back and the hold is over", func(err error) bool { return err == nil })
}

// lockedLog is a log's text that the writer's goroutine writes while a
// test reads it.
type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
