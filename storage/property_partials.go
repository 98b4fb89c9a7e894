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
