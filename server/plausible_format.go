package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/schema"
	"github.com/tally-analytics/tally/storage"
)

// Plausible's Events API (POST /api/event) as an intake format, so a page
// keeps Plausible's tracker and changes only the host
// (docs/intake.md#plausible--and-umami-compatible-intake). Field names and
// limits follow Plausible's own parser, lib/plausible/ingestion/request.ex in
// plausible/analytics: every field has a short name (the tracker's) and a long
// one (the documented API's), and the short one wins.

// Plausible's limits (request.ex): the event name's characters, the url's
// and referrer's bytes, the props' count and their keys' and values' bytes.
const (
	plausibleMaxName     = 120
	plausibleMaxURL      = 2000
	plausibleMaxProps    = 30
	plausibleMaxPropKey  = 300
	plausibleMaxPropText = 2000
)

// plausibleEngagement is the event Plausible's trackers send when a page is
// left or hidden, with its scroll depth (sd) and engaged time (e): not an
// event of the page but a measure of one, added to its pageview
// (docs/intake.md#engagement).
const plausibleEngagement = "engagement"

// plausibleMaxEngagedMS bounds one engagement event's time: a day.
const plausibleMaxEngagedMS = 24 * 60 * 60 * 1000

// plausibleEvents is the format of POST /api/event. Every event is stored
// in the cookieless form: Plausible's tracker keeps no id in the browser,
// and the collector counts its visitors by address and User-Agent as
// Plausible does (docs/intake.md#gates-in-order, gate 5).
var plausibleEvents = &intakeFormat{endpoint: endpointPlausible,
	credential: trackerCredential(plausibleSiteNames), parse: parsePlausible,
	agentFrom: agentHeader, locate: true, batch: allOrNothing, siteFromCredential: true,
	okStatus: http.StatusAccepted, okWrite: plausibleOK, dlqPayload: nativeDLQPayload,
	cookieless: plausibleCookieless, engagement: plausibleEngagementOf}

// plausibleOK is Plausible's answer to an event it took: 202 and the text
// "ok", with x-plausible-dropped: 1 when the event was dropped (a bot, or
// consent required), as Plausible marks an event it did not record.
func plausibleOK(w http.ResponseWriter, d *decision) {
	if d.answer.Dropped > 0 {
		w.Header().Set("X-Plausible-Dropped", strconv.Itoa(d.answer.Dropped))
	}
	writeText(w, http.StatusAccepted, "ok")
}

// plausibleField is the value of a field by its short name, else its long
// ones, as request.ex reads them (n || name).
func plausibleField(f map[string]json.RawMessage, names ...string) (json.RawMessage, string) {
	for _, n := range names {
		if v, ok := f[n]; ok && string(v) != "null" {
			return v, n
		}
	}
	return nil, names[0]
}

// plausibleObject decodes a Plausible body, which must be a JSON object.
func plausibleObject(body []byte) (map[string]json.RawMessage, error) {
	body = bytes.TrimSpace(body)
	var f map[string]json.RawMessage
	if len(body) == 0 || body[0] != '{' || json.Unmarshal(body, &f) != nil {
		return nil, fault.WithDetails(fault.InvalidEvent, "the body must be a JSON object such as {\"name\":\"pageview\",\"url\":\"https://example.com/\",\"domain\":\"example.com\"}",
			[]fault.Detail{{Path: "", Message: "body is not a JSON object"}})
	}
	return f, nil
}

