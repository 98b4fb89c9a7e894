package server

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/privacy"
	"github.com/tally-analytics/tally/schema"
)

// Umami's POST /api/send as an intake format
// (docs/intake.md#plausible--and-umami-compatible-intake). The body is {type,
// payload}; the payload's fields and limits follow Umami 2.10.0's own schema in
// src/pages/api/send.ts (umami-software/umami, tag v2.10.0), and what its
// tracker (src/tracker/index.js) and @umami/node 0.4.0 send.

// Umami's limits (send.ts): the hostname's, the event name's, the
// language's and the screen's characters.
const (
	umamiMaxHostname = 100
	umamiMaxName     = 50
	umamiMaxLanguage = 35
	umamiMaxScreen   = 11
)

// umamiHostname is Umami's HOSTNAME_REGEX (src/lib/constants.ts).
var umamiHostname = regexp.MustCompile(`^(([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])\.)*([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])$`)

// umamiEvents is the format of POST /api/send. Like Plausible's, every
// event is stored in the cookieless form: Umami counts a session by
// website, hostname, address and User-Agent, and keeps no id in the
// browser either.
var umamiEvents = &intakeFormat{endpoint: endpointUmami,
	credential: trackerCredential(umamiSiteNames), parse: parseUmami,
	agentFrom: agentHeader, locate: true, batch: allOrNothing, siteFromCredential: true,
	okStatus: http.StatusOK, okWrite: umamiOK, dlqPayload: nativeDLQPayload,
	cookieless: umamiCookieless}

// umamiOK is Umami's answer: 200 and a session token as text, which its
// tracker keeps and sends back in the x-umami-cache header so that Umami
// can skip its session lookup. Tally has no session to look up (the
// visitor is the cookieless id), so the token is opaque random text it
// ignores when it comes back.
func umamiOK(w http.ResponseWriter, _ *decision) {
	var b [18]byte
	rand.Read(b[:])
	writeText(w, http.StatusOK, base64.RawURLEncoding.EncodeToString(b[:]))
}

// umamiInvalid is the invalid_event error of one problem.
func umamiInvalid(path, msg string) error {
	return fault.WithDetails(fault.InvalidEvent, "the Umami event is invalid: "+msg, []fault.Detail{{Path: path, Message: msg}})
}

// umamiBody decodes {type, payload}: type "event" or "identify" (any
// case), payload an object.
func umamiBody(body []byte) (string, map[string]json.RawMessage, map[string]json.RawMessage, error) {
	body = bytes.TrimSpace(body)
	var top map[string]json.RawMessage
	if len(body) == 0 || body[0] != '{' || json.Unmarshal(body, &top) != nil {
		return "", nil, nil, fault.WithDetails(fault.InvalidEvent, "the body must be a JSON object such as {\"type\":\"event\",\"payload\":{\"website\":\"...\",\"url\":\"/\"}}",
			[]fault.Detail{{Path: "", Message: "body is not a JSON object"}})
	}
	kind, _ := stringField(top, "type")
	kind = strings.ToLower(kind)
	if kind != "event" && kind != "identify" {
		return "", nil, nil, umamiInvalid("/type", "type must be \"event\" or \"identify\"")
	}
	var payload map[string]json.RawMessage
	if v := top["payload"]; len(v) == 0 || v[0] != '{' || json.Unmarshal(v, &payload) != nil {
		return "", nil, nil, umamiInvalid("/payload", "payload must be an object")
	}
	return kind, top, payload, nil
}

// umamiSiteNames is the site a body names: payload.website.
func umamiSiteNames(body []byte) ([]string, error) {
	_, _, payload, err := umamiBody(body)
	if err != nil {
		return nil, err
	}
	website, ok := stringField(payload, "website")
	if !ok || strings.TrimSpace(website) == "" {
		return nil, umamiInvalid("/payload/website", "website is required: the site's alias or id")
	}
	return []string{strings.TrimSpace(website)}, nil
}

