package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/privacy"
	"github.com/tally-analytics/tally/schema"
)

// Segment's HTTP Tracking API as an intake format: its messages become
// schema.Event by the mapping of docs/intake.md#segment-compatible-intake, then
// take the same gates as Tally's own events.

// Segment's documented limits (docs/intake.md#segment-compatible-intake).
const (
	segmentMessageLimit = 32 << 10
	segmentBodyLimit    = 500 << 10
	segmentMaxBatch     = 2500
)

// segmentNamespace is the UUID namespace of the name-based event ids of
// messages whose messageId is not a UUID: id = UUIDv5(segmentNamespace,
// messageId), so a resend of the message is a duplicate. Part of the wire
// contract (docs/intake.md#segment-compatible-intake): never change it.
var segmentNamespace = uuid.MustParse("7a1e5e6b-3c1d-4b0e-9f0a-5e67e17a11e9")

// segmentConsentCategory is the consent category of
// context.consent.categoryPreferences that stands for analytics consent,
// compared without regard to case.
const segmentConsentCategory = "analytics"

// segmentCall is one call of Segment's API: its path, the short path
// Segment's browser SDK posts it to, and the event type it maps to ("" for
// track, whose type is the event name).
type segmentCall struct {
	name, short, eventType string
}

// segmentCalls are Segment's message types.
var segmentCalls = []segmentCall{
	{"track", "t", ""},
	{"page", "p", "pageview"},
	{"screen", "s", "screen"},
	{"identify", "i", "identify"},
	{"group", "g", "group"},
	{"alias", "a", "alias"},
}

// segmentCallNamed is the call of a message's type, or nil.
func segmentCallNamed(name string) *segmentCall {
	for i := range segmentCalls {
		if segmentCalls[i].name == name {
			return &segmentCalls[i]
		}
	}
	return nil
}

// segmentFormat is the intake format of one Segment endpoint: a single
// call (its messages take their type from the path) or, for call nil,
// /v1/batch. A batch stores its valid messages and refuses the others one
// by one, as Segment does.
func segmentFormat(call *segmentCall) *intakeFormat {
	return &intakeFormat{endpoint: endpointSegment, credential: (*Server).segmentCredential,
		parse: func(body []byte, now time.Time) ([]schema.Event, []refusal, error) {
			return parseSegment(call, body, now)
		},
		agentFrom: agentField, locate: true, batch: storeValid,
		siteFromCredential: true, bodyLimit: segmentBodyLimit, tooLarge: fault.InvalidEvent,
		redact: redactWriteKey, okStatus: 200, okBody: segmentOK, dlqPayload: segmentDLQPayload, cookieless: segmentCookieless}
}

// redactWriteKey drops the body's top-level writeKey: a credential, which
// neither raw nor the inspection feed may keep.
func redactWriteKey(body []byte) []byte {
	if !bytes.Contains(body, []byte(`"writeKey"`)) {
		return body
	}
	return withoutMember(bytes.TrimSpace(body), "writeKey")
}

// segmentOK is the body of a request the Segment intake took: Segment's
// {"success": true} and the counts of Tally's own answer.
func segmentOK(d *decision) any {
	return segmentAnswer{Success: true, intakeAnswer: d.answer, Rejected: len(d.refused)}
}

// segmentInvalid is the invalid_event error of a request refused whole.
func segmentInvalid(details ...fault.Detail) error {
	msg := "the Segment message is invalid"
	if len(details) == 1 {
		msg += ": " + details[0].Message
	} else if len(details) > 1 {
		msg = "no message of the batch is valid"
	}
	return fault.WithDetails(fault.InvalidEvent, msg, details)
}

// segmentBatch is what a batch body gives each of its messages.
type segmentBatch struct {
	context, integrations json.RawMessage
	sentAt                string
}

