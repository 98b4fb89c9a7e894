package storage

import (
	"strings"
	"unicode/utf8"
)

// ValidUTF8 is s with each byte that is not part of valid UTF-8 replaced
// by U+FFFD, the replacement character, one per byte as encoding/json
// decodes such a string; s itself when it is valid. Intake stores the
// wire text in this form on both backends, so that the text kept and the
// values decoded from it agree, and PostgreSQL, whose text must be valid
// UTF-8, stores what SQLite stores (docs/postgresql.md#text-with-nul-and-invalid-utf-8).
func ValidUTF8(s string) string { return replaceText(s, false) }

// replaceText is s with each byte not part of valid UTF-8, and each NUL
// when nul is set, replaced by U+FFFD; s itself when there is none.
func replaceText(s string, nul bool) string {
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