// parseUmami maps one Umami body
// (docs/intake.md#plausible--and-umami-compatible-intake, the table). An event
// without name is a pageview; with name, a custom event of that name with data
// as its properties. An identify is an event of type identify whose data are
// its properties: Umami's identify names no user, so there is no profile to
// merge them into.
func parseUmami(body []byte, now time.Time) ([]schema.Event, []refusal, error) {
	kind, top, p, err := umamiBody(body)
	if err != nil {
		return nil, nil, err
	}
	ev := schema.Event{Fields: top, TS: now, ID: uuid.NewString(), Consent: schema.ConsentDenied, Type: "pageview"}
	str := func(name string, max int) (string, error) {
		v, ok := p[name]
		if !ok || string(v) == "null" {
			return "", nil
		}
		s, ok := stringField(p, name)
		if !ok {
			return "", umamiInvalid("/payload/"+name, name+" must be a string")
		}
		if max > 0 && utf8.RuneCountInString(s) > max {
			return "", umamiInvalid("/payload/"+name, fmt.Sprintf("%s is at most %d characters", name, max))
		}
		return s, nil
	}
	hostname, err := str("hostname", umamiMaxHostname)
	if err != nil {
		return nil, nil, err
	}
	if hostname != "" && !umamiHostname.MatchString(hostname) {
		return nil, nil, umamiInvalid("/payload/hostname", "hostname must be a host name such as example.com")
	}
	name, err := str("name", umamiMaxName)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range []struct {
		name string
		max  int
	}{{"language", umamiMaxLanguage}, {"screen", umamiMaxScreen}, {"title", 0}} {
		if _, err := str(f.name, f.max); err != nil {
			return nil, nil, err
		}
	}
	page, err := str("url", 0)
	if err != nil {
		return nil, nil, err
	}
	if page != "" {
		u := umamiURL(page, hostname)
		ev.URL = &u
		if parsed, err := url.Parse(u); err == nil {
			ev.Campaign = utmCampaign(parsed)
		}
	}
	ref, err := str("referrer", 0)
	if err != nil {
		return nil, nil, err
	}
	if ref != "" {
		ev.Referrer = &ref
	}
	ip, err := str("ip", 0)
	if err != nil {
		return nil, nil, err
	}
	if ip != "" {
		if _, err := netip.ParseAddr(ip); err != nil {
			return nil, nil, umamiInvalid("/payload/ip", "ip must be an IP address")
		}
		ev.ClientIP = ip
	}
	data, ok := p["data"]
	if ok && string(data) == "null" {
		data, ok = nil, false
	}
	if ok && (len(data) == 0 || data[0] != '{') {
		return nil, nil, umamiInvalid("/payload/data", "data must be an object")
	}
	switch {
	case kind == "identify":
		if !ok {
			return nil, nil, umamiInvalid("/payload/data", "an identify needs data, an object")
		}
		ev.Type = "identify"
	case name != "":
		ev.Type = name
	}
	if ok {
		ev.Properties = data
	} else {
		ev.Properties = json.RawMessage(`{}`)
	}
	top["properties"] = ev.Properties
	keepCampaign(top, ev.Campaign)
	if ip != "" {
		// The address is for the location and the visitor id only: never
		// stored (docs/intake.md#gates-in-order, gate 8).
		p2 := make(map[string]json.RawMessage, len(p))
		for k, v := range p {
			p2[k] = v
		}
		delete(p2, "ip")
		top["payload"], _ = json.Marshal(p2)
	}
	ev.Raw, _ = json.Marshal(top)
	return []schema.Event{ev}, nil, nil
}

// umamiURL is the page URL of an Umami url: the tracker sends the path and
// query (encoded with encodeURI) and the hostname apart, so the URL is
// https://<hostname><url>; a full http(s) URL is kept as sent, and a path
// without hostname stays a path (its page is still its path).
func umamiURL(page, hostname string) string {
	if strings.HasPrefix(page, "http://") || strings.HasPrefix(page, "https://") || hostname == "" {
		return page
	}
	if !strings.HasPrefix(page, "/") {
		page = "/" + page
	}
	return "https://" + hostname + page
}

// umamiPayloadKept are the members of an Umami payload its cookieless form
// keeps: those its tracker sends (the umami package's tracker,
// getPayload, and track's name and data; tag from data-tag of later
// releases). So the distinct id of later releases' identify (payload.id),
// the address (payload.ip) and any member of a sender's own go.
var umamiPayloadKept = []string{"website", "hostname", "screen", "language", "title", "url", "referrer", "name", "data", "tag"}

// umamiCookieless writes the cookieless form of an Umami body: the
// members of umamiPayloadKept, payload.url and payload.referrer without
// their query string, no anon_id and no top-level url or referrer (which
// privacy.StripIdentifiers adds in Tally's names).
func umamiCookieless(ev *schema.Event) {
	f := make(map[string]json.RawMessage, len(ev.Fields))
	for k, v := range ev.Fields {
		f[k] = v
	}
	delete(f, "anon_id")
	delete(f, "url")
	delete(f, "referrer")
	var p map[string]json.RawMessage
	if json.Unmarshal(f["payload"], &p) == nil && p != nil {
		kept := make(map[string]json.RawMessage, len(umamiPayloadKept))
		for _, k := range umamiPayloadKept {
			if v, ok := p[k]; ok {
				kept[k] = v
			}
		}
		f["payload"] = privacy.StripURLs(p2raw(kept))
	}
	ev.Fields = f
	ev.Raw, _ = json.Marshal(f)
}

// p2raw is an object's JSON.
func p2raw(o map[string]json.RawMessage) json.RawMessage {
	b, _ := json.Marshal(o)
	return b
}
