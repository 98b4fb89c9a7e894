package storage

import (
	"slices"
	"strings"
)

// Lock order. A write that touches several rows of one table (the rollups
// of a run of intake, of an erasure, the partials of the days they change)
// touches them in the order of their keys, never in a map's: two writers
// that lock rows as they write them (several instances on one PostgreSQL
// database, issue 17) then take the rows they share in the same order,
// and neither can wait for a row the other holds while holding one it
// waits for. On SQLite, where the writer is alone, the order changes
// nothing but the order of the statements.

// sortedKeys returns m's keys in the order of compare.
func sortedKeys[K comparable, V any](m map[K]V, compare func(a, b K) int) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compare)
	return keys
}

// The comparisons stop at the first column that differs: most keys of a
// run share their site and day.

func compareDayKeys(a, b dayKey) int {
	if c := strings.Compare(a.site, b.site); c != 0 {
		return c
	}
	if c := strings.Compare(a.day, b.day); c != 0 {
		return c
	}
	return strings.Compare(a.typ, b.typ)
}

func compareDimKeys(a, b dimKey) int {
	if c := strings.Compare(a.site, b.site); c != 0 {
		return c
	}
	if c := strings.Compare(a.day, b.day); c != 0 {
		return c
	}
	if c := strings.Compare(a.dim, b.dim); c != 0 {
		return c
	}
	return strings.Compare(a.value, b.value)
}

func comparePairs(a, b [2]string) int {
	if c := strings.Compare(a[0], b[0]); c != 0 {
		return c
	}
	return strings.Compare(a[1], b[1])
}
