package schema

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tally-analytics/tally/fault"
)

var now = time.Date(2026, 1, 31, 9, 5, 0, 0, time.UTC)

const okEvent = `{"id":"3f2504e0-4f89-41d3-9a0c-0305e82c3301","site_id":"web","anon_id":"a1","type":"pageview"}`

func details(err error) string {
	e := fault.As(err)
	if e == nil {
		return fmt.Sprint(err)
	}
	var parts []string
	for _, d := range e.Details {
		parts = append(parts, d.Path)
	}
	return e.Code + " " + strings.Join(parts, ",")
}

func TestParseEnvelope(t *testing.T) {
	with := func(extra string) string { return okEvent[:len(okEvent)-1] + "," + extra + "}" }
	tests := []struct {
		name string
		body string
		want string // "" for valid, else "code pointers"
	}{
		{"valid single", okEvent, ""},
		{"valid batch", "[" + okEvent + "," + okEvent + "]", ""},
		{"leading whitespace", "\n  " + okEvent + "\n", ""},
		{"not json", `{"id":`, "invalid_event "},
		{"empty body", ``, "invalid_event "},
		{"a string", `"x"`, "invalid_event "},
		{"a number", `42`, "invalid_event "},
		{"null", `null`, "invalid_event "},
		{"empty batch", `[]`, "invalid_event "},
		{"batch of 501", "[" + strings.Repeat(okEvent+",", 500) + okEvent + "]", "invalid_event "},
		{"batch of 500", "[" + strings.Repeat(okEvent+",", 499) + okEvent + "]", ""},
		{"batch element not object", "[" + okEvent + ",3]", "invalid_event /1"},
		{"missing everything", `{}`, "invalid_event /id,/site_id,/anon_id,/type"},
		{"bad id", strings.Replace(okEvent, "3f2504e0-4f89-41d3-9a0c-0305e82c3301", "nope", 1), "invalid_event /id"},
		{"id in braces", strings.Replace(okEvent, `"3f2504e0-4f89-41d3-9a0c-0305e82c3301"`, `"{3f2504e0-4f89-41d3-9a0c-0305e82c3301}"`, 1), "invalid_event /id"},
		{"id a number", strings.Replace(okEvent, `"3f2504e0-4f89-41d3-9a0c-0305e82c3301"`, `7`, 1), "invalid_event /id"},
		{"empty anon", strings.Replace(okEvent, `"a1"`, `""`, 1), "invalid_event /anon_id"},
		{"anon of 129", strings.Replace(okEvent, `"a1"`, `"`+strings.Repeat("a", 129)+`"`, 1), "invalid_event /anon_id"},
		{"anon of 128", strings.Replace(okEvent, `"a1"`, `"`+strings.Repeat("a", 128)+`"`, 1), ""},
		{"type with space", strings.Replace(okEvent, `"pageview"`, `"page view"`, 1), "invalid_event /type"},
		{"type of 65", strings.Replace(okEvent, `"pageview"`, `"`+strings.Repeat("t", 65)+`"`, 1), "invalid_event /type"},
		{"type with allowed punctuation", strings.Replace(okEvent, `"pageview"`, `"$app:open.v2-x_y"`, 1), ""},
		{"ts valid", with(`"ts":"2026-01-30T10:00:00.5+01:00"`), ""},
		{"ts malformed", with(`"ts":"yesterday"`), "invalid_event /ts"},
		{"ts 25h ahead", with(`"ts":"2026-02-01T10:05:00Z"`), "invalid_event /ts"},
		{"ts 23h ahead", with(`"ts":"2026-02-01T08:05:00Z"`), ""},
		{"url not string", with(`"url":5`), "invalid_event /url"},
		{"url null", with(`"url":null`), ""},
		{"user_id not string", with(`"user_id":{}`), "invalid_event /user_id"},
		{"user_id empty", with(`"user_id":""`), "invalid_event /user_id"},
		{"referrer not string", with(`"referrer":true`), "invalid_event /referrer"},
		{"properties not object", with(`"properties":[1]`), "invalid_event /properties"},
		{"traits not object", with(`"traits":"x"`), "invalid_event /traits"},
		{"consent unknown", with(`"consent":"maybe"`), "invalid_event /consent"},
		{"consent denied", with(`"consent":"denied"`), ""},
		{"user_agent not string", with(`"user_agent":1`), "invalid_event /user_agent"},
		{"unknown fields kept", with(`"whatever":{"deep":[1,2]}`), ""},
		{"pointers in batch", "[" + okEvent + "," + okEvent + "," + okEvent + "," + strings.Replace(okEvent, `"a1"`, `5`, 1) + "]", "invalid_event /3/anon_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := Parse([]byte(tt.body), now)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got %v, want valid", details(err))
				}
				return
			}
			if got := details(err); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			if evs != nil {
				t.Fatalf("got %d events with an error, want none", len(evs))
			}
		})
	}
}

