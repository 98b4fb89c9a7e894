package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/tally-analytics/tally/fault"
)

// Plan modes: what the collector does with an event that fails the plan.
const (
	ModeReject     = "reject"     // 400 schema_validation_failed, nothing stored
	ModeQuarantine = "quarantine" // 202, stored in the DLQ with its errors
)

// Wildcard is the plan key that any event type without its own entry uses.
const Wildcard = "*"

// Plan is a compiled tracking plan. It is immutable and safe for
// concurrent use; reloading builds a new Plan.
type Plan struct {
	Mode    string
	schemas map[string]*jsonschema.Schema
}

// planURL names the plan document inside the compiler. Schemas may $ref
// anything inside the plan file ("#/$defs/money", "#/events/x"); the loader
// refuses every other URL, so validation never touches the network or disk.
const planURL = "urn:tally:plan"

type refuseLoader struct{}

// Load refuses every URL: schemas come only from the plan file itself.
func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("$ref to %q refused: a plan may only refer inside its own file", url)
}

// LoadPlan reads and compiles the plan file at path.
func LoadPlan(path string) (*Plan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tracking plan: %w", err)
	}
	p, err := ParsePlan(data)
	if err != nil {
		return nil, fmt.Errorf("tracking plan %s: %w", path, err)
	}
	return p, nil
}

