package storage

import "github.com/tally-analytics/tally/storage/internal/engine"

// ValidUTF8 is s with each byte that is not part of valid UTF-8 replaced
// by U+FFFD, the replacement character, one per byte as encoding/json
// decodes such a string; s itself when it is valid. Intake stores the
// wire text in this form on both backends, so that the text kept and the
// values decoded from it agree, and PostgreSQL, whose text must be valid
// UTF-8, stores what SQLite stores (docs/postgresql.md#text-with-nul-and-invalid-utf-8).
func ValidUTF8(s string) string { return engine.ReplaceText(s, false) }
