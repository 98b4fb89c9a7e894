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

// TestTraitsMergeMatchesSQLite compares mergeTraits with what SQLite's
// json() (a new profile) and json_patch (an existing one) stored before:
// the same bytes, or an error from both.
func TestTraitsMergeMatchesSQLite(t *testing.T) {
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
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var want sql.NullString
			var wantErr error
			var old []byte
			if c.old == none {
				wantErr = lite.QueryRow(`SELECT json(?)`, c.patch).Scan(&want)
			} else {
				// The stored traits are json()'s or json_patch's text.
				var stored string
				if err := lite.QueryRow(`SELECT json(?)`, c.old).Scan(&stored); err != nil {
					t.Fatal(err)
				}
				old = []byte(stored)
				wantErr = lite.QueryRow(`SELECT json_patch(?, json(?))`, stored, c.patch).Scan(&want)
			}
			got, err := mergeTraits(old, []byte(c.patch))
			switch {
			case wantErr != nil && err == nil:
				t.Fatalf("got %q, want an error (SQLite: %v)", got, wantErr)
			case wantErr == nil && err != nil:
				t.Fatalf("got error %v, want %q", err, want.String)
			case wantErr == nil && got != want.String:
				t.Fatalf("got %q, want %q", got, want.String)
			}
		})
	}
	if len(cases) < 25 {
		t.Fatalf("got %d cases, want at least 25", len(cases))
	}
}

// TestIdentifyMergesTraits stores identifies through Ingest, in one run
// and in separate ones, and checks the profile's text.
func TestIdentifyMergesTraits(t *testing.T) {
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