// ParsePlan compiles a plan document: {"mode": ..., "events": {type: schema}}.
// Every schema is compiled once here (draft 2020-12 unless it names another
// with $schema); an error names the event and the problem.
func ParsePlan(data []byte) (*Plan, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	root, ok := doc.(map[string]any)
	if !ok {
		return nil, errors.New(`must be a JSON object {"mode": ..., "events": {...}}`)
	}
	p := &Plan{Mode: ModeReject, schemas: map[string]*jsonschema.Schema{}}
	if m, ok := root["mode"]; ok {
		s, _ := m.(string)
		if s != ModeReject && s != ModeQuarantine {
			return nil, fmt.Errorf("unknown mode %v: use %q or %q", m, ModeReject, ModeQuarantine)
		}
		p.Mode = s
	}
	events, ok := root["events"].(map[string]any)
	if !ok {
		return nil, errors.New(`"events" must be an object mapping event types to JSON Schemas`)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	if err := c.AddResource(planURL, doc); err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	names := make([]string, 0, len(events))
	for name := range events {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		// Names are wider than the native type pattern: a Segment track's
		// type is its event name, such as "Order Completed"
		// (docs/intake.md#segment-compatible-intake).
		if n := utf8.RuneCountInString(name); name != Wildcard && (n < 1 || n > MaxTypeLen) {
			return nil, fmt.Errorf("event %q: the name must be 1 to %d characters or be %q", name, MaxTypeLen, Wildcard)
		}
		sch, err := c.Compile(planURL + "#/events/" + escapePointer(name))
		if err != nil {
			return nil, fmt.Errorf("event %q: schema does not compile: %v", name, err)
		}
		p.schemas[name] = sch
	}
	return p, nil
}

// escapePointer escapes one JSON Pointer token (RFC 6901) for a URL fragment.
func escapePointer(s string) string {
	s = strings.ReplaceAll(s, "~", "~0")
	s = strings.ReplaceAll(s, "/", "~1")
	return strings.ReplaceAll(s, "$", "%24")
}

// Events lists the event types the plan names, the wildcard included.
func (p *Plan) Events() []string {
	names := make([]string, 0, len(p.schemas))
	for n := range p.schemas {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

var printer = message.NewPrinter(language.English)

// Validate checks ev against the schema of its type (or the wildcard),
// without the envelope fields. It returns nil for a valid event, else one
// detail per violated keyword location, sorted by path, each a JSON Pointer into the
// original request (so "/properties/amount", or "/3/properties/amount" in
// a batch). An unknown type gives exactly one detail at "/type".
func (p *Plan) Validate(ev *Event) []fault.Detail {
	sch, ok := p.schemas[ev.Type]
	if !ok {
		if sch, ok = p.schemas[Wildcard]; !ok {
			return []fault.Detail{{Path: ev.Pointer + "/type", Message: "unknown event"}}
		}
	}
	// Only the fields the schema sees are decoded (again, with numbers
	// kept exact as the validator wants them); the envelope is skipped.
	obj := make(map[string]any, len(ev.Fields))
	for name, raw := range ev.Fields {
		if slices.Contains(EnvelopeFields, name) {
			continue
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil { // cannot happen: Parse accepted these bytes
			return []fault.Detail{{Path: ev.Pointer, Message: "event is not valid JSON"}}
		}
		obj[name] = v
	}
	if details := hugeNumbers(obj, ev.Pointer); details != nil {
		return details
	}
	err := sch.Validate(obj)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []fault.Detail{{Path: ev.Pointer, Message: err.Error()}}
	}
	var details []fault.Detail
	seen := map[fault.Detail]bool{}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		add := func(d fault.Detail) {
			if !seen[d] {
				seen[d] = true
				details = append(details, d)
			}
		}
		at := ev.Pointer + pointer(e.InstanceLocation)
		// A missing property is reported where it should have been
		// ("/properties/amount"), not at the object that lacks it.
		if req, ok := e.ErrorKind.(*kind.Required); ok {
			for _, name := range req.Missing {
				add(fault.Detail{Path: at + pointer([]string{name}), Message: "missing required property '" + name + "'"})
			}
			return
		}
		add(fault.Detail{Path: at, Message: e.ErrorKind.LocalizedString(printer)})
	}
	walk(ve)
	// The validator visits an object's properties in map order, so the
	// same event would list its problems in a different order from one
	// request to the next; clients and tests want one answer.
	slices.SortStableFunc(details, func(a, b fault.Detail) int {
		return strings.Compare(a.Path, b.Path)
	})
	return details
}

// pointer renders instance location tokens as a JSON Pointer.
// Bounds of a number the plan's validator is given: its text's length and
// its exponent's magnitude.
const (
	maxPlanNumber   = 100
	maxPlanExponent = 400
)

// hugeNumbers lists, as details at their paths, the numbers of v (decoded
// as jsonschema decodes, numbers as json.Number) that the validator must
// not see: longer than maxPlanNumber characters, or with an exponent
// beyond ±maxPlanExponent. It compares numbers as exact fractions
// (big.Rat): 1e1000001 made it panic (a 500), 1e999999 costs 35 ms and a
// number of a million digits 3 s, per keyword that compares it, where a
// number within the bounds costs microseconds; every number a client
// means (a float64 is under 1.8e308) is far within them. Sorted by path;
// nil when there is none.
func hugeNumbers(v map[string]any, at string) []fault.Detail {
	var details []fault.Detail
	var walk func(v any, path []string)
	walk = func(v any, path []string) {
		switch t := v.(type) {
		case map[string]any:
			for k, x := range t {
				walk(x, append(path, k))
			}
		case []any:
			for i, x := range t {
				walk(x, append(path, strconv.Itoa(i)))
			}
		case json.Number:
			if len(t) > maxPlanNumber || !exponentWithin(string(t), maxPlanExponent) {
				details = append(details, fault.Detail{Path: at + pointer(path),
					Message: fmt.Sprintf("number out of range: a number the tracking plan checks has at most %d characters and an exponent within ±%d", maxPlanNumber, maxPlanExponent)})
			}
		}
	}
	walk(v, nil)
	slices.SortFunc(details, func(a, b fault.Detail) int { return strings.Compare(a.Path, b.Path) })
	return details
}

// exponentWithin reports whether the exponent of the number text n (0
// when it has none) is within ±limit.
func exponentWithin(n string, limit int) bool {
	i := strings.IndexAny(n, "eE")
	if i < 0 {
		return true
	}
	e, err := strconv.Atoi(strings.TrimPrefix(n[i+1:], "+"))
	return err == nil && e >= -limit && e <= limit
}

func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		t = strings.ReplaceAll(t, "~", "~0")
		b.WriteString(strings.ReplaceAll(t, "/", "~1"))
	}
	return b.String()
}

// MarshalDetails encodes details for storage in the DLQ's error column.
func MarshalDetails(details []fault.Detail) string {
	b, _ := json.Marshal(details)
	return string(b)
}