// plausibleSiteNames is the names of sites a body's domain lists, in order:
// d (or domain) split at commas, each trimmed and without "www.", as
// request.ex sanitizes them; without a domain, the url's host.
func plausibleSiteNames(body []byte) ([]string, error) {
	f, err := plausibleObject(body)
	if err != nil {
		return nil, err
	}
	v, key := plausibleField(f, "d", "domain")
	var names []string
	if v != nil {
		var raw string
		if json.Unmarshal(v, &raw) != nil {
			return nil, plausibleInvalid("/"+key, "domain must be a string: the site's alias or id, or several separated by commas")
		}
		for _, n := range strings.Split(raw, ",") {
			if n = strings.TrimPrefix(strings.TrimSpace(n), "www."); n != "" {
				names = append(names, n)
			}
		}
	} else if u, _ := plausibleURL(f); u != nil {
		names = append(names, strings.TrimPrefix(u.Hostname(), "www."))
	}
	if len(names) == 0 || names[0] == "" {
		return nil, plausibleInvalid("/domain", "domain is required: the site's alias or id")
	}
	return names, nil
}

// plausibleURL is the body's url, parsed, or nil when it has none that
// parses.
func plausibleURL(f map[string]json.RawMessage) (*url.URL, string) {
	v, _ := plausibleField(f, "u", "url")
	var s string
	if v == nil || json.Unmarshal(v, &s) != nil {
		return nil, ""
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, s
	}
	return u, s
}

// plausibleInvalid is the invalid_event error of one problem.
func plausibleInvalid(path, msg string) error {
	return fault.WithDetails(fault.InvalidEvent, "the Plausible event is invalid: "+msg, []fault.Detail{{Path: path, Message: msg}})
}

// plausibleName is a body's event name: n (or name), a string or, as
// Plausible accepts for its 404 goal, an integer; "" when missing.
func plausibleName(f map[string]json.RawMessage) (string, error) {
	v, key := plausibleField(f, "n", "name")
	if v == nil {
		return "", plausibleInvalid("/name", "name is required: \"pageview\" or a custom event's name")
	}
	var name string
	if json.Unmarshal(v, &name) != nil {
		var n int64
		if json.Unmarshal(v, &n) != nil {
			return "", plausibleInvalid("/"+key, "name must be a string")
		}
		name = strconv.FormatInt(n, 10)
	}
	if c := utf8.RuneCountInString(name); strings.TrimSpace(name) == "" || c > plausibleMaxName {
		return "", plausibleInvalid("/"+key, fmt.Sprintf("name must be 1 to %d characters, not blank", plausibleMaxName))
	}
	return name, nil
}

// parsePlausible maps one Plausible event
// (docs/intake.md#plausible--and-umami-compatible-intake, the table): name,
// url, referrer, props and revenue, and the campaign of the url's utm
// parameters.
func parsePlausible(body []byte, now time.Time) ([]schema.Event, []refusal, error) {
	f, err := plausibleObject(body)
	if err != nil {
		return nil, nil, err
	}
	ev := schema.Event{Fields: f, TS: now, ID: uuid.NewString(), Consent: schema.ConsentDenied}
	if ev.Type, err = plausibleName(f); err != nil {
		return nil, nil, err
	}
	if ev.Type == plausibleEngagement {
		if _, err := plausibleMeasure(f); err != nil {
			return nil, nil, err
		}
	}
	u, rawURL := plausibleURL(f)
	switch {
	case rawURL == "" && u == nil:
		return nil, nil, plausibleInvalid("/url", "url is required: the page's URL, a string")
	case len(rawURL) > plausibleMaxURL:
		return nil, nil, plausibleInvalid("/url", fmt.Sprintf("url is at most %d bytes", plausibleMaxURL))
	case u == nil || u.Scheme == "data":
		return nil, nil, plausibleInvalid("/url", "url must be a valid URL such as https://example.com/page (not data:)")
	}
	if plausibleHashMode(f) && u.Fragment != "" {
		rawURL = hashPageURL(u)
	}
	ev.URL = &rawURL
	if v, key := plausibleField(f, "r", "referrer"); v != nil {
		var ref string
		if json.Unmarshal(v, &ref) != nil {
			return nil, nil, plausibleInvalid("/"+key, "referrer must be a string or null")
		}
		if len(ref) > plausibleMaxURL {
			ref = ref[:plausibleMaxURL] // as request.ex cuts it
		}
		if ref != "" {
			ev.Referrer = &ref
		}
	}
	if ev.Type == plausibleEngagement {
		// A measure of the pageview, whose props it repeats: none kept.
		ev.Properties = json.RawMessage(`{}`)
		f["properties"] = ev.Properties
		ev.Raw, _ = json.Marshal(f)
		return []schema.Event{ev}, nil, nil
	}
	props, err := plausibleProps(f)
	if err != nil {
		return nil, nil, err
	}
	if v, key := plausibleField(f, "$", "revenue"); v != nil {
		rev, err := plausibleRevenue(v, "/"+key)
		if err != nil {
			return nil, nil, err
		}
		props["revenue"] = rev
	}
	ev.Properties, _ = json.Marshal(props)
	ev.Campaign = utmCampaign(u)
	keepCampaign(f, ev.Campaign)
	f["properties"] = ev.Properties
	ev.Raw, _ = json.Marshal(f)
	return []schema.Event{ev}, nil, nil
}