// parseSegment turns a Segment body into events: one message (call set)
// or a batch. The request is refused whole (400) when the body is not a
// JSON object, exceeds a limit, or holds no valid message; otherwise each
// invalid message of a batch is a refusal and the others go on.
func parseSegment(call *segmentCall, body []byte, now time.Time) ([]schema.Event, []refusal, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, nil, segmentInvalid(fault.Detail{Path: "", Message: "body is empty: send a JSON object"})
	}
	if !json.Valid(body) {
		return nil, nil, segmentInvalid(fault.Detail{Path: "", Message: "body is not valid JSON"})
	}
	var top map[string]json.RawMessage
	if body[0] != '{' || json.Unmarshal(body, &top) != nil {
		return nil, nil, segmentInvalid(fault.Detail{Path: "", Message: "body must be a JSON object"})
	}
	if call != nil {
		if len(body) > segmentMessageLimit {
			return nil, nil, segmentInvalid(fault.Detail{Path: "", Message: fmt.Sprintf("a message is at most %d bytes, this one is %d", segmentMessageLimit, len(body))})
		}
		ev, problems := segmentMessage(body, call, "", segmentBatch{}, now)
		if problems != nil {
			return nil, nil, segmentInvalid(problems...)
		}
		return []schema.Event{ev}, nil, nil
	}
	var elements []json.RawMessage
	if v, ok := top["batch"]; !ok || v[0] != '[' || json.Unmarshal(v, &elements) != nil {
		return nil, nil, segmentInvalid(fault.Detail{Path: "/batch", Message: "batch must be an array of messages"})
	}
	if len(elements) == 0 || len(elements) > segmentMaxBatch {
		return nil, nil, segmentInvalid(fault.Detail{Path: "/batch", Message: fmt.Sprintf("a batch holds 1 to %d messages, this one holds %d", segmentMaxBatch, len(elements))})
	}
	var b segmentBatch
	var problems []fault.Detail
	b.context, problems = objectField(top, "context", "", problems)
	b.integrations, problems = objectField(top, "integrations", "", problems)
	if s, ok := stringField(top, "sentAt"); ok {
		b.sentAt = s
	}
	for i, el := range elements {
		if len(el) > segmentMessageLimit {
			problems = append(problems, fault.Detail{Path: "/batch/" + strconv.Itoa(i), Message: fmt.Sprintf("a message is at most %d bytes, this one is %d", segmentMessageLimit, len(el))})
		}
	}
	if problems != nil {
		return nil, nil, segmentInvalid(problems...)
	}
	events := make([]schema.Event, 0, len(elements))
	var refused []refusal
	var all []fault.Detail
	for i, el := range elements {
		ev, problems := segmentMessage(el, nil, "/batch/"+strconv.Itoa(i), b, now)
		ev.Index = i
		if problems != nil {
			refused = append(refused, refusal{index: i, raw: ev.Raw, code: fault.InvalidEvent, details: problems})
			all = append(all, problems...)
			continue
		}
		events = append(events, ev)
	}
	if len(events) == 0 {
		return nil, nil, segmentInvalid(all...)
	}
	return events, refused, nil
}

