package storage

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/bits"
)

// A profile's traits are merged in Go rather than by SQLite's json_patch,
// so that the statement that writes them is plain SQL on every backend
// (issue 17). Within the profile caps, mergeProfile gives the bytes
// json_patch(old, json(patch)) gave (TestTraitsMergeMatchesSQLite): an RFC
// 7396 merge patch, "later keys win" in docs/intake.md#identity-and-sessions,
// that keeps the order of names and the text of values, so a profile's
// stored text is what it would have been.

// maxTraitsDepth is how deeply SQLite's JSON parser lets arrays and
// objects nest (JSON_MAX_DEPTH): deeper traits were refused by json(), and
// still are.
const maxTraitsDepth = 1000

// errBadTraits is traits that are not JSON, or nest too deeply: the request
// that sent them fails alone (see intake.runMerged), as it did when
// SQLite's json() refused them.
var errBadTraits = errors.New("storage: traits are not valid JSON")

// A profile is capped (docs/intake.md#profile-caps): one
// site id could otherwise grow a profile without limit, and every merge
// rewrote all of it inside the writer, holding up every tenant's intake.
const (
	// MaxProfileTraits is the most top-level traits a profile holds.
	MaxProfileTraits = 1000
	// MaxProfileBytes is the most bytes a profile's stored traits text
	// holds: what one Segment message may carry (32 KB).
	MaxProfileBytes = 32 << 10
)

// profileCaps are the caps a merge keeps; nil keeps none (below the top
// level, where the top level's byte count bounds the whole).
type profileCaps struct{ keys, bytes int }

var defaultCaps = &profileCaps{MaxProfileTraits, MaxProfileBytes}

// noCaps are caps no profile reaches: migrate-to merges two stored
// profiles whose keys became equal (copy_merge_pg.go) without them, so
// that a copy loses no trait.
var noCaps = &profileCaps{1 << 30, 1 << 30}

// mergeTraits merges patch into the profile whose stored traits are old
// (nil: none yet) under caps c, as mergeProfile does, and returns the
// profile and the names the caps kept out.
func mergeTraits(old, patch []byte, c *profileCaps) (*jsonNode, [][]byte, error) {
	p, err := parseTraits(patch)
	if err != nil {
		return nil, nil, err
	}
	var t *jsonNode
	if old != nil {
		if t, err = parseTraits(old); err != nil {
			return nil, nil, err
		}
	}
	t, dropped := mergeProfile(t, p, c)
	return t, dropped, nil
}

// mergeProfile merges one identify's traits, patch, into a profile's
// traits t (nil: the user has no profile yet) and returns the result (t
// itself, changed, when t is an object) and the names (quoted, as sent) of
// the patch's top-level members that were not merged because of caps c:
//   - a new profile takes patch as sent, with its nulls and duplicate
//     names (as SQLite's json() stored it), member by member while it
//     stays within c;
//   - otherwise a patch that is not an object replaces the traits, and
//     traits that are not an object count as an empty one;
//   - each patch member, in order, finds the first member of the traits
//     with the same name: null deletes it, an object is merged into it,
//     anything else replaces it; with no such member, a non-null value is
//     appended (an object without its null members, recursively);
//   - names match when their text is the same or, when one of the two has
//     escapes, when their decoded text is;
//   - numbers and strings keep their text as sent (escapes, exponents,
//     digits beyond float64), and duplicate names are kept.
//
// Those are SQLite's json_patch rules (TestTraitsMergeMatchesSQLite). Past
// the caps, existing traits still change and go, but a new name is not
// appended once the profile holds c.keys names, and no change is made that
// would take the text past c.bytes; an object merged into an object
// counts as growing the text by the patch's whole size, an upper bound
// (size(merge(a, p)) <= size(a) + size(p)), so that nothing needs undoing.
func mergeProfile(t, patch *jsonNode, c *profileCaps) (*jsonNode, [][]byte) {
	var dropped [][]byte
	switch {
	case t == nil && patch.object:
		if patch.live <= c.keys && patch.size() <= c.bytes {
			return patch, nil
		}
		n := &jsonNode{object: true}
		for _, m := range patch.members {
			if n.live >= c.keys || n.size()+n.growth(m.name, m.val) > c.bytes {
				dropped = append(dropped, m.name)
				continue
			}
			n.add(m.name, m.val)
		}
		return n, dropped
	case !patch.object:
		if patch.size() > c.bytes {
			if t == nil {
				t = &jsonNode{object: true}
			}
			return t, [][]byte{nil}
		}
		return patch, nil
	case !t.object:
		t = &jsonNode{object: true}
	}
	for _, pm := range patch.members {
		if !t.patchMember(pm, c) {
			dropped = append(dropped, pm.name)
		}
	}
	return t, dropped
}

