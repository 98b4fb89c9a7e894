package storage

import (
	"fmt"
	"regexp/syntax"
	"runtime"
	"strings"
	"testing"

	"github.com/tally-analytics/tally/fault"
)

// TestPatternBounds: a pattern is refused, as invalid_query, when it is
// too long, not RE2, or compiles to more than MaxPatternInsts
// instructions, and patternSize never estimates a program smaller than
// it compiles to.
func TestPatternBounds(t *testing.T) {
	t.Parallel()
	x240 := strings.Repeat("x", 240)
	for _, c := range []struct {
		pattern string
		ok      bool
	}{
		{`^/blog/.*$`, true},
		{strings.Repeat("a", MaxPatternLength), true},
		{strings.Repeat("a", MaxPatternLength+1), false},
		{`[a-z]{1000}`, true},
		{`\pL{1000}`, true},
		{`(?i)^(?:abcdefghij){180}$`, true},
		{`^(?:a|b|c|d|e|f|g|h|i|j){190}$`, true},
		{`^(?:(?:a|b)?){900}$`, true},
		{`^(?:[^/]*/){999}$`, false}, // 3,001 instructions
		{"(?:" + x240 + "){8}", true},
		{"(?:" + x240 + "){9}", false},
		{"(?:" + x240 + "){1000}", false},
		{"(?:" + x240 + "){2,}", true},
		{`(((a{10}){10}){10})`, true},
		{`((((a{10}){10}){10}){2})`, false},
		{`(a`, false},
	} {
		err := CheckPattern(c.pattern)
		if (err == nil) != c.ok {
			t.Errorf("%.40q: got error %v, want ok %v", c.pattern, err, c.ok)
		}
		if err != nil && fault.Code(err) != fault.InvalidQuery {
			t.Errorf("%.40q: got code %s, want %s", c.pattern, fault.Code(err), fault.InvalidQuery)
		}
		tree, perr := syntax.Parse(c.pattern, syntax.Perl)
		if perr != nil {
			continue
		}
		est := patternSize(tree, 1<<30)
		prog, cerr := syntax.Compile(tree.Simplify())
		if cerr != nil {
			t.Fatalf("%.40q: %v", c.pattern, cerr)
		}
		if est < len(prog.Inst) {
			t.Errorf("%.40q: got estimate %d, want at least the %d instructions it compiles to", c.pattern, est, len(prog.Inst))
		}
	}
}

// TestPatternCacheBounded: compiling many distinct patterns, each at the
// bound, keeps at most patternCacheInsts of them (about 10 MB), where an
// unbounded cache kept all (here about 90 MB).
func TestPatternCacheBounded(t *testing.T) {
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	const n = 1000
	for i := range n {
		// About 1,930 instructions, each pattern its own.
		p := fmt.Sprintf("(?:%s){8}%06d", strings.Repeat("y", 240), i)
		if err := CheckPattern(p); err != nil {
			t.Fatal(err)
		}
		if got := patterns.size(); got > patternCacheInsts {
			t.Fatalf("after %d patterns: got %d instructions cached, want at most %d", i+1, got, patternCacheInsts)
		}
	}
	grown := int64(heap()) - int64(before)
	if grown > 24<<20 {
		t.Errorf("got the heap %d MB larger after %d patterns, want at most 24 MB", grown>>20, n)
	}
}