// segmentMessage maps one message (docs/intake.md#segment-compatible-intake,
// the mapping table) and returns its problems, pointers under prefix. call is
// the path's call, nil for a batch element, whose type field says.
func segmentMessage(raw json.RawMessage, call *segmentCall, prefix string, b segmentBatch, now time.Time) (schema.Event, []fault.Detail) {
	ev := schema.Event{Raw: raw, Pointer: prefix, TS: now}
	var problems []fault.Detail
	bad := func(field, format string, args ...any) {
		problems = append(problems, fault.Detail{Path: prefix + "/" + field, Message: fmt.Sprintf(format, args...)})
	}
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &ev.Fields) != nil {
		return ev, []fault.Detail{{Path: prefix, Message: "a message must be a JSON object"}}
	}
	f := ev.Fields
	if _, ok := f["writeKey"]; ok {
		// The write key is a credential: raw keeps the message without it.
		ev.Raw = withoutMember(ev.Raw, "writeKey")
		delete(f, "writeKey")
	}
	if bytes.Contains(f["context"], []byte(`"ip"`)) {
		// context.ip is for the location lookup only: never stored.
		ev.Raw = withoutNested(ev.Raw, "context", "ip")
	}
	if call == nil {
		name, _ := stringField(f, "type")
		if call = segmentCallNamed(name); call == nil {
			bad("type", "type must be one of track, page, screen, identify, group, alias")
			return ev, problems
		}
	} else {
		f["type"], _ = json.Marshal(call.name)
	}
	// The batch's context and integrations apply to every message; a
	// message's own keys win.
	var ctx json.RawMessage
	ctx, problems = objectField(f, "context", prefix, problems)
	if ctx = mergeObjects(b.context, ctx); ctx != nil {
		f["context"] = ctx
	}
	var integrations json.RawMessage
	integrations, problems = objectField(f, "integrations", prefix, problems)
	if integrations = mergeObjects(b.integrations, integrations); integrations != nil {
		f["integrations"] = integrations
	}

	userID, hasUser := idField(f, "userId")
	anonID, hasAnon := idField(f, "anonymousId")
	switch {
	case call.name == "alias":
		previous, ok := idField(f, "previousId")
		if !ok {
			bad("previousId", "an alias needs previousId")
		}
		if !hasUser {
			bad("userId", "an alias needs userId")
		}
		ev.AnonID = previous
	case hasAnon:
		ev.AnonID = anonID
	case hasUser:
		ev.AnonID = userID
	default:
		bad("userId", "a message needs userId or anonymousId")
	}
	if ev.AnonID != "" && utf8.RuneCountInString(ev.AnonID) > 128 {
		bad("anonymousId", "the anonymous id (anonymousId, else userId; previousId for an alias) must be at most 128 characters")
	}
	if hasUser {
		if utf8.RuneCountInString(userID) > 256 {
			bad("userId", "userId must be at most 256 characters")
		}
		ev.UserID = &userID
	}

	ev.Type = call.eventType
	if call.name == "track" {
		name, ok := stringField(f, "event")
		if n := utf8.RuneCountInString(name); !ok || n < 1 || n > schema.MaxTypeLen {
			bad("event", "a track needs event, the event name: a string of 1 to %d characters", schema.MaxTypeLen)
		}
		ev.Type = name
	}
	if call.name == "group" {
		if _, ok := idField(f, "groupId"); !ok {
			bad("groupId", "a group needs groupId")
		}
	}

	if id, ok := stringField(f, "messageId"); ok && id != "" {
		if u, err := uuid.Parse(id); err == nil && len(id) == 36 {
			ev.ID = u.String()
		} else {
			ev.ID = uuid.NewSHA1(segmentNamespace, []byte(id)).String()
		}
	} else {
		ev.ID = uuid.NewString()
	}

	sentAt := b.sentAt
	if s, ok := stringField(f, "sentAt"); ok {
		sentAt = s
	}
	if s, ok := stringField(f, "timestamp"); ok {
		ts, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			bad("timestamp", "timestamp must be an ISO 8601 timestamp such as 2026-01-31T09:05:00.120Z")
		} else {
			// The client's clock may be off: timestamp is taken relative
			// to sentAt, which the same clock wrote.
			if sent, err := time.Parse(time.RFC3339Nano, sentAt); err == nil {
				ts = now.Add(-sent.Sub(ts))
			}
			switch {
			case ts.After(now.Add(schema.MaxFuture)):
				bad("timestamp", "timestamp is more than 24 h in the future")
			case ts.Year() < 1970:
				bad("timestamp", "timestamp is before 1970")
			default:
				ev.TS = ts.UTC()
			}
		}
	}

	var props json.RawMessage
	props, problems = objectField(f, "properties", prefix, problems)
	ev.Properties = props
	if call.name == "identify" {
		ev.Traits, problems = objectField(f, "traits", prefix, problems)
	}
	var page json.RawMessage
	if ctx != nil {
		var c map[string]json.RawMessage
		json.Unmarshal(ctx, &c) // cannot fail: checked as an object
		if ua, ok := stringField(c, "userAgent"); ok {
			ev.UserAgent = &ua
		}
		if ip, ok := stringField(c, "ip"); ok {
			ev.ClientIP = ip
		}
		page = c["page"]
		ev.Campaign = c["campaign"]
		ev.Consent = segmentConsent(c["consent"])
	}
	ev.URL = firstString(props, page, "url")
	ev.Referrer = firstString(props, page, "referrer")
	return ev, problems
}

// segmentConsent reads context.consent.categoryPreferences: the analytics
// category true is granted, false denied; absent, "".
func segmentConsent(consent json.RawMessage) string {
	var c struct {
		CategoryPreferences map[string]any `json:"categoryPreferences"`
	}
	if json.Unmarshal(consent, &c) != nil {
		return ""
	}
	for name, v := range c.CategoryPreferences {
		if !strings.EqualFold(name, segmentConsentCategory) {
			continue
		}
		switch v {
		case true:
			return schema.ConsentGranted
		case false:
			return schema.ConsentDenied
		}
	}
	return ""
}

// segmentDLQPayload is what the DLQ keeps of a quarantined message: the
// message as it was mapped, so its replay through /v1/batch maps the same:
// the batch's context and integrations merged in, timestamp the corrected
// event time and no sentAt, and its messageId (the event id when it had
// none). Like raw, it keeps no context.ip.
func segmentDLQPayload(ev *schema.Event) json.RawMessage {
	f := make(map[string]json.RawMessage, len(ev.Fields)+1)
	for k, v := range ev.Fields {
		f[k] = v
	}
	delete(f, "sentAt")
	if ctx, ok := f["context"]; ok && bytes.Contains(ctx, []byte(`"ip"`)) {
		f["context"] = withoutMember(ctx, "ip")
	}
	f["timestamp"], _ = json.Marshal(ev.TS.Format(time.RFC3339Nano))
	if _, ok := stringField(f, "messageId"); !ok {
		f["messageId"], _ = json.Marshal(ev.ID)
	}
	b, _ := json.Marshal(f)
	return b
}

