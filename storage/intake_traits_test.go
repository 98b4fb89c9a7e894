package storage

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nested is an object holding arrays depth deep in all.
func nested(depth int) string {
	return `{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
}

// mergedText is mergeTraits's profile as text, checked against the size
// the profile kept as it changed.
func mergedText(old, patch []byte, c *profileCaps) (string, [][]byte, error) {
	t, dropped, err := mergeTraits(old, patch, c)
	if err != nil {
		return "", nil, err
	}
	text := t.appendTo(nil)
	if t.size() != len(text) {
		return "", nil, fmt.Errorf("size %d, want %d, the length of %s", t.size(), len(text), text)
	}
	return string(text), dropped, nil
}

// TestTraitsMergeMatchesSQLite compares mergedText with what SQLite's
// json() (a new profile) and json_patch (an existing one) stored before:
// the same bytes, or an error from both.
func TestTraitsMergeMatchesSQLite(t *testing.T) {
	t.Parallel()
	lite, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	const none = "\x00" // no profile yet
	cases := []struct{ name, old, patch string }{
		{"new profile", none, `{"plan":"pro"}`},
		{"new profile with whitespace", none, " { \"a\" : [ 1 , 2 ] ,\n\t\"b\" : { \"c\" : null } } "},
		{"new profile keeps null", none, `{"a":null}`},
		{"new profile keeps duplicate names", none, `{"a":1,"a":2}`},
		{"new profile not an object", none, `5`},
		{"new profile string", none, `"x"`},
		{"new profile nested 1000 deep", none, nested(1000)},
		{"new profile nested 1001 deep", none, nested(1001)},
		{"new profile broken", none, `{"broken`},
		{"new profile empty", none, ``},
		{"adds a name at the end", `{"b":1}`, `{"a":2}`},
		{"replaces in place", `{"a":1,"b":2,"c":3}`, `{"b":"x"}`},
		{"null deletes", `{"a":1,"b":2}`, `{"a":null}`},
		{"null of an absent name", `{"a":1}`, `{"z":null}`},
		{"nested merge", `{"a":{"x":1,"y":2},"b":0}`, `{"a":{"y":null,"z":3}}`},
		{"object over a scalar", `{"a":5}`, `{"a":{"b":1,"c":null}}`},
		{"new object drops its nulls", `{}`, `{"n":{"a":null,"b":{"c":null,"d":1}}}`},
		{"scalar over an object", `{"a":{"b":1}}`, `{"a":"x"}`},
		{"array replaces, nulls and spaces inside", `{"a":[1,2]}`, `{"a":[ null , { "b" : null } ]}`},
		{"array patch replaces all", `{"a":1}`, `[1,2]`},
		{"string patch replaces all", `{"a":1}`, `"s"`},
		{"null patch replaces all", `{"a":1}`, `null`},
		{"array traits count as an empty object", `[1]`, `{"a":1,"b":null}`},
		{"empty patch", `{"a":1}`, `{}`},
		{"booleans", `{"t":true}`, `{"t":false,"f":true}`},
		{"unicode escapes kept", `{"n":"x"}`, `{"n":"Jos\u00e9 \ud83d\ude00 \u0000"}`},
		{"raw unicode kept", `{"n":"x"}`, `{"n":"José 😀","ü":"ö"}`},
		{"escaped name matches raw name", `{"é":1,"b":2}`, `{"\u00e9":3}`},
		{"raw name matches escaped name", `{"\u00e9":1}`, `{"é":null}`},
		{"escaped names compare decoded", `{"\u00e9":1}`, `{"\u00E9":2}`},
		{"surrogate pair matches raw", `{"😀":1}`, `{"\ud83d\ude00":2}`},
		{"lone surrogate names", `{"\ud800":1}`, `{"\ud800":2,"\udc00x":3}`},
		{"escaped slash", `{"a/b":1}`, `{"a\/b":2}`},
		{"escaped quote", `{"a\"b":1,"c":2}`, `{"a\"b":null}`},
		{"escaped newline against escaped newline", `{"a\n":1}`, `{"a\u000a":2}`},
		{"empty name", `{"":1}`, `{"":2}`},
		{"names compare up to a character 0", `{"a\u0000b":1}`, `{"a\u0000c":2}`},
		{"a character 0 ends a name", `{"é":1}`, `{"\u00e9\u0000":2}`},
		{"high surrogate before a non-surrogate escape", `{"\ud800\u0041":1}`, `{"\ud800A":2}`},
		{"invalid UTF-8 in names", "{\"\xed\xa0\x80\":1,\"\xff\":2}", `{"\ud800":3,"\u0000":4}`},
		{"big numbers keep their text", `{"n":123456789012345678901234567890,"f":1.0e+400,"z":-0,"e":1E2,"d":0.10}`,
			`{"m":18446744073709551616,"g":-1.5E-7}`},
		{"number replaced by its text", `{"n":1}`, `{"n":1.50}`},
		{"duplicate names: the first is replaced", `{"a":1,"a":2}`, `{"a":3}`},
		{"duplicate names: the first is deleted", `{"a":1,"a":2}`, `{"a":null}`},
		{"duplicate names in the patch", `{}`, `{"a":1,"a":{"b":1}}`},
		{"patch nested 1001 deep", `{"a":1}`, nested(1001)},
		{"broken patch", `{"a":1}`, `{"a":}`},
		{"deep merge", `{"a":{"b":{"c":{"d":1,"e":2}}}}`, `{"a":{"b":{"c":{"d":null,"f":[]}},"g":{}}}`},
		{"many deletes, then the names again", `{` + members("d", 0, 40, "1") + `}`,
			`{` + members("d", 0, 35, "null") + `,` + members("d", 10, 20, "2") + `,` + members("n", 0, 5, "3") + `}`},
		{"deleted and added again in one patch", `{"a":1,"b":2}`, `{"a":null,"a":3,"b":null,"a":null,"b":4}`},
		{"escaped and raw names among many", `{"\u0061":1,"a":2,"é":3,"\u00e9":4,"\u0000":5,"\u00e9\u0000":6}`,
			`{"a":7,"\u0061":8,"\u00E9":9,"é":null,"\u0000x":10,"\u0000":null}`},
	}
	for _, c := range cases {
		// Each case runs as written, on objects small enough to be
		// scanned, and with a dozen more members in every object of the
		// traits and the patch, so that the name index finds them.
		for _, indexed := range []bool{false, true} {
			name, old, patch := c.name, c.old, c.patch
			if indexed {
				name += "/indexed"
				if old != none {
					old = padObjects(old, "0")
				}
				patch = padObjects(patch, "1")
			}
			t.Run(name, func(t *testing.T) {
				checkMergeMatchesSQLite(t, lite, old == none, old, patch)
			})
		}
	}
	if len(cases) < 25 {
		t.Fatalf("got %d cases, want at least 25", len(cases))
	}
}

