package storage

import (
	"testing"
	"time"
)

// Events received just before a month ends may commit after a request of
// the new month rolled the quota book: they must not reset it.
func TestQuotaBookNeverRollsBack(t *testing.T) {
	t.Parallel()
	var q quotaBook
	endOfMarch := time.Date(2026, 3, 31, 23, 59, 59, 0, time.UTC)
	q.roll("2026-03")
	q.commit(endOfMarch, map[string]int{"web": 5})
	q.roll("2026-04") // a request on April 1st
	q.commit(endOfMarch.Add(2*time.Second), map[string]int{"web": 2})
	q.commit(endOfMarch, map[string]int{"web": 7}) // March events committed late
	if q.month != "2026-04" || q.used["web"] != 2 {
		t.Fatalf("got month %s with %d used, want 2026-04 with 2", q.month, q.used["web"])
	}
}
