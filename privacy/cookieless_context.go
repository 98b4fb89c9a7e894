package privacy

import "encoding/json"

// cookielessContext is what the cookieless form keeps of an event's
// context object (Segment's, or one a native or tracker body carries):
// an allow-list, since Segment's context spec (segment-docs,
// src/connections/spec/common.md, "Context") holds stable identifiers
// beside the description of the browser or app (device.id,
// device.advertisingId, device.token, the device's name, externalIds,
// groupId, location's coordinates, referrer.id) and SDKs add keys of
// their own. Per key, the members kept of its object; nil keeps the value
// whole (a string, or userAgentData, which describes the browser only).
// Every other key and member goes. docs/intake.md#segment-compatible-intake.
var cookielessContext = map[string][]string{
	"active":        nil,
	"locale":        nil,
	"timezone":      nil,
	"userAgent":     nil,
	"userAgentData": nil,
	"app":           {"name", "version", "build", "namespace"},
	"campaign":      {"name", "source", "medium", "term", "content"},
	"consent":       {"categoryPreferences"},
	"device":        {"type", "manufacturer", "model", "version"},
	"library":       {"name", "version"},
	"location":      {"city", "country", "region"},
	"network":       {"bluetooth", "carrier", "cellular", "wifi"},
	"os":            {"name", "version"},
	"page":          {"path", "referrer", "title", "url"},
	"referrer":      {"type", "name"},
	"screen":        {"width", "height", "density"},
}

// CookielessContext is a context object as the cookieless form keeps it:
// the keys and members of cookielessContext, page's url and referrer
// without their query string. A value that is not an object is returned
// as it is (intake checked it).
func CookielessContext(ctx json.RawMessage) json.RawMessage {
	var c map[string]json.RawMessage
	if json.Unmarshal(ctx, &c) != nil || c == nil {
		return ctx
	}
	out := make(map[string]json.RawMessage, len(c))
	for k, v := range c {
		members, ok := cookielessContext[k]
		if !ok {
			continue
		}
		if members == nil {
			out[k] = v
			continue
		}
		var o map[string]json.RawMessage
		if json.Unmarshal(v, &o) != nil || o == nil {
			continue
		}
		kept := make(map[string]json.RawMessage, len(members))
		for _, m := range members {
			if mv, ok := o[m]; ok {
				kept[m] = mv
			}
		}
		b, _ := json.Marshal(kept)
		if k == "page" {
			b = StripURLs(b)
		}
		out[k] = b
	}
	b, _ := json.Marshal(out)
	return b
}

// StripURLs removes the query string and fragment of an object's url and
// referrer, and its search (a page's query string).
func StripURLs(obj json.RawMessage) json.RawMessage {
	var o map[string]json.RawMessage
	if json.Unmarshal(obj, &o) != nil || o == nil {
		return obj
	}
	delete(o, "search")
	for _, k := range []string{"url", "referrer"} {
		if v, ok := o[k]; ok && len(v) > 0 && v[0] == '"' {
			var s string
			if json.Unmarshal(v, &s) == nil {
				o[k], _ = json.Marshal(StripQuery(s))
			}
		}
	}
	b, _ := json.Marshal(o)
	return b
}
