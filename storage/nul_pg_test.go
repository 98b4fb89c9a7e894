package storage

import (
	"database/sql"
	"encoding/json"
	"reflect"
	"testing"
)

// TestJSONNulFree: each \u0000 escape of a properties object becomes
// \ufffd, and nothing else changes: an escaped backslash before "u0000"
// is text, not an escape (docs/postgresql.md#text-with-nul).
func TestJSONNulFree(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"a":"b"}`, `{"a":"b"}`},
		{`{"a":"x\u0000y"}`, `{"a":"x\ufffdy"}`},
		{`{"\u0000":"\u0000\u0000"}`, `{"\ufffd":"\ufffd\ufffd"}`},
		{`{"a":"\\u0000"}`, `{"a":"\\u0000"}`},
		{`{"a":"\\\u0000"}`, `{"a":"\\\ufffd"}`},
		{`{"a":"\"\u0000\n\u00001"}`, `{"a":"\"\ufffd\n\ufffd1"}`},
		{`{"a":"\u00001\u0001"}`, `{"a":"\ufffd1\u0001"}`},
	}
	for _, tt := range tests {
		got := jsonNulFree(tt.in)
		if got != tt.want {
			t.Errorf("jsonNulFree(%s): got %s, want %s", tt.in, got, tt.want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("jsonNulFree(%s): got %s, want valid JSON", tt.in, got)
		}
	}
}

// TestNulFree: the PostgreSQL driver's argument check writes U+FFFD for
// NUL in every kind of text argument, and leaves bytes (bytea) and
// other values alone.
func TestNulFree(t *testing.T) {
	s := "a\x00b"
	tests := []struct {
		name    string
		in, out any
	}{
		{"string", s, "a\uFFFDb"},
		{"string without NUL", "ab", "ab"},
		{"*string", &s, "a\uFFFDb"},
		{"nil *string", (*string)(nil), (*string)(nil)},
		{"NullString", sql.NullString{String: s, Valid: true}, "a\uFFFDb"},
		{"[]string", []string{"x", s}, []string{"x", "a\uFFFDb"}},
		{"bytes", []byte(s), []byte(s)},
		{"int", int64(7), int64(7)},
		{"nil", nil, nil},
	}
	for _, tt := range tests {
		if got := nulFree(tt.in); !reflect.DeepEqual(got, tt.out) {
			t.Errorf("%s: got %#v, want %#v", tt.name, got, tt.out)
		}
	}
	in := []string{s}
	nulFree(in)
	if in[0] != s {
		t.Errorf("got the caller's list changed to %q, want it kept", in[0])
	}
}