// segmentCookieless rewrites a message privacy.Cookieless made cookieless
// into Segment's field names: anonymousId the cookieless id, no userId,
// previousId or traits, and URLs without their query string
// (docs/intake.md#gates-in-order). Its context is already privacy.CookielessContext's
// (privacy.StripIdentifiers, which runs first).
func segmentCookieless(ev *schema.Event) {
	f := make(map[string]json.RawMessage, len(ev.Fields))
	for k, v := range ev.Fields {
		f[k] = v
	}
	for _, k := range []string{"anon_id", "url", "referrer", "userId", "previousId", "traits"} {
		delete(f, k)
	}
	f["anonymousId"], _ = json.Marshal(ev.AnonID)
	if v, ok := f["properties"]; ok {
		f["properties"] = privacy.StripURLs(v)
	}
	ev.Fields = f
	ev.Raw, _ = json.Marshal(f)
}

// stringField is a string field of an object, ok false when absent or not
// a string.
func stringField(f map[string]json.RawMessage, name string) (string, bool) {
	v, ok := f[name]
	if !ok || len(v) == 0 || v[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// idField is an identifier field: a non-empty string, or a number as its
// JSON text (Segment accepts both).
func idField(f map[string]json.RawMessage, name string) (string, bool) {
	if s, ok := stringField(f, name); ok {
		return s, s != ""
	}
	v, ok := f[name]
	if !ok || len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return "", false
	}
	return string(v), true
}

// objectField is an optional object field (null counts as absent); any
// other value is a problem at prefix/name.
func objectField(f map[string]json.RawMessage, name, prefix string, problems []fault.Detail) (json.RawMessage, []fault.Detail) {
	v, ok := f[name]
	if !ok || string(v) == "null" {
		return nil, problems
	}
	if len(v) == 0 || v[0] != '{' {
		return nil, append(problems, fault.Detail{Path: prefix + "/" + name, Message: name + " must be an object"})
	}
	return v, problems
}

// mergeObjects is base with over's keys on top, shallow; nil when both
// are nil, over itself when base is nil.
func mergeObjects(base, over json.RawMessage) json.RawMessage {
	if base == nil {
		return over
	}
	if over == nil {
		return base
	}
	var b, o map[string]json.RawMessage
	json.Unmarshal(base, &b)
	json.Unmarshal(over, &o)
	if b == nil {
		b = map[string]json.RawMessage{}
	}
	for k, v := range o {
		b[k] = v
	}
	out, _ := json.Marshal(b)
	return out
}

// firstString is the string field name of the first object holding one.
func firstString(a, b json.RawMessage, name string) *string {
	for _, obj := range []json.RawMessage{a, b} {
		var o map[string]json.RawMessage
		if obj == nil || json.Unmarshal(obj, &o) != nil {
			continue
		}
		if s, ok := stringField(o, name); ok {
			return &s
		}
	}
	return nil
}

// withoutNested is the JSON object raw less the member name of its object
// member outer, every other byte as it was.
func withoutNested(raw json.RawMessage, outer, name string) json.RawMessage {
	start, end, ok := valueSpan(raw, outer)
	if !ok {
		return raw
	}
	inner := withoutMember(raw[start:end], name)
	out := make([]byte, 0, len(raw))
	return append(append(append(out, raw[:start]...), inner...), raw[end:]...)
}

// valueSpan is where the value of the top-level member name of the JSON
// object raw lies.
func valueSpan(raw json.RawMessage, name string) (start, end int, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return 0, 0, false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return 0, 0, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return 0, 0, false
		}
		if key, _ := t.(string); key == name {
			end = int(dec.InputOffset())
			return end - len(v), end, true
		}
	}
	return 0, 0, false
}

// withoutMember is the JSON object raw less its member name, every other
// byte as it was.
func withoutMember(raw json.RawMessage, name string) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return raw
	}
	start := int(dec.InputOffset()) // just after '{' or after the previous value
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return raw
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return raw
		}
		end := int(dec.InputOffset())
		if key, _ := t.(string); key == name {
			cut := raw[start:end]
			// The member's span, with the comma that separated it.
			lead := bytes.IndexByte(cut, ',')
			before := bytes.TrimSpace(raw[:start])
			out := make([]byte, 0, len(raw))
			if before[len(before)-1] == '{' {
				// The first member: drop the comma after it instead.
				rest := raw[end:]
				if i := bytes.IndexByte(rest, ','); i >= 0 && len(bytes.TrimSpace(rest[:i])) == 0 {
					rest = rest[i+1:]
				}
				out = append(append(out, raw[:start]...), rest...)
			} else {
				if lead < 0 {
					return raw
				}
				out = append(append(out, raw[:start+lead]...), raw[end:]...)
			}
			return out
		}
		start = end
	}
	return raw
}
