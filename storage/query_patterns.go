package storage

import (
	"regexp"
	"regexp/syntax"
	"sync"

	"github.com/tally-analytics/tally/fault"
)

// Patterns of matches filters (docs/benchmarks.md#query-api, Bad input): RE2
// syntax (Go's regexp), which matches in time linear in the input, so no
// pattern can backtrack catastrophically. What a pattern costs is its
// compiled program: about 50 bytes of memory an instruction, and each
// row matched steps through it, so a short pattern with a counted
// repetition (`(?:<240 bytes>){1000}`: 240,000 instructions, 11.5 MB,
// 180 ms to compile) is refused before it is compiled.

// MaxPatternLength bounds a matches filter's pattern, in bytes.
const MaxPatternLength = 256

// MaxPatternInsts bounds the program a pattern compiles to, as
// patternSize estimates it: 2,000 instructions is about 100 KB (measured:
// 41 to 66 bytes an instruction, anchored or not), while a pattern of
// 256 bytes without counted repetition compiles to at most about 500, and
// `[a-z]{1000}` to 1,002.
const MaxPatternInsts = 2000

// patternCacheInsts bounds the compiled patterns kept, by their estimated
// instructions: about 10 MB, room for the patterns of several queries at
// their bounds (docs/benchmarks.md#query-api: 20 a query) and a site's goals.
const patternCacheInsts = 200_000

// patternCache keeps compiled patterns: SQLite's tally_match looks its
// pattern up for every row it tests, and compiling one costs from about
// 2 µs (`^/blog/`) to 2 ms (at MaxPatternInsts), against well under a
// microsecond for the lookup. It is emptied when a pattern would take it
// past patternCacheInsts, as pathMemo is: the patterns of the queries
// running then are compiled again, once each.
type patternCache struct {
	mu    sync.RWMutex
	m     map[string]cachedPattern
	insts int
}

type cachedPattern struct {
	re    *regexp.Regexp
	insts int
}

var patterns = &patternCache{m: map[string]cachedPattern{}}

func (c *patternCache) get(p string) (*regexp.Regexp, bool) {
	c.mu.RLock()
	e, ok := c.m[p]
	c.mu.RUnlock()
	return e.re, ok
}

func (c *patternCache) put(p string, re *regexp.Regexp, insts int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[p]; ok {
		return
	}
	if c.insts+insts > patternCacheInsts {
		clear(c.m)
		c.insts = 0
	}
	c.m[p] = cachedPattern{re, insts}
	c.insts += insts
}

// size is the cache's estimated instructions (tests).
func (c *patternCache) size() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.insts
}

// compilePattern compiles a matches pattern: at most MaxPatternLength
// bytes of RE2 syntax whose program is at most MaxPatternInsts
// instructions.
func compilePattern(p string) (*regexp.Regexp, error) {
	if re, ok := patterns.get(p); ok {
		return re, nil
	}
	if len(p) > MaxPatternLength {
		return nil, fault.Errorf(fault.InvalidQuery, "a matches pattern may be at most %d bytes, this one is %d", MaxPatternLength, len(p))
	}
	// The parse is of the text as written, repetitions not expanded: it
	// costs microseconds whatever the pattern compiles to.
	tree, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return nil, invalidPattern(err)
	}
	n := patternSize(tree, MaxPatternInsts+1)
	if n > MaxPatternInsts {
		return nil, fault.Errorf(fault.InvalidQuery, "a matches pattern may compile to at most %d instructions, this one to more: "+
			"a counted repetition such as {1000} repeats what it applies to; repeat less, or less text", MaxPatternInsts)
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, invalidPattern(err)
	}
	patterns.put(p, re, n)
	return re, nil
}

func invalidPattern(err error) error {
	return fault.Errorf(fault.InvalidQuery, "a matches pattern is not a valid RE2 regular expression: %v", err)
}

// CheckPattern returns the error a matches filter's pattern would give.
func CheckPattern(p string) error {
	_, err := compilePattern(p)
	return err
}

// patternSize estimates, from above, the instructions of re's compiled
// program (regexp/syntax's Simplify, then Compile: a fail and a match
// instruction around re's own), counting up to most and no further, so
// that a repetition of a repetition cannot overflow.
func patternSize(re *syntax.Regexp, most int) int {
	return min(nodeSize(re, most)+2, most)
}

func nodeSize(re *syntax.Regexp, most int) int {
	add := func(a, b int) int { return min(a+b, most) }
	mul := func(a, b int) int {
		if a != 0 && b > most/a {
			return most
		}
		return a * b
	}
	subs := 0
	for _, s := range re.Sub {
		subs = add(subs, nodeSize(s, most))
	}
	switch re.Op {
	case syntax.OpLiteral:
		return max(len(re.Rune), 1)
	case syntax.OpCapture:
		return add(subs, 2)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		return add(subs, 1)
	case syntax.OpAlternate:
		return add(subs, len(re.Sub))
	case syntax.OpConcat:
		return max(subs, 1)
	case syntax.OpRepeat:
		// x{n,m}: n copies of x, then m-n optional ones (x and a branch
		// each); x{n,}: n copies, the last with a loop back; x{0,}: x*.
		switch {
		case re.Max < 0 && re.Min == 0:
			return add(subs, 1)
		case re.Max < 0:
			return add(mul(subs, re.Min), 1)
		case re.Max == 0:
			return 1
		}
		return add(mul(subs, re.Min), mul(add(subs, 1), re.Max-re.Min))
	}
	// One instruction: a class, any character, an assertion, empty.
	return add(subs, 1)
}
