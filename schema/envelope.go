// Package schema checks events at the wire boundary: the envelope every
// event must carry (docs/intake.md) and, when a tracking plan is loaded,
// the per-type JSON Schema of the plan (docs/intake.md#tracking-plan).
package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/tally-analytics/tally/fault"
)

// MaxBatch is the most events one request may carry.
const MaxBatch = 500

// MaxFuture is how far ahead of the receive time an event's ts may be.
const MaxFuture = 24 * time.Hour

// Consent values.
const (
	ConsentGranted = "granted"
	ConsentDenied  = "denied"
)

// Event is one event that passed envelope validation.
type Event struct {
	// Raw is the element's exact wire bytes, unknown fields included.
	Raw json.RawMessage
	// Fields is the decoded top-level object (shares memory with Raw's
	// parse, not with Raw).
	Fields map[string]json.RawMessage
	// Pointer is the JSON Pointer prefix of this element in the request:
	// "" for a single event, "/3" for the fourth element of a batch.
	Pointer string
	// Index is the element's position in the request (0 for a single event).
	Index int

	ID       string // canonical lower-case UUID
	SiteID   string
	AnonID   string
	Type     string
	TS       time.Time // the receive time when the event has no ts
	URL      *string
	UserID   *string
	Referrer *string
	// Properties and Traits are the raw JSON objects, or nil.
	Properties json.RawMessage
	Traits     json.RawMessage
	Consent    string // "", ConsentGranted or ConsentDenied
	UserAgent  *string
	// ClientIP is the visitor's address a message carries (Segment's
	// context.ip), "" for none: read only for the location lookup, never
	// stored or logged (docs/intake.md#segment-compatible-intake).
	ClientIP string
	// Campaign is the campaign object a message states besides its URL
	// (Segment's context.campaign), or nil (docs/intake.md#visits).
	Campaign json.RawMessage
}

// MaxTypeLen is the longest event type of any intake format, in
// characters: a Segment track's type is its event name.
const MaxTypeLen = 255

var typePattern = regexp.MustCompile(`^[A-Za-z0-9_.:$-]{1,64}$`)

// Parse reads a request body holding one event object or a batch array of
// at most MaxBatch events. now is the receive time (the default ts). Every
// element is checked before anything is returned: any broken envelope makes
// the whole request an invalid_event error whose details point at each
// problem, e.g. "/3/anon_id".
func Parse(body []byte, now time.Time) ([]Event, error) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, invalid(fault.Detail{Path: "", Message: "body is empty: send one event object or an array of events"})
	}
	// Each decode below checks the bytes it reads, so the body is only
	// scanned as a whole when a decode fails, to say why.
	notJSON := func() bool { return !json.Valid(trimmed) }
	var elements []json.RawMessage
	batch := trimmed[0] == '['
	if batch {
		if err := json.Unmarshal(trimmed, &elements); err != nil {
			if notJSON() {
				return nil, invalid(fault.Detail{Path: "", Message: "body is not valid JSON"})
			}
			return nil, invalid(fault.Detail{Path: "", Message: "body is not a JSON array of events"})
		}
		if len(elements) == 0 || len(elements) > MaxBatch {
			return nil, invalid(fault.Detail{Path: "", Message: fmt.Sprintf("a batch holds 1 to %d events, this one holds %d", MaxBatch, len(elements))})
		}
	} else {
		elements = []json.RawMessage{bytes.TrimRight(trimmed, " \t\r\n")}
	}
	events := make([]Event, 0, len(elements))
	var details []fault.Detail
	for i, raw := range elements {
		prefix := ""
		if batch {
			prefix = "/" + strconv.Itoa(i)
		}
		ev, problems := parseOne(raw, prefix, now)
		if !batch && problems != nil && ev.Fields == nil && notJSON() {
			return nil, invalid(fault.Detail{Path: "", Message: "body is not valid JSON"})
		}
		ev.Index = i
		details = append(details, problems...)
		events = append(events, ev)
	}
	if len(details) > 0 {
		return nil, invalid(details...)
	}
	return events, nil
}

// unquote decodes a JSON string that the object's decode already checked.
// Most strings have no escapes and are valid UTF-8: those are their own
// bytes, without a second pass through the decoder.
func unquote(v json.RawMessage) string {
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner)
	}
	var s string
	json.Unmarshal(v, &s) // cannot fail: v is a checked JSON string
	return s
}

