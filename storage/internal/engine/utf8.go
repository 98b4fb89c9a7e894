package engine

import (
	"strings"
	"unicode/utf8"
)

// ReplaceText is s with each byte not part of valid UTF-8, and each NUL
// when nul is set, replaced by U+FFFD; s itself when there is none.
func ReplaceText(s string, nul bool) string {
	if utf8.ValidString(s) && (!nul || strings.IndexByte(s, 0) < 0) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || nul && r == 0 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
