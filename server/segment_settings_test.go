package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// The settings document names the collector as the request reached it,
// over https when a proxy says the client used it, is never cached, and
// refuses a write key the intake would refuse.
func TestSegmentSettingsDocument(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	for _, tc := range []struct {
		name           string
		headers        []string
		host, protocol string
	}{
		{"direct", []string{"Host", "collector.example:8080"}, "collector.example:8080/v1", "http"},
		{"behind a TLS proxy", []string{"Host", "stats.example", "X-Forwarded-Proto", "https"}, "stats.example/v1", "https"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.c("GET", "/v1/projects/web/settings", "", nil, tc.headers...)
			if r.status != http.StatusOK {
				t.Fatalf("got %d %s, want 200", r.status, r.body)
			}
			var doc segmentSettingsBody
			if err := json.Unmarshal(r.body, &doc); err != nil {
				t.Fatal(err)
			}
			want := segmentIOSettings{APIKey: "web", APIHost: tc.host, Protocol: tc.protocol}
			if doc.Integrations.SegmentIO != want || doc.Metrics.SampleRate != 0 {
				t.Fatalf("got %+v, want %+v and metrics off", doc, want)
			}
			if cc := r.header.Get("Cache-Control"); cc != "no-store" {
				t.Fatalf("got Cache-Control %q, want no-store", cc)
			}
			if !strings.Contains(r.header.Get("Access-Control-Allow-Origin"), "*") {
				t.Fatalf("got no CORS header: pages on other origins could not read it")
			}
		})
	}
	mustStatus(t, h.c("GET", "/v1/projects/nope/settings", "", nil), http.StatusUnauthorized, "unauthorized")
}