// plausibleMeasure is an engagement body's measure: sd (or scroll_depth)
// a number, its percent clamped to 0..100 as Plausible clamps it, and e
// (or engagement_time) milliseconds, 0 to a day, 0 when absent.
func plausibleMeasure(f map[string]json.RawMessage) (*storage.Engagement, error) {
	var sd, e float64
	v, key := plausibleField(f, "sd", "scroll_depth")
	if v == nil || json.Unmarshal(v, &sd) != nil {
		return nil, plausibleInvalid("/"+key, "an engagement needs sd, the scroll depth in percent, a number")
	}
	// e is optional: Plausible's own tests send scroll depth alone, and an
	// engagement without its time still measures how far the page was read.
	v, key = plausibleField(f, "e", "engagement_time")
	if v != nil && (json.Unmarshal(v, &e) != nil || e < 0 || e > plausibleMaxEngagedMS) {
		return nil, plausibleInvalid("/"+key, fmt.Sprintf("an engagement's e, the engaged time in milliseconds, must be 0 to %d", plausibleMaxEngagedMS))
	}
	return &storage.Engagement{ScrollDepth: int(math.Round(min(max(sd, 0), 100))), EngagedMS: int64(e)}, nil
}

// plausibleEngagementOf is the measure of an engagement event (checked by
// parsePlausible), nil for any other event.
func plausibleEngagementOf(ev *schema.Event) *storage.Engagement {
	if ev.Type != plausibleEngagement {
		return nil
	}
	m, _ := plausibleMeasure(ev.Fields)
	return m
}

// plausibleHashMode is whether the tracker routes pages by the URL's
// fragment: h (or hashMode) 1 or true, as Plausible's hash scripts send.
func plausibleHashMode(f map[string]json.RawMessage) bool {
	v, _ := plausibleField(f, "h", "hashMode")
	return string(v) == "1" || string(v) == "true"
}

// hashPageURL is the URL of a hash-routed page: its fragment moved into
// its path, escaped (https://a.test/%23/pricing), so that its page is
// /#/pricing as Plausible names it, and the stored URL, which keeps no
// fragment, keeps it (docs/intake.md#plausibles-snippet).
func hashPageURL(u *url.URL) string {
	c := *u
	c.Path, c.RawPath = u.Path+"#"+u.Fragment, ""
	c.Fragment, c.RawFragment = "", ""
	return c.String()
}