// jsonNode is a JSON value as a merge patch sees it: an object's members
// in order, anything else as its text without insignificant whitespace.
// An object keeps the size of its text as it changes, and an index of its
// names once it has more than a few, so that a merge costs what the patch
// holds, not what the profile does.
type jsonNode struct {
	object bool
	text   []byte // the value's text, when not an object
	// members are an object's members in order; a deleted one stays, its
	// val nil, until compact.
	members []*jsonMember
	live    int // members not deleted
	inner   int // bytes of the live members' names, colons and values
	seq     int // the next member's number
	// index finds members by name once scans of them have cost more
	// than building it would (find).
	index   *nameIndex
	scanned int // members compared by scans so far, while index is nil
}

// jsonMember is one name and value of an object; name is the name's text
// with its quotes and escapes, as sent.
type jsonMember struct {
	name    []byte
	val     *jsonNode // nil once deleted
	seq     int       // its place in the object: members only ever go at the end
	escaped bool      // name has escapes
}

func (n *jsonNode) isNull() bool { return !n.object && string(n.text) == "null" }

// size is the length of n's text without whitespace (appendTo's).
func (n *jsonNode) size() int {
	if !n.object {
		return len(n.text)
	}
	return 2 + n.inner + max(n.live-1, 0)
}

// growth is how much adding the member name: v to object n lengthens
// its text.
func (n *jsonNode) growth(name []byte, v *jsonNode) int {
	g := len(name) + 1 + v.size()
	if n.live > 0 {
		g++ // the comma
	}
	return g
}

// patchMember merges one member of a patch into object t, as mergeProfile
// says, and reports whether it did: under caps c (nil: none) a change past
// them is not made.
func (t *jsonNode) patchMember(pm *jsonMember, c *profileCaps) bool {
	m := t.find(pm.name)
	switch {
	case m != nil && pm.val.isNull():
		t.remove(m)
	case m != nil && m.val.object && pm.val.object:
		if c != nil && t.size()+pm.val.size() > c.bytes {
			return false
		}
		before := m.val.size()
		for _, x := range pm.val.members {
			m.val.patchMember(x, nil)
		}
		t.inner += m.val.size() - before
	case m != nil:
		v := pruned(pm.val)
		d := v.size() - m.val.size()
		if c != nil && d > 0 && t.size()+d > c.bytes {
			return false
		}
		t.inner += d
		m.val = v
	case !pm.val.isNull():
		v := pruned(pm.val)
		if c != nil && (t.live >= c.keys || t.size()+t.growth(pm.name, v) > c.bytes) {
			return false
		}
		t.add(pm.name, v)
	}
	return true
}

// pruned is what v becomes when merged into nothing: v itself, or for an
// object a new one without its null members, recursively.
func pruned(v *jsonNode) *jsonNode {
	if !v.object {
		return v
	}
	n := &jsonNode{object: true}
	for _, m := range v.members {
		n.patchMember(m, nil)
	}
	return n
}

// indexFrom is how many members an object holds before it may keep an
// index of their names: below, a scan is as quick.
const indexFrom = 8

// find returns the first live member of object n whose name matches name.
// It scans the members until the scans have compared a few times as many
// members as the object holds, then builds the index: a few patch members
// merged into a large profile (the usual identify) cost a scan, many cost
// little more than the index, whichever is less, times a constant.
func (n *jsonNode) find(name []byte) *jsonMember {
	if n.index == nil && n.live > indexFrom && n.scanned > 4*len(n.members) {
		n.index = newNameIndex(n.members, n.live)
	}
	if n.index != nil {
		return n.index.find(name)
	}
	for i, m := range n.members {
		if m.val != nil && sameName(m.name, name) {
			n.scanned += i + 1
			return m
		}
	}
	n.scanned += len(n.members)
	return nil
}

// add appends the member name: v to object n.
func (n *jsonNode) add(name []byte, v *jsonNode) {
	m := &jsonMember{name: name, val: v, seq: n.seq, escaped: bytes.IndexByte(name, '\\') >= 0}
	n.seq++
	n.inner += len(name) + 1 + v.size()
	n.live++
	n.members = append(n.members, m)
	if n.index != nil {
		n.index.add(m)
	}
}

// remove deletes member m of object n. Its slot stays until the deleted
// outnumber the live, so that a run of deletes costs no more than its
// length.
func (n *jsonNode) remove(m *jsonMember) {
	n.inner -= len(m.name) + 1 + m.val.size()
	n.live--
	if n.index != nil {
		n.index.remove(m)
	}
	m.val = nil
	if dead := len(n.members) - n.live; dead > n.live+indexFrom {
		live := n.members[:0]
		for _, x := range n.members {
			if x.val != nil {
				live = append(live, x)
			}
		}
		clear(n.members[len(live):])
		n.members = live
	}
}