// checkMergeMatchesSQLite checks that mergedText gives what SQLite's
// json() (a new profile) or json_patch (an existing one, old) stored
// before: the same bytes, or an error from both.
func checkMergeMatchesSQLite(t *testing.T, lite *sql.DB, isNew bool, old, patch string) {
	t.Helper()
	var want sql.NullString
	var wantErr error
	var stored []byte
	if isNew {
		wantErr = lite.QueryRow(`SELECT json(?)`, patch).Scan(&want)
	} else {
		// The stored traits are json()'s or json_patch's text.
		var s string
		if err := lite.QueryRow(`SELECT json(?)`, old).Scan(&s); err != nil {
			t.Fatal(err)
		}
		stored = []byte(s)
		wantErr = lite.QueryRow(`SELECT json_patch(?, json(?))`, s, patch).Scan(&want)
	}
	got, _, err := mergedText(stored, []byte(patch), noCaps)
	switch {
	case wantErr != nil && err == nil:
		t.Fatalf("got %q, want an error (SQLite: %v)", got, wantErr)
	case wantErr == nil && err != nil:
		t.Fatalf("got error %v, want %q", err, want.String)
	case wantErr == nil && got != want.String:
		t.Fatalf("got %q, want %q", got, want.String)
	}
}

// members is the members "<prefix><i>": value for i from lo to hi-1.
func members(prefix string, lo, hi int, value string) string {
	var b strings.Builder
	for i := lo; i < hi; i++ {
		if i > lo {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%s", fmt.Sprint(prefix, i), value)
	}
	return b.String()
}

// padObjects puts 12 members "~pad<i>": value first in every object of
// the JSON text s (strings are left alone).
func padObjects(s, value string) string {
	var b strings.Builder
	inString := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		b.WriteByte(c)
		switch {
		case inString && c == '\\':
			i++
			if i < len(s) {
				b.WriteByte(s[i])
			}
		case c == '"':
			inString = !inString
		case !inString && c == '{':
			b.WriteString(members("~pad", 0, 12, value))
			if rest := strings.TrimLeft(s[i+1:], " \t\n\r"); !strings.HasPrefix(rest, "}") {
				b.WriteByte(',')
			}
		}
	}
	return b.String()
}

