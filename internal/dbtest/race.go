package dbtest

import "testing"

// SkipUnderRace skips t in a binary built with the race detector, saying
// why: a test of query results over much data in one goroutine, which the
// race detector slows some eight times over (modernc.org/sqlite's C made
// Go is all memory accesses) and finds nothing in. CI runs such a test
// without it, on both backends (docs/development.md#ci).
func SkipUnderRace(t testing.TB, why string) {
	t.Helper()
	if Race {
		t.Skip("not under the race detector: " + why)
	}
}
