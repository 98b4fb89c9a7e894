package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestSessionIDsAsInsertedAlone checks that sessions queued and inserted
// later (insertSessions), one by one or together with RETURNING, take the
// ids they took inserted at once: a session queued before a merge deletes
// the table's largest id goes in first, and so does not take that id
// again. It also checks that the memo learns the ids: the next event in
// order joins the new session through it.
func TestSessionIDsAsInsertedAlone(t *testing.T) {
	t.Parallel()
	for _, returning := range []bool{false, true} {
		t.Run(fmt.Sprintf("returning=%v", returning), func(t *testing.T) { testSessionIDs(t, returning) })
	}
}

func testSessionIDs(t *testing.T, returning bool) {
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	ctx := context.Background()
	if returning {
		if err := db.ingest.prepareSessionReturning(ctx, db.write); err != nil {
			t.Fatal(err)
		}
	}
	at := func(h, m int) time.Time { return time.Date(2026, 1, 1, h, m, 0, 0, time.UTC) }
	n := 0
	event := func(anon string, ts time.Time) IngestEvent {
		n++
		return IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), SiteID: "s", Type: "pageview",
			AnonID: anon, TS: ts, Raw: []byte(`{}`)}
	}
	ingest := func(events ...IngestEvent) {
		t.Helper()
		if _, err := db.Ingest(ctx, events, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(anon string) (out []int64) {
		t.Helper()
		rows, err := db.read.Query(`SELECT id FROM sessions WHERE anon_id = ? ORDER BY id`, anon)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			rows.Scan(&id)
			out = append(out, id)
		}
		return out
	}
	// a's later visit first (id 1), then its earlier one (id 2, the
	// largest).
	ingest(event("a", at(11, 0)))
	ingest(event("a", at(10, 0)))
	if got := ids("a"); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("got ids %v, want [1 2]", got)
	}
	// One run: b's first visit, then an event of a's that bridges its
	// visits, merging id 2 into id 1.
	ingest(event("b", at(12, 0)), event("a", at(10, 30)))
	if got := ids("a"); len(got) != 1 || got[0] != 1 {
		t.Fatalf("a: got ids %v, want [1]", got)
	}
	if got := ids("b"); len(got) != 1 || got[0] != 3 {
		t.Fatalf("b: got ids %v, want [3], as inserted before the merge", got)
	}
	// b's next event, in order, alone: the memo holds b's visit by id 3.
	ingest(event("b", at(12, 5)))
	var count int64
	if err := db.read.QueryRow(`SELECT event_count FROM sessions WHERE id = 3`).Scan(&count); err != nil {
		t.Fatal(err)
	}
	if count != 2 {
		t.Fatalf("b's visit: got %d events, want 2", count)
	}

	// Many new visitors in one run: a statement per power of two (64,
	// 32, 4, 2, 1 rows), each session under the id of its order.
	var batch []IngestEvent
	for i := range 103 {
		batch = append(batch, event(fmt.Sprintf("v%03d", i), at(14, 0)))
	}
	ingest(batch...)
	for i := range 103 {
		if got := ids(fmt.Sprintf("v%03d", i)); len(got) != 1 || got[0] != int64(4+i) {
			t.Fatalf("v%03d: got ids %v, want [%d]", i, got, 4+i)
		}
	}
	// And the memo knows each: their next events join them.
	batch = batch[:0]
	for i := range 103 {
		batch = append(batch, event(fmt.Sprintf("v%03d", i), at(14, 10)))
	}
	ingest(batch...)
	var visits, events int64
	db.read.QueryRow(`SELECT COUNT(*), SUM(event_count) FROM sessions WHERE anon_id LIKE 'v%'`).Scan(&visits, &events)
	if visits != 103 || events != 206 {
		t.Fatalf("got %d visits of %d events, want 103 of 206", visits, events)
	}
}