func invalid(details ...fault.Detail) error {
	msg := "the event envelope is invalid"
	if len(details) == 1 {
		msg = "the event envelope is invalid: " + details[0].Message
	}
	return fault.WithDetails(fault.InvalidEvent, msg, details)
}

// parseOne checks one element and returns it with its problems.
func parseOne(raw json.RawMessage, prefix string, now time.Time) (Event, []fault.Detail) {
	ev := Event{Raw: raw, Pointer: prefix, TS: now}
	var problems []fault.Detail
	bad := func(field, format string, args ...any) {
		problems = append(problems, fault.Detail{Path: prefix + "/" + field, Message: fmt.Sprintf(format, args...)})
	}
	if len(raw) == 0 || raw[0] != '{' {
		return ev, []fault.Detail{{Path: prefix, Message: "an event must be a JSON object"}}
	}
	if err := json.Unmarshal(raw, &ev.Fields); err != nil {
		return ev, []fault.Detail{{Path: prefix, Message: "an event must be a JSON object"}}
	}
	f := ev.Fields

	// str reads a string field; present reports whether it was there (a
	// JSON null counts as absent for optional fields).
	str := func(name string, required bool) (s string, present bool) {
		v, ok := f[name]
		if !ok || (!required && string(v) == "null") {
			if required {
				bad(name, "%s is required", name)
			}
			return "", false
		}
		if len(v) == 0 || v[0] != '"' {
			bad(name, "%s must be a string", name)
			return "", false
		}
		return unquote(v), true
	}
	if id, ok := str("id", true); ok {
		if u, err := uuid.Parse(id); err != nil || len(id) != 36 {
			bad("id", "id must be a UUID such as 3f2504e0-4f89-41d3-9a0c-0305e82c3301")
		} else {
			ev.ID = u.String()
		}
	}
	if site, ok := str("site_id", true); ok {
		if site == "" {
			bad("site_id", "site_id must not be empty")
		}
		ev.SiteID = site
	}
	if anon, ok := str("anon_id", true); ok {
		if n := utf8.RuneCountInString(anon); n < 1 || n > 128 {
			bad("anon_id", "anon_id must be 1 to 128 characters")
		}
		ev.AnonID = anon
	}
	if typ, ok := str("type", true); ok {
		if !typePattern.MatchString(typ) {
			bad("type", "type must match ^[A-Za-z0-9_.:$-]{1,64}$")
		}
		ev.Type = typ
	}
	if ts, ok := str("ts", false); ok {
		t, err := time.Parse(time.RFC3339Nano, ts)
		switch {
		case err != nil:
			bad("ts", "ts must be an ISO 8601 timestamp such as 2026-01-31T09:05:00.120Z")
		case t.After(now.Add(MaxFuture)):
			bad("ts", "ts is more than 24 h in the future")
		case t.Year() < 1970:
			bad("ts", "ts is before 1970")
		default:
			ev.TS = t.UTC()
		}
	}
	optional := func(name string, dst **string) {
		if s, ok := str(name, false); ok {
			*dst = &s
		}
	}
	optional("url", &ev.URL)
	optional("referrer", &ev.Referrer)
	optional("user_agent", &ev.UserAgent)
	optional("user_id", &ev.UserID)
	if ev.UserID != nil {
		if n := utf8.RuneCountInString(*ev.UserID); n < 1 || n > 256 {
			bad("user_id", "user_id must be 1 to 256 characters")
		}
	}
	object := func(name string) json.RawMessage {
		v, ok := f[name]
		if !ok || string(v) == "null" {
			return nil
		}
		if v[0] != '{' {
			bad(name, "%s must be an object", name)
			return nil
		}
		return v
	}
	ev.Properties = object("properties")
	ev.Traits = object("traits")
	if c, ok := str("consent", false); ok {
		if c != ConsentGranted && c != ConsentDenied {
			bad("consent", "consent must be %q or %q", ConsentGranted, ConsentDenied)
		}
		ev.Consent = c
	}
	return ev, problems
}

// EnvelopeFields are the fields the wire boundary owns; the tracking plan's
// schemas see the event without them.
var EnvelopeFields = []string{"id", "site_id", "anon_id", "ts", "url", "type"}