// nameIndex finds an object's members by name exactly as sameName matches
// them, each lookup in a few map reads, by keeping lists of the live
// members, each in member order: those whose names have no escapes by
// their text (raw, the quotes left out), those of them that are not ASCII
// by their decoded text too (plain), and those whose names have escapes by
// their decoded text (esc). Every member of a list a lookup reads matches
// the name looked up, so the first one is the answer: a name without
// escapes matches the same text (raw) and the escaped names of the same
// decoded text (esc); a name with escapes matches every name of the same
// decoded text (esc, plain, and raw, where an ASCII name's text is its
// decoded text; no other raw text is a decoded text, see nameKey).
type nameIndex struct {
	raw, plain, esc map[string][]*jsonMember
}

func newNameIndex(members []*jsonMember, live int) *nameIndex {
	x := &nameIndex{raw: make(map[string][]*jsonMember, live), plain: map[string][]*jsonMember{}, esc: map[string][]*jsonMember{}}
	for _, m := range members {
		if m.val != nil {
			x.add(m)
		}
	}
	return x
}

// lists returns the lists that hold m, and its key in each.
func (x *nameIndex) lists(m *jsonMember) (l1 map[string][]*jsonMember, k1 string, l2 map[string][]*jsonMember, k2 string) {
	if m.escaped {
		return x.esc, nameKey(m.name), nil, ""
	}
	raw := m.name[1 : len(m.name)-1]
	if ascii(raw) {
		return x.raw, string(raw), nil, ""
	}
	return x.raw, string(raw), x.plain, nameKey(m.name)
}

func (x *nameIndex) add(m *jsonMember) {
	l1, k1, l2, k2 := x.lists(m)
	l1[k1] = append(l1[k1], m)
	if l2 != nil {
		l2[k2] = append(l2[k2], m)
	}
}

func (x *nameIndex) remove(m *jsonMember) {
	l1, k1, l2, k2 := x.lists(m)
	dropMember(l1, k1, m)
	if l2 != nil {
		dropMember(l2, k2, m)
	}
}

