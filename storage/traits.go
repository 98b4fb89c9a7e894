package storage

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/bits"
)

// A profile's traits are merged in Go rather than by SQLite's json_patch,
// so that the statement that writes them is plain SQL on every backend
// (issue 17). mergeTraits gives the bytes json_patch(old, json(patch))
// gave (TestTraitsMergeMatchesSQLite): an RFC 7396 merge patch, "later
// keys win" in docs/intake.md#identity-and-sessions, that keeps the order of
// names and the text of values, so a profile's stored text is what it
// would have been.

// maxTraitsDepth is how deeply SQLite's JSON parser lets arrays and
// objects nest (JSON_MAX_DEPTH): deeper traits were refused by json(), and
// still are.
const maxTraitsDepth = 1000

// errBadTraits is traits that are not JSON, or nest too deeply: the request
// that sent them fails alone (see intake.runMerged), as it did when
// SQLite's json() refused them.
var errBadTraits = errors.New("storage: traits are not valid JSON")

// mergeTraits returns the traits a profile holds after an identify with
// patch: patch without insignificant whitespace when the profile is new
// (old nil), else patch merged into old as SQLite's json_patch merges:
//   - a patch that is not an object replaces the traits;
//   - traits that are not an object count as an empty one;
//   - each patch member, in order, finds the first member of the traits
//     with the same name: null deletes it, an object is merged into it,
//     anything else replaces it; with no such member, a non-null value is
//     appended (an object without its null members, recursively);
//   - names match when their text is the same or, when exactly one of the
//     two has escapes, when their decoded text is;
//   - numbers and strings keep their text as sent (escapes, exponents,
//     digits beyond float64), and duplicate names are kept.
func mergeTraits(old, patch []byte) (string, error) {
	p, err := parseTraits(patch)
	if err != nil {
		return "", err
	}
	if old == nil {
		return string(p.appendTo(nil)), nil
	}
	t, err := parseTraits(old)
	if err != nil {
		return "", err
	}
	return string(mergePatch(t, p).appendTo(nil)), nil
}

// jsonNode is a JSON value as a merge patch sees it: an object's members
// in order, anything else as its text without insignificant whitespace.
type jsonNode struct {
	object  bool
	members []jsonMember
	text    []byte // the value's text, when not an object
}

// jsonMember is one name and value of an object; name is the name's text
// with its quotes and escapes, as sent.
type jsonMember struct {
	name []byte
	val  *jsonNode
}

func (n *jsonNode) isNull() bool { return !n.object && string(n.text) == "null" }

// mergePatch merges patch into target (which it may change) and returns
// the result.
func mergePatch(target, patch *jsonNode) *jsonNode {
	if !patch.object {
		return patch
	}
	if !target.object {
		target = &jsonNode{object: true}
	}
	for _, pm := range patch.members {
		i := 0
		for i < len(target.members) && !sameName(target.members[i].name, pm.name) {
			i++
		}
		switch {
		case i < len(target.members) && pm.val.isNull():
			target.members = append(target.members[:i], target.members[i+1:]...)
		case i < len(target.members):
			target.members[i].val = mergePatch(target.members[i].val, pm.val)
		case !pm.val.isNull():
			target.members = append(target.members, jsonMember{pm.name, mergePatch(&jsonNode{object: true}, pm.val)})
		}
	}
	return target
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
	for i, m := range n.members {
		if i > 0 {
			b = append(b, ',')
		}
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
			n.members = append(n.members, jsonMember{name, v})
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
