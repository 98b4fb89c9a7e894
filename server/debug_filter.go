package server

import (
	"bytes"
	"encoding/json"
	"net/url"
	"slices"
	"strings"

	"github.com/tally-analytics/tally/fault"
)

// propertyPrefix starts a decision-list parameter that filters by a field
// of the event's properties (docs/testing.md#dev-mode).
const propertyPrefix = "property."

// decisionParams are the other parameters of the decision list; anything
// else is refused, so a typo (properties.x, outcome=good) is not silently
// a filter that matches everything or nothing.
var decisionParams = []string{"site_id", "type", "outcome", "anon_id", "limit", "min", "wait"}

// outcomes are the values a decision's outcome takes.
var outcomes = []string{outcomeAccepted, outcomeDuplicate, outcomeQuarantined, outcomeDropped, outcomeRejected}

// decisionFilter reads the filters of the decision list (400
// invalid_filter); the limit is read apart.
func decisionFilter(q url.Values) (DebugFilter, error) {
	f := DebugFilter{SiteID: q.Get("site_id"), Type: q.Get("type"), Outcome: q.Get("outcome"), AnonID: q.Get("anon_id")}
	if f.Outcome != "" && !slices.Contains(outcomes, f.Outcome) {
		return f, fault.Errorf(fault.InvalidFilter, "outcome must be one of %s, not %q", strings.Join(outcomes, ", "), f.Outcome)
	}
	for name, values := range q {
		path, ok := strings.CutPrefix(name, propertyPrefix)
		if !ok {
			if !slices.Contains(decisionParams, name) {
				return f, fault.Errorf(fault.InvalidFilter, "unknown parameter %q: the filters are %s and property.NAME=VALUE", name, strings.Join(decisionParams, ", "))
			}
			if len(values) > 1 {
				return f, fault.Errorf(fault.InvalidFilter, "%s is given %d times, give it once", name, len(values))
			}
			continue
		}
		if path == "" || slices.Contains(strings.Split(path, "."), "") {
			return f, fault.Errorf(fault.InvalidFilter, "%q names no property: write property.NAME=VALUE, with dots between nested names (property.cart.total=49)", name)
		}
		if len(values) > 1 {
			return f, fault.Errorf(fault.InvalidFilter, "%s is given %d times: one value per property", name, len(values))
		}
		if f.Properties == nil {
			f.Properties = map[string]string{}
		}
		f.Properties[path] = values[0]
	}
	return f, nil
}

// matchProperties reports whether payload, an event, has every property
// of want: NAME (dots for nested fields) equal to VALUE, a JSON string as
// is, any other scalar (number, boolean, null) by its JSON text as sent.
// Objects and arrays match nothing, and neither does a payload that is not
// one event (a refused batch, a cut or broken body).
func matchProperties(payload json.RawMessage, want map[string]string) bool {
	if len(want) == 0 {
		return true
	}
	var ev struct {
		Properties json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(payload, &ev) != nil || len(ev.Properties) == 0 {
		return false
	}
	for path, value := range want {
		raw, ok := lookup(ev.Properties, strings.Split(path, "."))
		if !ok || !scalarEquals(raw, value) {
			return false
		}
	}
	return true
}

// lookup follows names down nested objects.
func lookup(raw json.RawMessage, names []string) (json.RawMessage, bool) {
	for _, name := range names {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil || obj == nil {
			return nil, false
		}
		if raw = obj[name]; raw == nil {
			return nil, false
		}
	}
	return raw, true
}

// scalarEquals compares a JSON value with a filter's text.
func scalarEquals(raw json.RawMessage, value string) bool {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || raw[0] == '{' || raw[0] == '[':
		return false
	case raw[0] == '"':
		var s string
		return json.Unmarshal(raw, &s) == nil && s == value
	default:
		return string(raw) == value
	}
}
