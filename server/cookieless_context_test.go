package server

import (
	"strings"
	"testing"
)

// segmentContext is a context as Segment's spec shows it (segment-docs,
// src/connections/spec/common.md), with an SDK's key of its own: the
// identifiers in it are tagged leak-, what the cookieless form keeps is
// tagged keep-.
const segmentContext = `{"active":true,
	"app":{"name":"keep-app","version":"545","build":"3.0.1.545","namespace":"com.keep"},
	"campaign":{"name":"keep-campaign","source":"Newsletter","medium":"email","term":"tps","content":"image","utm_id":"leak-utm-id"},
	"device":{"id":"leak-device-id","advertisingId":"leak-ad-id","adTrackingEnabled":true,"manufacturer":"keep-maker",
		"model":"keep-model","name":"leak-device-name","type":"ios","token":"leak-push-token"},
	"externalIds":[{"id":"leak-external-id","type":"email","collection":"users","encoding":"none"}],
	"groupId":"leak-group-id","ip":"203.0.113.9","library":{"name":"keep-library","version":"2.11.1"},"locale":"keep-locale",
	"location":{"city":"keep-city","country":"keep-country","latitude":52.5201,"longitude":13.4051,"speed":0},
	"network":{"bluetooth":false,"carrier":"keep-carrier","cellular":true,"wifi":false},
	"os":{"name":"keep-os","version":"8.1.3"},
	"page":{"path":"/keep-path/","referrer":"https://ref.test/?leak-ref-query=1","search":"?leak-search=1","title":"keep-title",
		"url":"https://shop.test/keep-path/?leak-url-query=1"},
	"referrer":{"id":"leak-referrer-id","type":"keep-dataxu"},
	"screen":{"width":320,"height":568,"density":2},"timezone":"keep-timezone","traits":{"email":"leak-trait@example.com"},
	"userAgent":"Mozilla/5.0 (keep-agent)","instanceId":"leak-instance-id"`

// The cookieless form of every intake format keeps no stable identifier
// of a device in raw (issue 29, item 8): of a context object only what
// describes the browser or app (privacy.CookielessContext's allow-list),
// of an Umami payload only what its tracker sends.
func TestCookielessFormsKeepNoDeviceIdentifiers(t *testing.T) {
	t.Parallel()
	h := trackerHarness(t)
	denied := `"consent":{"categoryPreferences":{"Analytics":false}}`
	segmentPost := func() response {
		return h.segmentPost("/v1/track", "web", `{"anonymousId":"leak-anon","event":"x","context":`+segmentContext+`,`+denied+`}}`)
	}
	native := func() response {
		e := ev("web", 1, map[string]any{"consent": "denied", "anon_id": "leak-anon"})
		body := strings.TrimSuffix(mustJSONText(e), "}") + `,"context":` + segmentContext + `}}`
		return h.c("POST", "/v1/events", "web", body, "User-Agent", chromeUA)
	}
	plausible := func() response {
		return h.c("POST", "/api/event", "", `{"n":"pageview","u":"https://example.com/keep-path?leak-url-query=1","d":"example.com","context":`+segmentContext+`}}`,
			"User-Agent", chromeUA, "Content-Type", "text/plain")
	}
	umami := func() response {
		return h.c("POST", "/api/send", "", `{"type":"identify","payload":{"website":"`+umamiWebsite+`","hostname":"example.com","url":"/keep-path?leak-url-query=1",
			"title":"keep-title","language":"keep-locale","screen":"320x568","id":"leak-distinct-id","data":{"plan":"keep-plan"},"other":"leak-other"}}`,
			"User-Agent", chromeUA)
	}
	for _, tt := range []struct {
		name   string
		send   func() response
		status int
		keep   []string
	}{
		{"segment", segmentPost, 200, []string{"keep-app", "keep-campaign", "Newsletter", "keep-maker", "keep-model", `"type":"ios"`, "keep-library",
			"keep-locale", "keep-city", "keep-carrier", "keep-os", "/keep-path/", "keep-title", "https://shop.test/keep-path/", "keep-dataxu",
			`"density":2`, "keep-timezone", "keep-agent", "categoryPreferences"}},
		{"native", native, 202, []string{"keep-app", "keep-model", "keep-library", "keep-locale", "keep-timezone", "https://shop.test/keep-path/"}},
		{"plausible", plausible, 202, []string{"keep-app", "keep-model", "https://example.com/keep-path"}},
		{"umami", umami, 200, []string{"keep-title", "keep-locale", "320x568", "keep-plan", "/keep-path"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := len(h.trackerRows("web"))
			if r := tt.send(); r.status != tt.status {
				t.Fatalf("got %d %s, want %d", r.status, r.body, tt.status)
			}
			rows := h.trackerRows("web")
			if len(rows) != before+1 {
				t.Fatalf("got %d events, want %d", len(rows), before+1)
			}
			raw := rows[len(rows)-1].raw
			if i := strings.Index(raw, "leak-"); i >= 0 {
				t.Errorf("raw still holds %.40s...: %s", raw[i:], raw)
			}
			if strings.Contains(raw, "203.0.113.9") || strings.Contains(raw, "52.52") {
				t.Errorf("raw still holds the address or the coordinates: %s", raw)
			}
			for _, k := range tt.keep {
				if !strings.Contains(raw, k) {
					t.Errorf("raw lost %s: %s", k, raw)
				}
			}
		})
	}
}
