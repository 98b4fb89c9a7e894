package storage

import (
	"encoding/json"
	"strings"
)

// Filters answered from day partials (docs/query-api.md#how-reports-stay-fast):
// a filter that tests only the dimension a partial is grouped by selects among
// the partial's rows, since every event (or visit) has exactly one shown value
// of it. The sums of the rows that pass add, and their visitors are the union
// of their sketches, so the answer is the scan's for the metrics that are sums
// over the rows: not visits or the session metrics under an event filter (a
// visit with two passing pages counts once), which planPartials leaves to the
// scan.

// valueFilter reports whether a partial's value passes a query's filters;
// it tests them as filterSQL's SQL does, on the shown value.
type valueFilter func(value string) bool

// singleFilterDim is the one dimension every condition of fs tests, or
// false when they test none, more than one, or a time dimension.
func singleFilterDim(fs []QueryFilter) (string, bool) {
	dim, ok := "", true
	filterDims(fs, func(d string) {
		switch {
		case TimeDimension(d) || d == anonDim:
			ok = false
		case dim == "":
			dim = d
		case dim != d:
			ok = false
		}
	})
	return dim, ok && dim != ""
}

// compileValueFilter is fs (all must hold) as a test of one value, or
// false when a condition is one filterSQL would refuse (the scan then
// reports it). The memo is per compiled filter: a report tests each value
// once per day of its range.
func compileValueFilter(fs []QueryFilter) (valueFilter, bool) {
	test, ok := compileAll(fs)
	if !ok {
		return nil, false
	}
	memo := map[string]bool{}
	return func(v string) bool {
		pass, seen := memo[v]
		if !seen {
			pass = test(v)
			memo[v] = pass
		}
		return pass
	}, true
}

// compileAll is fs as one test that holds when all of them do ("1" in
// SQL when fs is empty).
func compileAll(fs []QueryFilter) (valueFilter, bool) {
	return compileNode(QueryFilter{Op: "and", Children: fs})
}

// compileNode mirrors filterNode: and/or over children (an empty one
// holds), not over all of them, and a condition that holds when any value
// matches (none: never), negated for the _not operators. Case folding is
// SQLite's lower(): ASCII letters only.
func compileNode(f QueryFilter) (valueFilter, bool) {
	switch f.Op {
	case "and", "or":
		tests := make([]valueFilter, 0, len(f.Children))
		for _, c := range f.Children {
			t, ok := compileNode(c)
			if !ok {
				return nil, false
			}
			tests = append(tests, t)
		}
		if len(tests) == 0 {
			return func(string) bool { return true }, true
		}
		if f.Op == "and" {
			return func(v string) bool {
				for _, t := range tests {
					if !t(v) {
						return false
					}
				}
				return true
			}, true
		}
		return func(v string) bool {
			for _, t := range tests {
				if t(v) {
					return true
				}
			}
			return false
		}, true
	case "not":
		t, ok := compileAll(f.Children)
		if !ok {
			return nil, false
		}
		return func(v string) bool { return !t(v) }, true
	}
	values := f.Values
	if f.Fold {
		values = make([]string, len(f.Values))
		for i, x := range f.Values {
			values[i] = asciiLower(x)
		}
	}
	var match func(v, x string) bool
	switch f.Op {
	case "is", "is_not":
		match = func(v, x string) bool { return v == x }
	case "contains", "contains_not":
		match = strings.Contains
	case "matches", "matches_not":
		for _, x := range f.Values {
			if _, err := compilePattern(x); err != nil {
				return nil, false
			}
		}
		// The pattern itself is never folded (tally_match(?, lower(expr))).
		values = f.Values
		match = func(v, x string) bool {
			re, _ := compilePattern(x)
			return re.MatchString(v)
		}
	default:
		return nil, false
	}
	negate := strings.HasSuffix(f.Op, "_not")
	fold, exist := f.Fold, propMustExist(f)
	return func(v string) bool {
		if exist && v == NoneProp {
			return false
		}
		if fold {
			v = asciiLower(v)
		}
		for _, x := range values {
			if match(v, x) {
				return !negate
			}
		}
		return negate
	}, true
}

// asciiLower folds ASCII letters only, as SQLite's lower() does.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; 'A' <= c && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// filterKey names fs in a report cache key.
func filterKey(fs []QueryFilter) string {
	if len(fs) == 0 {
		return ""
	}
	b, _ := json.Marshal(fs)
	return string(b)
}