// plausibleProps reads m, meta, p or props (an object, or a JSON string of
// one) as request.ex does: lists, objects, null and blank values are left
// out; at most 30 are kept; a key over 300 bytes or a value over 2,000 is
// refused. Values are kept as sent (strings, numbers, booleans).
func plausibleProps(f map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	props := map[string]json.RawMessage{}
	v, key := plausibleField(f, "m", "meta", "p", "props")
	if v == nil {
		return props, nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(v, &obj) != nil {
		var s string
		if json.Unmarshal(v, &s) != nil || json.Unmarshal([]byte(s), &obj) != nil || obj == nil {
			return nil, plausibleInvalid("/"+key, "props must be an object of custom properties")
		}
	}
	for k, val := range obj {
		val = bytes.TrimSpace(val)
		if len(val) == 0 || val[0] == '[' || val[0] == '{' || string(val) == "null" || strings.TrimSpace(k) == "" {
			continue
		}
		var s string
		if json.Unmarshal(val, &s) == nil && strings.TrimSpace(s) == "" {
			continue
		}
		if len(k) > plausibleMaxPropKey || len(val) > plausibleMaxPropText+2 {
			return nil, plausibleInvalid("/"+key+"/"+k, fmt.Sprintf("a property's name is at most %d bytes and its value %d", plausibleMaxPropKey, plausibleMaxPropText))
		}
		if len(props) == plausibleMaxProps {
			break
		}
		props[k] = val
	}
	return props, nil
}

// plausibleRevenue checks $ (or revenue), {"amount": 49.9, "currency":
// "EUR"}, and returns it in the form the query API's revenue metrics read
// (docs/query-api.md#goals-and-funnels): amount a number or a string of one,
// currency three letters, upper-cased.
func plausibleRevenue(v json.RawMessage, path string) (json.RawMessage, error) {
	var rev struct {
		Amount   json.RawMessage `json:"amount"`
		Currency string          `json:"currency"`
	}
	bad := plausibleInvalid(path, "revenue must be {\"amount\": a number or a string of one, \"currency\": a three-letter ISO 4217 code}")
	if json.Unmarshal(v, &rev) != nil || len(rev.Currency) != 3 {
		return nil, bad
	}
	var amount float64
	var s string
	switch {
	case json.Unmarshal(rev.Amount, &amount) == nil:
	case json.Unmarshal(rev.Amount, &s) == nil:
		var err error
		if amount, err = strconv.ParseFloat(strings.TrimSpace(s), 64); err != nil {
			return nil, bad
		}
	default:
		return nil, bad
	}
	for _, c := range rev.Currency {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return nil, bad
		}
	}
	out, _ := json.Marshal(map[string]any{"amount": amount, "currency": strings.ToUpper(rev.Currency)})
	return out, nil
}

// utmCampaign is the campaign of a page URL's utm parameters (the first of
// each), in the form of Segment's context.campaign, which a visit reads
// (docs/intake.md#visits): the cookieless form drops the query string, so the
// campaign is taken before it goes. Like Plausible, source falls back to
// the source and ref parameters. Nil without any.
func utmCampaign(u *url.URL) json.RawMessage {
	if u == nil || u.RawQuery == "" {
		return nil
	}
	q := u.Query()
	c := map[string]string{}
	for field, params := range map[string][]string{"source": {"utm_source", "source", "ref"}, "medium": {"utm_medium"},
		"name": {"utm_campaign"}, "term": {"utm_term"}, "content": {"utm_content"}} {
		for _, p := range params {
			if v := strings.TrimSpace(q.Get(p)); v != "" {
				c[field] = v
				break
			}
		}
	}
	if len(c) == 0 {
		return nil
	}
	b, _ := json.Marshal(c)
	return b
}

// keepCampaign puts a campaign into a message's raw as context.campaign,
// where a visit computed again from stored events finds it
// (docs/intake.md#visits), since the stored URL keeps no query string.
func keepCampaign(f map[string]json.RawMessage, c json.RawMessage) {
	if c == nil {
		return
	}
	f["context"], _ = json.Marshal(map[string]json.RawMessage{"campaign": c})
}

// plausibleCookieless writes the cookieless form of a Plausible event in
// Plausible's long field names: url and referrer without their query
// string (privacy.StripIdentifiers set them), no u or r, no anon_id.
func plausibleCookieless(ev *schema.Event) {
	f := make(map[string]json.RawMessage, len(ev.Fields))
	for k, v := range ev.Fields {
		f[k] = v
	}
	delete(f, "anon_id")
	delete(f, "u")
	delete(f, "r")
	ev.Fields = f
	ev.Raw, _ = json.Marshal(f)
}