func TestParseKeepsExactBytesAndDefaults(t *testing.T) {
	a := `{"id":"3F2504E0-4F89-41D3-9A0C-0305E82C3301", "site_id":"web","anon_id":"a","type":"x","extra":  [1, 2]}`
	b := `{"id":"3f2504e0-4f89-41d3-9a0c-0305e82c3302","site_id":"web","anon_id":"b","type":"y","ts":"2026-01-30T10:00:00+01:00"}`
	evs, err := Parse([]byte("[ "+a+" ,\n"+b+"]"), now)
	if err != nil {
		t.Fatal(err)
	}
	if string(evs[0].Raw) != a || string(evs[1].Raw) != b {
		t.Fatalf("got raw %s / %s, want the exact element bytes", evs[0].Raw, evs[1].Raw)
	}
	if evs[0].ID != "3f2504e0-4f89-41d3-9a0c-0305e82c3301" {
		t.Errorf("got id %s, want lower-case canonical form", evs[0].ID)
	}
	if !evs[0].TS.Equal(now) || !evs[1].TS.Equal(time.Date(2026, 1, 30, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("got ts %v and %v", evs[0].TS, evs[1].TS)
	}
	if evs[0].Pointer != "/0" || evs[1].Pointer != "/1" {
		t.Errorf("got pointers %q %q", evs[0].Pointer, evs[1].Pointer)
	}
}

func TestPlan(t *testing.T) {
	plan := `{"mode":"quarantine","$defs":{"money":{"type":"number","minimum":0}},"events":{
		"purchase":{"type":"object","required":["properties"],"properties":{"properties":{"type":"object","required":["amount","currency"],
			"properties":{"amount":{"$ref":"#/$defs/money"},"currency":{"type":"string","maxLength":3}}}}},
		"signup":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"user_id":{"type":"string","minLength":3}}},
		"strict":{"type":"object","additionalProperties":false},
		"$app:x":{"type":"object"}}}`
	p, err := ParsePlan([]byte(plan))
	if err != nil {
		t.Fatal(err)
	}
	if p.Mode != ModeQuarantine {
		t.Errorf("got mode %s", p.Mode)
	}
	ev := func(typ, extra string) *Event {
		body := `{"id":"3f2504e0-4f89-41d3-9a0c-0305e82c3301","site_id":"web","anon_id":"a","type":"` + typ + `","url":"u","ts":"2026-01-30T00:00:00Z"` + extra + `}`
		evs, err := Parse([]byte(body), now)
		if err != nil {
			t.Fatal(err)
		}
		return &evs[0]
	}
	tests := []struct {
		name string
		ev   *Event
		want string
	}{
		{"valid purchase", ev("purchase", `,"properties":{"amount":5,"currency":"EUR"}`), ""},
		{"missing amount", ev("purchase", `,"properties":{"currency":"EUR"}`), "/properties/amount"},
		{"negative amount via $ref", ev("purchase", `,"properties":{"amount":-1,"currency":"EUR"}`), "/properties/amount"},
		{"two violations", ev("purchase", `,"properties":{"amount":"x","currency":"EURO"}`), "/properties/amount,/properties/currency"},
		{"no properties", ev("purchase", ``), "/properties"},
		{"draft-07 schema", ev("signup", `,"user_id":"ab"`), "/user_id"},
		{"envelope fields are not seen by the schema", ev("strict", ``), ""},
		{"non-envelope fields are seen", ev("strict", `,"properties":{}`), ""},
		{"unknown type", ev("nope", ``), "/type"},
		{"dollar type", ev("$app:x", ``), ""},
		// Numbers the validator could not compare (a panic: 500) or only
		// at great cost are violations; those within the bounds are not.
		{"exponent beyond big.Rat's", ev("purchase", `,"properties":{"amount":1e1000001,"currency":"EUR"}`), "/properties/amount"},
		{"exponent of a million", ev("purchase", `,"properties":{"amount":1e999999,"currency":"EUR","x":[{"n":-0e-401}]}`), "/properties/amount,/properties/x/0/n"},
		{"101 digits", ev("purchase", `,"properties":{"amount":1`+strings.Repeat("0", 100)+`,"currency":"EUR"}`), "/properties/amount"},
		{"within the bounds", ev("purchase", `,"properties":{"amount":1`+strings.Repeat("0", 99)+`,"currency":"EUR","x":[1E+400,-2.5e-400]}`), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := p.Validate(tt.ev)
			var paths []string
			for _, d := range ds {
				paths = append(paths, d.Path)
				if d.Message == "" {
					t.Errorf("detail %s has no message", d.Path)
				}
			}
			got := strings.Join(paths, ",")
			if got != tt.want {
				t.Fatalf("got %q (%v), want %q", got, ds, tt.want)
			}
			if tt.name == "unknown type" && ds[0].Message != "unknown event" {
				t.Fatalf("got %q, want unknown event", ds[0].Message)
			}
		})
	}
}

