package server

import (
	"slices"
	"strings"
	"testing"
)

// TestQueryChannelsAndHostnames: visit:channel by Plausible's channel
// rules, visit:source by name, and event:hostname, as dimensions and
// filters, over the day partials and over the events (an event filter),
// by hand (docs/query-api.md#channels).
func TestQueryChannelsAndHostnames(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	for i, e := range []qev{
		{anon: "a", url: "https://shop.test/", ref: "https://www.google.com/"},
		{anon: "b", url: "https://blog.shop.test/post?utm_source=fb&utm_medium=paid"},
		{anon: "c", url: "https://www.shop.test/x?utm_medium=email"},
		{anon: "d", url: "https://shop.test/"},
		{anon: "e", url: "https://shop.test/", ref: "https://chatgpt.com/"},
		{anon: "f", url: "https://shop.test/", ref: "https://blog.test/a"},
		{anon: "g", url: "https://shop.test/", ref: "https://www.youtube.com/watch?v=1"},
		{anon: "h", url: "https://shop.test/?utm_source=Newsletter-UK"},
		{anon: "i", url: "https://shop.test/?utm_campaign=cross-network"},
		{anon: "j", url: "https://shop.test/?utm_medium=cpc"},
		{anon: "k", url: "https://shop.test/?utm_source=duckduckgo&utm_medium=paid"},
		{anon: "l", url: "https://blog.shop.test/?utm_medium=social"},
	} {
		e.typ, e.ts, e.ua = "pageview", utc(1, 5, 10, i), chromeUA
		h.sendQ("web", i+1, e)
	}
	tests := []struct {
		name string
		body map[string]any
		want string
	}{
		{"channels", q(list("visits"), list("visit:channel")),
			"AI Assistants: 1; Cross-network: 1; Direct: 1; Email: 2; Organic Search: 1; Organic Social: 1; Organic Video: 1; " +
				"Paid Other: 1; Paid Search: 1; Paid Social: 1; Referral: 1"},
		{"sources by name", q(list("visits"), list("visit:source")),
			"ChatGPT: 1; Direct / None: 5; DuckDuckGo: 1; Facebook: 1; Google: 1; Newsletter-UK: 1; Youtube: 1; blog.test: 1"},
		{"a channel filter", q(list("visits"), list("visit:source"), []any{"is", "visit:channel", list("Organic Search", "Paid Search")}),
			"DuckDuckGo: 1; Google: 1"},
		{"a channel filter of another case", q(list("visits"), nil, []any{"is_not", "visit:channel", list("Direct", "Email")}), "9"},
		{"channels of events", q(list("visitors"), list("visit:channel"), []any{"contains", "event:page", list("/x")}), "Email: 1"},
		{"hostnames", q(list("pageviews"), list("event:hostname")), "blog.shop.test: 2; shop.test: 10"},
		{"a hostname filter", q(list("visitors"), list("visit:channel"), []any{"contains", "event:hostname", list("blog.")}),
			"Organic Social: 1; Paid Social: 1"},
		{"a hostname filter that matches nothing", q(list("visitors"), nil, []any{"is", "event:hostname", list("www.shop.test")}), "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sortedRows(queryRows(t, h, tn.readKey, "web", tt.body)); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
	// Plausible's own route answers the same.
	r := h.q("POST", "/api/v2/query", tn.readKey, q(list("visits"), list("visit:channel"), []any{"is", "visit:channel", list("Organic Search")}))
	mustStatus(t, r, 200, "")
	if got, want := renderRows(t, r.body), "Organic Search: 1"; got != want {
		t.Errorf("/api/v2/query: got %s, want %s", got, want)
	}
}

// sortedRows is queryRows' rendering with its rows in value order, for
// groups of equal metrics whose order the query leaves open.
func sortedRows(rows string) string {
	parts := strings.Split(rows, "; ")
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

// TestQueryAgentNames: browser and OS versions as Plausible shows them,
// as dimensions and filters, and one browser name for Safari on iPhone and
// iPad (Plausible's "Safari"; SPEC's /v1 reads keep "Mobile Safari").
func TestQueryAgentNames(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	const ipadUA = "Mozilla/5.0 (iPad; CPU OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.6 Mobile/15E148 Safari/604.1"
	for i, ua := range []string{chromeUA, chromeUA, iphoneUA, ipadUA, firefoxLinuxUA} {
		h.sendQ("web", i+1, qev{anon: string(rune('a' + i)), typ: "pageview", url: "https://shop.test/", ts: utc(1, 5, 10, i), ua: ua})
	}
	tests := []struct {
		name string
		body map[string]any
		want string
	}{
		{"browsers", q(list("visitors"), list("visit:browser")), "Chrome: 2; Firefox: 1; Safari: 2"},
		{"browser versions", q(list("visitors"), list("visit:browser", "visit:browser_version")),
			"Chrome 118.0: 2; Firefox 121.0: 1; Safari 16.6: 1; Safari 17.1: 1"},
		{"OS versions", q(list("visitors"), list("visit:os", "visit:os_version")),
			"GNU/Linux (not set): 1; Windows 10: 2; iOS 16.6: 1; iOS 17.1: 1"},
		{"a version filter", q(list("visitors"), list("visit:device"), []any{"is", "visit:os_version", list("16.6", "17.1")}),
			"Mobile: 1; Tablet: 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sortedRows(queryRows(t, h, tn.readKey, "web", tt.body)); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}
