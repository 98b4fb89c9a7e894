package storage

import (
	"database/sql"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/tally-analytics/tally/storage/internal/engine"
)

// TestPGJSON: each \u0000 escape and each lone surrogate's escape of a
// properties object becomes \ufffd, and nothing else changes: an escaped
// backslash before "u0000" is text, not an escape; a surrogate pair stays
// (docs/postgresql.md#text-with-nul-and-invalid-utf-8). Apart from
// NUL, encoding/json decodes the result to what it decodes the input to,
// as SQLite's reads of the wire text do.
func TestPGJSON(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`{"a":"b"}`, `{"a":"b"}`},
		{`{"a":"x\u0000y"}`, `{"a":"x\ufffdy"}`},
		{`{"\u0000":"\u0000\u0000"}`, `{"\ufffd":"\ufffd\ufffd"}`},
		{`{"a":"\\u0000"}`, `{"a":"\\u0000"}`},
		{`{"a":"\\\u0000"}`, `{"a":"\\\ufffd"}`},
		{`{"a":"\"\u0000\n\u00001"}`, `{"a":"\"\ufffd\n\ufffd1"}`},
		{`{"a":"\u00001\u0001"}`, `{"a":"\ufffd1\u0001"}`},
		{`{"a":"\udc00"}`, `{"a":"\ufffd"}`},
		{`{"a":"\ud800z"}`, `{"a":"\ufffdz"}`},
		{`{"\uDBFF":1}`, `{"\ufffd":1}`},
		{`{"a":"\ud800\ud800\udc00"}`, `{"a":"\ufffd\ud800\udc00"}`},
		{`{"a":"\ud83d\ude00 \u00e9"}`, `{"a":"\ud83d\ude00 \u00e9"}`},
		{`{"a":"\udc00\ud800"}`, `{"a":"\ufffd\ufffd"}`},
		{`{"a":"\ud800\u0041"}`, `{"a":"\ufffd\u0041"}`},
		{`{"a":"\\ud800"}`, `{"a":"\\ud800"}`},
		{`{"a":"\ud800"}`, `{"a":"\ufffd"}`},
	}
	for _, tt := range tests {
		got := pgJSON(tt.in)
		if got != tt.want {
			t.Errorf("pgJSON(%s): got %s, want %s", tt.in, got, tt.want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("pgJSON(%s): got %s, want valid JSON", tt.in, got)
		}
		if strings.Contains(tt.in, `\u0000`) {
			continue
		}
		var a, b any
		if json.Unmarshal([]byte(tt.in), &a) != nil || json.Unmarshal([]byte(got), &b) != nil || !reflect.DeepEqual(a, b) {
			t.Errorf("pgJSON(%s): got %s, which decodes to %v, want %v", tt.in, got, b, a)
		}
	}
}

// TestPGText: the PostgreSQL driver's argument check writes U+FFFD for
// NUL and for each byte not part of valid UTF-8 in every kind of text
// argument, and leaves bytes (bytea), other values and a U+FFFD sent as
// such alone.
func TestPGText(t *testing.T) {
	t.Parallel()
	s, bad := "a\x00b", "a\xffb\xc3"
	tests := []struct {
		name    string
		in, out any
	}{
		{"string", s, "a\uFFFDb"},
		{"string without NUL", "ab", "ab"},
		{"invalid UTF-8", bad, "a\uFFFDb\uFFFD"},
		{"a truncated sequence and NUL", "\xe2\x82\x00", "\uFFFD\uFFFD\uFFFD"},
		{"replacement character", "a\uFFFDb", "a\uFFFDb"},
		{"*string", &s, "a\uFFFDb"},
		{"*string invalid", &bad, "a\uFFFDb\uFFFD"},
		{"nil *string", (*string)(nil), (*string)(nil)},
		{"NullString", sql.NullString{String: s, Valid: true}, "a\uFFFDb"},
		{"NullString invalid", sql.NullString{String: bad, Valid: true}, "a\uFFFDb\uFFFD"},
		{"[]string", []string{"x", s, bad}, []string{"x", "a\uFFFDb", "a\uFFFDb\uFFFD"}},
		{"bytes", []byte(s), []byte(s)},
		{"invalid bytes", []byte(bad), []byte(bad)},
		{"int", int64(7), int64(7)},
		{"nil", nil, nil},
	}
	for _, tt := range tests {
		if got := engine.PGText(tt.in); !reflect.DeepEqual(got, tt.out) {
			t.Errorf("%s: got %#v, want %#v", tt.name, got, tt.out)
		}
	}
	in := []string{s}
	engine.PGText(in)
	if in[0] != s {
		t.Errorf("got the caller's list changed to %q, want it kept", in[0])
	}
	// One U+FFFD per invalid byte, as encoding/json decodes a string.
	var decoded string
	if err := json.Unmarshal([]byte(`"`+bad+`"`), &decoded); err != nil || ValidUTF8(bad) != decoded {
		t.Errorf("ValidUTF8(%q): got %q, want %q as encoding/json decodes it", bad, ValidUTF8(bad), decoded)
	}
}
