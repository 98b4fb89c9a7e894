package server

import (
	"net/http"

	"github.com/julienschmidt/httprouter"
)

// segmentSettings serves the settings document Segment's browser SDK
// (@segment/analytics-next) asks its CDN for, so that a page needs only
// `cdnURL` = the collector: the document names the collector, as the
// request reached it, as the host its Segment.io destination sends to, and
// turns off the SDK's own telemetry (docs/intake.md#segment-compatible-intake).
// The write key is checked as on the intake, so a wrong one fails the
// SDK's load with our 401 rather than sending events that will be refused.
//
// GET /v1/projects/:writeKey/settings (collector)
func (s *Server) segmentSettings(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	writeKey := ps.ByName("writeKey")
	if _, _, err := s.writeKeyCredential(writeKey); err != nil {
		return err
	}
	protocol := "http"
	// The Host header and X-Forwarded-Proto only shape this answer to the
	// one who sent them; no-store keeps a shared cache from serving it to
	// anyone else.
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		protocol = "https"
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, segmentSettingsBody{
		Integrations: segmentSettingsIntegrations{SegmentIO: segmentIOSettings{
			APIKey: writeKey, APIHost: r.Host + "/v1", Protocol: protocol,
		}},
		Metrics: segmentSettingsMetrics{SampleRate: 0},
	})
	return nil
}