func TestPlanWildcardAndBatchPointers(t *testing.T) {
	p, err := ParsePlan([]byte(`{"events":{"*":{"type":"object"},"buy":{"type":"object","required":["properties"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Mode != ModeReject {
		t.Errorf("got default mode %s, want reject", p.Mode)
	}
	evs, err := Parse([]byte("["+okEvent+","+strings.Replace(okEvent, "pageview", "buy", 1)+"]"), now)
	if err != nil {
		t.Fatal(err)
	}
	if ds := p.Validate(&evs[0]); ds != nil {
		t.Errorf("wildcard: got %v, want valid", ds)
	}
	if ds := p.Validate(&evs[1]); len(ds) != 1 || ds[0].Path != "/1/properties" {
		t.Errorf("got %v, want one detail at /1/properties", ds)
	}
}

func TestPlanErrors(t *testing.T) {
	tests := []struct{ name, plan, want string }{
		{"not json", `{`, "not valid JSON"},
		{"not an object", `[]`, "JSON object"},
		{"unknown mode", `{"mode":"drop","events":{}}`, "unknown mode"},
		{"no events", `{"mode":"reject"}`, `"events"`},
		{"bad schema", `{"events":{"purchase":{"type":"objekt"}}}`, `event "purchase"`},
		{"remote ref", `{"events":{"x":{"$ref":"https://example.com/s.json"}}}`, `event "x"`},
		// Any name of 1 to 255 characters is one (a Segment track's type is
		// its event name, "Order Completed"); an empty one is not.
		{"bad event name", `{"events":{"":{}}}`, `event ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePlan([]byte(tt.plan))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error mentioning %s", err, tt.want)
			}
		})
	}
	if _, err := LoadPlan("/does/not/exist.json"); err == nil {
		t.Fatal("got no error for a missing plan file")
	}
}

