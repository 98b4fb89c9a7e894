package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// pathSegmentBatch is Segment's batch endpoint, where a DLQ replay of a
// quarantined Segment message goes.
const pathSegmentBatch = "/v1/batch"

// segmentRoutes registers Segment's HTTP Tracking API on the collector:
// /v1/<call> and the short /v1/<letter> paths of Segment's browser SDK,
// and /v1/batch (with the browser SDK's /v1/b). They exist only under /v1,
// as Segment's own do.
//
// POST /v1/track|page|screen|identify|group|alias|batch, /v1/t|p|s|i|g|a|b (collector)
func (s *Server) segmentRoutes(rt *router) {
	for i := range segmentCalls {
		c := &segmentCalls[i]
		h := s.segmentIngest(segmentFormat(c))
		rt.route(http.MethodPost, "/v1/"+c.name, h)
		rt.route(http.MethodPost, "/v1/"+c.short, h)
	}
	h := s.segmentIngest(segmentFormat(nil))
	rt.route(http.MethodPost, pathSegmentBatch, h)
	rt.route(http.MethodPost, "/v1/b", h)
}

// segmentIngest is the intake of format f, with the X-RateLimit-Reset
// header Segment's browser SDK reads (seconds to wait) beside Retry-After.
func (s *Server) segmentIngest(f *intakeFormat) handler {
	ingest := s.ingest(f)
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		err := ingest(w, r, ps)
		if e := fault.As(err); e != nil && e.RetryAfter > 0 {
			w.Header().Set("X-RateLimit-Reset", strconv.Itoa(e.RetryAfter))
		}
		return err
	}
}

// segmentCredential authenticates a Segment request by its write key: the
// HTTP Basic user name (the password is ignored, Segment's SDKs send an
// empty one), else writeKey in the body. A bearer is also read, as a write
// key or as this process's internal bearer (a DLQ replay). When both a
// header and a body key are sent, the header wins and the body's is not
// read (docs/intake.md#segment-compatible-intake).
func (s *Server) segmentCredential(r *http.Request) (*storage.Site, string, error) {
	if user, _, ok := r.BasicAuth(); ok {
		return s.writeKeyCredential(user)
	}
	if token, ok := bearer(r); ok {
		if strings.HasPrefix(token, internalPrefix) {
			return s.collectorCredential(r)
		}
		return s.writeKeyCredential(token)
	}
	key, err := bodyWriteKey(r)
	if err != nil {
		return nil, "", err
	}
	if key == "" {
		return nil, "", fault.Errorf(fault.Unauthorized, "missing write key: send it as the HTTP Basic user name with an empty password, or as writeKey in the body")
	}
	return s.writeKeyCredential(key)
}

// bodyWriteKey reads the body (putting it back for the pipeline's body
// step) and returns its top-level writeKey, "" when there is none.
func bodyWriteKey(r *http.Request) (string, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, segmentBodyLimit+1))
	if err != nil {
		return "", fault.Errorf(fault.InvalidEvent, "could not read the request body")
	}
	if len(body) > segmentBodyLimit {
		return "", fault.Errorf(fault.InvalidEvent, "the request body is larger than %d bytes", segmentBodyLimit)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var v struct {
		WriteKey any `json:"writeKey"`
	}
	json.Unmarshal(body, &v)
	key, _ := v.WriteKey.(string)
	return key, nil
}