// dropMember removes m from the list l[key], keeping the others' order.
func dropMember(l map[string][]*jsonMember, key string, m *jsonMember) {
	list := l[key]
	for i, x := range list {
		if x == m {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(l, key)
	} else {
		l[key] = list
	}
}

func (x *nameIndex) find(name []byte) *jsonMember {
	key := nameKey(name)
	var first *jsonMember
	take := func(l []*jsonMember) {
		if len(l) > 0 && (first == nil || l[0].seq < first.seq) {
			first = l[0]
		}
	}
	if bytes.IndexByte(name, '\\') < 0 {
		take(x.raw[string(name[1:len(name)-1])])
		take(x.esc[key])
	} else {
		take(x.esc[key])
		take(x.plain[key])
		take(x.raw[key])
	}
	return first
}

// nameKey is the decoded text of a member name (quoted, as sent), up to
// its first character 0, as sameName compares names with escapes: its
// characters below 0x80 as bytes, others as 0xff and three bytes of their
// value, so that two names have the same key exactly when sameName
// decodes them to the same characters. The byte after an 0xff is below
// 0x20 (a character is at most 21 bits), which JSON text never holds
// unescaped: a key holding 0xff is no name's raw text.
func nameKey(name []byte) string {
	s := name[1 : len(name)-1]
	if bytes.IndexByte(s, '\\') < 0 && ascii(s) {
		return string(s) // JSON text holds no character 0 unescaped
	}
	key := make([]byte, 0, len(s))
	for {
		var c rune
		c, s = nameChar(s)
		switch {
		case c == 0:
			return string(key)
		case c < 0x80:
			key = append(key, byte(c))
		default:
			key = append(key, 0xff, byte(c>>16), byte(c>>8), byte(c))
		}
	}
}

func ascii(s []byte) bool {
	for _, c := range s {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// sameName tells whether two member names (quoted, as sent) match as
// json_patch matches them: names without escapes by their bytes, others
// character by character, escapes decoded, up to the first character 0
// (so "a\u0000b" matches "a\u0000c", as it does in SQLite).
func sameName(a, b []byte) bool {
	a, b = a[1:len(a)-1], b[1:len(b)-1]
	if bytes.IndexByte(a, '\\') < 0 && bytes.IndexByte(b, '\\') < 0 {
		return bytes.Equal(a, b)
	}
	for {
		var ca, cb rune
		ca, a = nameChar(a)
		cb, b = nameChar(b)
		if ca != cb {
			return false
		}
		if ca == 0 {
			return true
		}
	}
}

// nameChar decodes the first character of a name's text as SQLite's
// jsonLabelCompareEscaped reads it, and returns it and the rest: 0 at the
// end; a byte from 0xc0 up starts a UTF-8 sequence of its continuation
// bytes (at most 4 bytes, not checked further); a \u escape of a high
// surrogate followed by one of a low surrogate is one character, and any
// other \u escape is its code unit.
func nameChar(s []byte) (rune, []byte) {
	if len(s) == 0 {
		return 0, s
	}
	c := s[0]
	if c != '\\' {
		if c < 0xc0 {
			return rune(c), s[1:]
		}
		r := rune(c) & []rune{0x1f, 0x0f, 0x07, 0x03, 0x01, 0x00}[min(bits.LeadingZeros8(^c)-2, 5)]
		i := 1
		for i < min(len(s), 4) && s[i]&0xc0 == 0x80 {
			r = r<<6 | rune(s[i]&0x3f)
			i++
		}
		return r, s[i:]
	}
	switch s[1] {
	case 'b':
		return '\b', s[2:]
	case 'f':
		return '\f', s[2:]
	case 'n':
		return '\n', s[2:]
	case 'r':
		return '\r', s[2:]
	case 't':
		return '\t', s[2:]
	case 'u':
		r := hex4(s[2:])
		if r&0xfc00 == 0xd800 && len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
			if lo := hex4(s[8:]); lo&0xfc00 == 0xdc00 {
				return (r&0x3ff)<<10 + lo&0x3ff + 0x10000, s[12:]
			}
		}
		return r, s[6:]
	default: // " \ /
		return rune(s[1]), s[2:]
	}
}

func hex4(s []byte) rune {
	var r rune
	for _, c := range s[:4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		default:
			r |= rune(c-'A') + 10
		}
	}
	return r
}

// appendTo appends n's text, without whitespace, to b.
func (n *jsonNode) appendTo(b []byte) []byte {
	if !n.object {
		return append(b, n.text...)
	}
	b = append(b, '{')
	first := true
	for _, m := range n.members {
		if m.val == nil {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, m.name...)
		b = append(b, ':')
		b = m.val.appendTo(b)
	}
	return append(b, '}')
}

// parseTraits parses one JSON value (RFC 8259, at most maxTraitsDepth
// arrays and objects deep).
func parseTraits(src []byte) (*jsonNode, error) {
	if !json.Valid(src) {
		return nil, errBadTraits
	}
	p := traitsParser{src: src}
	p.space()
	n, ok := p.value(0)
	if !ok {
		return nil, errBadTraits
	}
	return n, nil
}

// traitsParser reads text json.Valid accepted.
type traitsParser struct {
	src []byte
	i   int
}

func (p *traitsParser) space() {
	for p.i < len(p.src) {
		switch p.src[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// value reads the value at p.i and the whitespace after it; ok is false
// when it nests deeper than maxTraitsDepth.
func (p *traitsParser) value(depth int) (*jsonNode, bool) {
	switch p.src[p.i] {
	case '{':
		if depth++; depth > maxTraitsDepth {
			return nil, false
		}
		n := &jsonNode{object: true}
		p.i++
		p.space()
		for p.src[p.i] != '}' {
			name := p.str()
			p.space()
			p.i++ // ':'
			p.space()
			v, ok := p.value(depth)
			if !ok {
				return nil, false
			}
			n.add(name, v)
			if p.src[p.i] == ',' {
				p.i++
				p.space()
			}
		}
		p.i++
		p.space()
		return n, true
	case '[':
		if depth++; depth > maxTraitsDepth {
			return nil, false
		}
		b := []byte{'['}
		p.i++
		p.space()
		for p.src[p.i] != ']' {
			v, ok := p.value(depth)
			if !ok {
				return nil, false
			}
			b = v.appendTo(b)
			if p.src[p.i] == ',' {
				b = append(b, ',')
				p.i++
				p.space()
			}
		}
		p.i++
		p.space()
		return &jsonNode{text: append(b, ']')}, true
	case '"':
		s := p.str()
		p.space()
		return &jsonNode{text: s}, true
	default: // a number, true, false or null: up to a delimiter
		start := p.i
		for p.i < len(p.src) {
			c := p.src[p.i]
			if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
				break
			}
			p.i++
		}
		s := p.src[start:p.i]
		p.space()
		return &jsonNode{text: s}, true
	}
}

// str reads a string at p.i and returns its text with its quotes.
func (p *traitsParser) str() []byte {
	start := p.i
	p.i++
	for p.src[p.i] != '"' {
		if p.src[p.i] == '\\' {
			p.i++
		}
		p.i++
	}
	p.i++
	return p.src[start:p.i]
}