func BenchmarkValidate(b *testing.B) {
	p, err := ParsePlan([]byte(`{"events":{"purchase":{"type":"object","properties":{"properties":{"type":"object","required":["amount"],"properties":{"amount":{"type":"number"},"currency":{"type":"string"}}}}}}}`))
	if err != nil {
		b.Fatal(err)
	}
	props := map[string]any{"amount": 12.5, "currency": "EUR"}
	for i := range 8 {
		props[fmt.Sprintf("p%d", i)] = i
	}
	raw, _ := json.Marshal(map[string]any{"id": "3f2504e0-4f89-41d3-9a0c-0305e82c3301", "site_id": "web", "anon_id": "a", "type": "purchase", "properties": props})
	evs, err := Parse(raw, now)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if ds := p.Validate(&evs[0]); ds != nil {
			b.Fatal(ds)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(okEvent))
	f.Add([]byte("[" + okEvent + "," + okEvent + "]"))
	f.Add([]byte(`{"id":"3f2504e0-4f89-41d3-9a0c-0305e82c3301","site_id":"w","anon_id":"a","type":"t","ts":"2026-01-01T00:00:00Z","properties":{"a":[1,{"b":null}]},"consent":"denied"}`))
	f.Add([]byte(`[[]]`))
	f.Add([]byte(`{"id":null}`))
	f.Add([]byte("\x00\xff"))
	f.Add([]byte(`[` + strings.Repeat(`{},`, 10) + `{}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		evs, err := Parse(body, now)
		if err != nil {
			e := fault.As(err)
			if e == nil || e.Code != fault.InvalidEvent || e.Message == "" || len(e.Details) == 0 {
				t.Fatalf("got error %#v, want invalid_event with details", err)
			}
			for _, d := range e.Details {
				if d.Message == "" || (d.Path != "" && d.Path[0] != '/') {
					t.Fatalf("bad detail %+v", d)
				}
			}
			return
		}
		if len(evs) == 0 || len(evs) > MaxBatch {
			t.Fatalf("got %d events", len(evs))
		}
		for _, ev := range evs {
			if !json.Valid(ev.Raw) || ev.ID == "" || ev.SiteID == "" || ev.AnonID == "" || ev.Type == "" {
				t.Fatalf("accepted an event missing its envelope: %+v", ev)
			}
		}
	})
}

// BenchmarkParseAndValidate is the collector's per-event schema work on a
// realistic single pageview of about 400 bytes.
func BenchmarkParseAndValidate(b *testing.B) {
	p, err := LoadPlan("../testdata/plan.json")
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"id":"3f2504e0-4f89-41d3-9a0c-0305e82c3301","site_id":"web","anon_id":"visitor-01234","type":"pageview",` +
		`"ts":"2026-01-31T09:05:00.120Z","url":"https://shop.example/pricing?utm_source=newsletter","referrer":"https://search.example/?q=analytics",` +
		`"properties":{"title":"A page title of ordinary length","width":1440,"height":900,"lang":"en-GB","tz":"Europe/London","build":"2026.11.3"}}`)
	b.ReportAllocs()
	for b.Loop() {
		evs, err := Parse(body, now)
		if err != nil {
			b.Fatal(err)
		}
		if ds := p.Validate(&evs[0]); ds != nil {
			b.Fatal(ds)
		}
	}
}

// unquote's fast path must read every JSON string as encoding/json does.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`""`, `"plain"`, `"caf\u00e9"`, `"tab\tand\\slash\/"`, "\"\xff\xfe bad utf-8\"", `"é ünïcödé"`, `"\ud83d\ude00"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		var want string
		if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' || json.Unmarshal(v, &want) != nil {
			return // unquote only sees checked JSON strings, without surrounding space
		}
		if got := unquote(v); got != want {
			t.Fatalf("unquote(%q) = %q, want %q", v, got, want)
		}
	})
}

// Parse tells broken JSON from well-formed JSON of the wrong shape, for a
// single event and for a batch, and reads escaped strings as JSON says.
func TestParseMessagesAndStrings(t *testing.T) {
	tests := []struct{ body, message string }{
		{`{"id":`, "the event envelope is invalid: body is not valid JSON"},
		{okEvent + ` trailing`, "the event envelope is invalid: body is not valid JSON"},
		{`[` + okEvent, "the event envelope is invalid: body is not valid JSON"},
		{`"x"`, "the event envelope is invalid: an event must be a JSON object"},
		{`[1, 2`, "the event envelope is invalid: body is not valid JSON"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.body), now)
		if e := fault.As(err); e == nil || e.Message != tt.message {
			t.Errorf("Parse(%.30q): got %v, want %q", tt.body, err, tt.message)
		}
	}
	body := strings.Replace(okEvent, `"a1"`, `"caf\u00e9 \"x\" \ud83d\ude00"`, 1)
	evs, err := Parse([]byte(body), now)
	if err != nil {
		t.Fatal(err)
	}
	if want := "café \"x\" 😀"; evs[0].AnonID != want {
		t.Fatalf("got anon_id %q, want %q", evs[0].AnonID, want)
	}
}