// TestIdentifyMergesTraits stores identifies through Ingest, in one run
// and in separate ones, and checks the profile's text.
func TestIdentifyMergesTraits(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	ctx := context.Background()
	user := "u1"
	n := 0
	identify := func(traits string) IngestEvent {
		n++
		return IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), SiteID: "s", Type: "identify",
			AnonID: "a", UserID: &user, Traits: []byte(traits), TS: time.Date(2026, 1, 1, 10, n, 0, 0, time.UTC), Raw: []byte(`{}`)}
	}
	steps := []struct {
		batch []string
		want  string
	}{
		{[]string{`{ "plan" : "pro", "seats": 3, "x": null }`}, `{"plan":"pro","seats":3,"x":null}`},
		{[]string{`{"seats":null,"email":"a@b.test"}`, `{"plan":"team","org":{"id":1.0,"n":null}}`},
			`{"plan":"team","x":null,"email":"a@b.test","org":{"id":1.0}}`},
		{[]string{`{"x":null}`}, `{"plan":"team","email":"a@b.test","org":{"id":1.0}}`},
	}
	for i, st := range steps {
		var batch []IngestEvent
		for _, tr := range st.batch {
			batch = append(batch, identify(tr))
		}
		if _, err := db.Ingest(ctx, batch, nil, nil); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := db.read.QueryRow(`SELECT traits FROM user_profiles WHERE site_id = 's' AND user_id = ?`, user).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != st.want {
			t.Fatalf("step %d: got %s, want %s", i, got, st.want)
		}
	}
}

// TestProfileCaps merges identifies into profiles at small caps (3 names,
// 40 bytes): past them, existing traits still change and go, new names
// and growth past the bytes are not merged and are named.
func TestProfileCaps(t *testing.T) {
	t.Parallel()
	caps := &profileCaps{keys: 3, bytes: 40}
	cases := []struct {
		name, old, patch, want string
		dropped                []string
	}{
		{"new profile within the caps", "", `{"a":1,"b":null,"a":2}`, `{"a":1,"b":null,"a":2}`, nil},
		{"new profile past the names", "", `{"a":1,"b":2,"c":3,"d":4,"e":5}`, `{"a":1,"b":2,"c":3}`, []string{`"d"`, `"e"`}},
		{"new profile past the bytes", "", `{"a":"012345678901234","b":"012345678901234","c":1}`, `{"a":"012345678901234","c":1}`, []string{`"b"`}},
		{"at the names cap: changes merge, new names do not", `{"a":1,"b":2,"c":3}`, `{"b":"x","d":4,"c":null,"e":5,"f":6}`,
			`{"a":1,"b":"x","e":5}`, []string{`"d"`, `"f"`}},
		{"growth past the bytes", `{"a":"0123456789","b":"0123456789"}`, `{"a":"0123456789ABCDEF","b":"x"}`,
			`{"a":"0123456789","b":"x"}`, []string{`"a"`}},
		{"a new name past the bytes", `{"a":"01234567890123456789012345"}`, `{"bb":1,"c":2}`,
			`{"a":"01234567890123456789012345","c":2}`, []string{`"bb"`}},
		{"an object merged counts the patch's whole size", `{"a":"01234567890123456789","o":{"x":1}}`, `{"o":{"x":2}}`,
			`{"a":"01234567890123456789","o":{"x":1}}`, []string{`"o"`}},
		{"an object merged within the bytes", `{"o":{"x":1,"y":2}}`, `{"o":{"x":null,"z":3}}`, `{"o":{"y":2,"z":3}}`, nil},
		{"a profile stored over the caps shrinks, never grows", `{"a":1,"b":2,"c":3,"d":"0123456789012345678901234567890"}`,
			`{"a":null,"b":22,"d":"short","e":5}`, `{"b":2,"c":3,"d":"short"}`, []string{`"b"`, `"e"`}},
		{"a patch that is not an object, past the bytes", `{"a":1}`, `"0123456789012345678901234567890123456789"`, `{"a":1}`, []string{""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var old []byte
			if c.old != "" {
				old = []byte(c.old)
			}
			got, dropped, err := mergedText(old, []byte(c.patch), caps)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
			var names []string
			for _, d := range dropped {
				names = append(names, string(d))
			}
			if fmt.Sprint(names) != fmt.Sprint(c.dropped) {
				t.Fatalf("got dropped %q, want %q", names, c.dropped)
			}
		})
	}
}
