package storage

import (
	"encoding/binary"
	"strings"
)

// A custom property's day partials (docs/query-api.md#how-reports-stay-fast)
// are kept only while small: a property of few values (a plan, a button) is
// read from 30 small rows, but one that names an order or a document per event
// would keep a row as large as the day's events. A day's partial of
// event:props:NAME with more than maxPropPartialValues distinct values is used
// for the query that computed it and not stored, so such a property keeps
// scanning, as every property did before.
//
// 1,000: measured, a day of 1,000 values of one visitor each encodes to
// 31 KB (37 KB at 3 visitors a value, 88 KB at 20), so 31 kept days of
// such a property stay within 1 to 3 MB at any event count, while
// properties such as a plan or a page title have a handful of values a
// day (docs/dashboard.md, First paint).
const maxPropPartialValues = 1000

// keepPartial reports whether a computed day partial of dim (encoded by
// encodePartial) may be stored.
func keepPartial(dim string, b []byte) bool {
	if isGoalDim(dim) {
		return len(b) <= maxGoalPartialBytes
	}
	if isFunnelDim(dim) {
		return len(b) <= maxFunnelPartialBytes
	}
	if !strings.HasPrefix(dim, PropPrefix) {
		return true
	}
	n, k := binary.Uvarint(b)
	return k > 0 && n <= maxPropPartialValues
}

// holdsValues reports whether the site's data holds dim in the days of
// blobs (their computed partials): for a custom property, whether any of
// its events has it. A query may name any property, so keeping the
// partials of names no event has would let a read key fill day_partials
// without limit (issue 29: 20 queries of random names over 91 days kept
// 1,800 rows); such a name is scanned at every query instead, which
// costs what the scan of an absent property costs. Other dimensions are
// the service's own or the site's goals.
func holdsValues(dim string, blobs [][]byte) bool {
	if !strings.HasPrefix(dim, PropPrefix) {
		return true
	}
	held := false
	for _, b := range blobs {
		_ = decodePartial(b, func(value string, _ [4]float64, _ []byte) {
			held = held || value != NoneProp
		})
		if held {
			return true
		}
	}
	return false
}
