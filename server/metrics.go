package server

import (
	"bytes"
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/storage"
)

// Label values of the collector's metrics (docs/operations.md#metrics). No
// per-tenant labels exist.
const (
	endpointEvents = "events"
	endpointS2S    = "s2s"
	// endpointSegment labels Segment's HTTP Tracking API
	// (docs/intake.md#segment-compatible-intake), all of its paths.
	endpointSegment = "segment"
	// endpointPlausible and endpointUmami label Plausible's Events API and
	// Umami's /api/send
	// (docs/intake.md#plausible--and-umami-compatible-intake).
	endpointPlausible = "plausible"
	endpointUmami     = "umami"

	reasonAccepted        = "accepted"
	reasonAcceptedConsent = "accepted_consent"
	reasonBot             = "bot"
	reasonInternal        = "internal"
	reasonConsentRequired = "consent_required"
	reasonRateLimit       = "rate_limit"
	reasonQuota           = "quota"
	reasonSchemaInvalid   = "schema_invalid"
)

var (
	endpoints = []string{endpointEvents, endpointS2S, endpointSegment, endpointPlausible, endpointUmami}
	reasons   = []string{reasonAccepted, reasonAcceptedConsent, reasonBot, reasonInternal,
		reasonConsentRequired, reasonRateLimit, reasonQuota, reasonSchemaInvalid}

	// Fixed Prometheus bucket bounds, in seconds.
	ingestBuckets     = []float64{0.001, 0.002, 0.005, 0.010, 0.025, 0.050, 0.100}
	validationBuckets = []float64{0.0001, 0.0005, 0.001, 0.005}
	storageBuckets    = []float64{0.001, 0.005, 0.010, 0.050, 0.100}
)

// dlqSampleEvery is how often service_dlq_size is refreshed.
const dlqSampleEvery = 60 * time.Second

// collectorMetrics is the collector's own metric set. Every series exists
// from start-up, at zero.
type collectorMetrics struct {
	set         *metrics.Set
	received    map[string]*metrics.Counter
	accepted    map[string]*metrics.Counter
	quarantined map[string]*metrics.Counter
	deduped     map[string]*metrics.Counter
	dropped     map[[2]string]*metrics.Counter
	ingest      map[string]*metrics.PrometheusHistogram
	validation  map[string]*metrics.PrometheusHistogram
	storage     map[string]*metrics.PrometheusHistogram
	dlqSize     atomic.Int64
	// retries mirrors the writer's count at each scrape.
	retries *metrics.Counter
}

func newCollectorMetrics(pool func() (open, idle int), disk func() storage.DiskUsage) *collectorMetrics {
	// Adds the # TYPE lines to the exposition (a process-wide switch).
	metrics.ExposeMetadata(true)
	m := &collectorMetrics{
		set:         metrics.NewSet(),
		received:    map[string]*metrics.Counter{},
		accepted:    map[string]*metrics.Counter{},
		quarantined: map[string]*metrics.Counter{},
		deduped:     map[string]*metrics.Counter{},
		dropped:     map[[2]string]*metrics.Counter{},
		ingest:      map[string]*metrics.PrometheusHistogram{},
		validation:  map[string]*metrics.PrometheusHistogram{},
		storage:     map[string]*metrics.PrometheusHistogram{},
	}
	for _, ep := range endpoints {
		l := `{endpoint="` + ep + `"}`
		m.received[ep] = m.set.NewCounter("service_events_received_total" + l)
		m.accepted[ep] = m.set.NewCounter("service_events_accepted_total" + l)
		m.quarantined[ep] = m.set.NewCounter("service_events_quarantined_total" + l)
		m.deduped[ep] = m.set.NewCounter("service_events_deduped_total" + l)
		for _, r := range reasons {
			m.dropped[[2]string{ep, r}] = m.set.NewCounter(`service_events_dropped_total{endpoint="` + ep + `",reason="` + r + `"}`)
		}
		m.ingest[ep] = m.set.NewPrometheusHistogramExt("service_ingest_duration_seconds"+l, ingestBuckets)
		m.validation[ep] = m.set.NewPrometheusHistogramExt("service_validation_duration_seconds"+l, validationBuckets)
		m.storage[ep] = m.set.NewPrometheusHistogramExt("service_storage_write_duration_seconds"+l, storageBuckets)
	}
	m.set.NewGauge("service_storage_pool_open_connections", func() float64 { o, _ := pool(); return float64(o) })
	m.set.NewGauge("service_storage_pool_idle_connections", func() float64 { _, i := pool(); return float64(i) })
	// Read at each scrape: a stat and a statfs cost microseconds, and a
	// sampled value could hide a disk that fills between two samples.
	m.set.NewGauge("service_storage_database_bytes", func() float64 { return float64(disk().DatabaseBytes) })
	m.set.NewGauge("service_storage_wal_bytes", func() float64 { return float64(disk().WALBytes) })
	m.set.NewGauge("service_storage_free_bytes", func() float64 { return float64(disk().FreeBytes) })
	m.set.NewGauge("service_dlq_size", func() float64 { return float64(m.dlqSize.Load()) })
	m.retries = m.set.NewCounter("service_storage_write_retries_total")
	return m
}

// drop counts n events dropped at a gate.
func (m *collectorMetrics) drop(endpoint, reason string, n int) {
	if n > 0 {
		m.dropped[[2]string{endpoint, reason}].Add(n)
	}
}

// sampleDLQ refreshes service_dlq_size now and then every dlqSampleEvery
// until ctx ends.
func (s *Server) sampleDLQ(ctx context.Context) {
	t := time.NewTicker(dlqSampleEvery)
	defer t.Stop()
	for {
		if n, err := s.db.DLQSize(ctx); err == nil {
			s.metrics.Load().dlqSize.Store(int64(n))
		} else if ctx.Err() == nil {
			s.log.Error("sample DLQ size", "err", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// metricsContentType is the Prometheus text exposition format 0.0.4.
const metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// serveMetrics writes the Prometheus exposition; 503 with an empty body
// before the metrics are initialised. It is outside every rate limit.
//
// GET /metrics (collector)
func (s *Server) serveMetrics(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) error {
	m := s.metrics.Load()
	w.Header().Set("Content-Type", metricsContentType)
	if m == nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		return nil
	}
	m.retries.Set(uint64(s.db.WriterRetries()))
	var buf bytes.Buffer
	m.set.WritePrometheus(&buf)
	w.WriteHeader(http.StatusOK)
	w.Write(buf.Bytes())
	return nil
}
