package server

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tally-analytics/tally/internal/dbtest"
)

// metricValue returns the value of one exposition line.
func metricValue(t *testing.T, h *harness, series string) string {
	t.Helper()
	r := h.c("GET", "/metrics", "", nil)
	for _, line := range strings.Split(string(r.body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	t.Fatalf("series %s not exposed", series)
	return ""
}

func TestMetricsExposition(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, path := range []string{"/metrics", "/v1/metrics"} {
		r := h.c("GET", path, "", nil)
		if r.status != 200 || r.header.Get("Content-Type") != "text/plain; version=0.0.4; charset=utf-8" {
			t.Fatalf("%s: got %d %q", path, r.status, r.header.Get("Content-Type"))
		}
	}
	body := string(h.c("GET", "/metrics", "", nil).body)
	want := []string{
		"# TYPE service_events_received_total counter",
		"# TYPE service_events_accepted_total counter",
		"# TYPE service_events_dropped_total counter",
		"# TYPE service_events_quarantined_total counter",
		"# TYPE service_events_deduped_total counter",
		"# TYPE service_ingest_duration_seconds histogram",
		"# TYPE service_validation_duration_seconds histogram",
		"# TYPE service_storage_write_duration_seconds histogram",
		"# TYPE service_storage_pool_open_connections gauge",
		"# TYPE service_storage_pool_idle_connections gauge",
		"# TYPE service_dlq_size gauge",
		"# TYPE service_storage_write_retries_total counter",
	}
	for _, ep := range endpoints {
		for _, name := range []string{"received", "accepted", "quarantined", "deduped"} {
			want = append(want, `service_events_`+name+`_total{endpoint="`+ep+`"} 0`)
		}
		for _, reason := range reasons {
			want = append(want, `service_events_dropped_total{endpoint="`+ep+`",reason="`+reason+`"} 0`)
		}
		for _, le := range []string{"0.001", "0.002", "0.005", "0.01", "0.025", "0.05", "0.1", "+Inf"} {
			want = append(want, `service_ingest_duration_seconds_bucket{endpoint="`+ep+`",le="`+le+`"} 0`)
		}
		for _, le := range []string{"0.0001", "0.0005", "0.001", "0.005", "+Inf"} {
			want = append(want, `service_validation_duration_seconds_bucket{endpoint="`+ep+`",le="`+le+`"} 0`)
		}
		for _, le := range []string{"0.001", "0.005", "0.01", "0.05", "0.1", "+Inf"} {
			want = append(want, `service_storage_write_duration_seconds_bucket{endpoint="`+ep+`",le="`+le+`"} 0`)
		}
		want = append(want, `service_ingest_duration_seconds_count{endpoint="`+ep+`"} 0`)
	}
	want = append(want, "service_dlq_size 0", "service_storage_write_retries_total 0")
	for _, w := range want {
		if !strings.Contains(body, w+"\n") {
			t.Errorf("exposition lacks %q", w)
		}
	}
	if strings.Contains(body, "site") {
		t.Errorf("exposition carries a per-site label:\n%s", body)
	}

	h.setupTenant("acme", "web")
	intake(t, h.c("POST", "/v1/events", "web", []any{ev("web", 1, nil), ev("web", 2, nil)}, "User-Agent", chromeUA))
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, nil), "User-Agent", chromeUA))
	mustStatus(t, h.c("POST", "/v1/s2s/events", "nope", ev("web", 3, nil)), 401, "unauthorized")
	checks := map[string]string{
		`service_events_received_total{endpoint="events"}`:                "3",
		`service_events_received_total{endpoint="s2s"}`:                   "1",
		`service_events_accepted_total{endpoint="events"}`:                "2",
		`service_events_deduped_total{endpoint="events"}`:                 "1",
		`service_ingest_duration_seconds_count{endpoint="events"}`:        "2",
		`service_storage_write_duration_seconds_count{endpoint="events"}`: "2",
	}
	for series, want := range checks {
		if got := metricValue(t, h, series); got != want {
			t.Errorf("%s: got %s, want %s", series, got, want)
		}
	}
	if got := metricValue(t, h, "service_storage_pool_open_connections"); got == "0" {
		t.Errorf("got 0 open connections, want the pools' count")
	}
}

func TestMetricsUninitialised(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.srv.metrics.Store(nil)
	rec := httptest.NewRecorder()
	if err := h.srv.serveMetrics(rec, httptest.NewRequest("GET", "/metrics", nil), nil); err != nil {
		t.Fatal(err)
	}
	if rec.Code != 503 || rec.Body.Len() != 0 || rec.Header().Get("Content-Type") != metricsContentType {
		t.Fatalf("got %d %q body %q, want 503 with an empty body", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
	}
}

// A write transaction that loses a serialization conflict runs again, and
// /metrics counts it (docs/operations.md#metrics). The conflict is raised by a
// trigger on the first insert of an event.
func TestWriterRetriesMetric(t *testing.T) {
	t.Parallel()
	dbtest.OnlyPostgres(t, "only PostgreSQL retries a transaction")
	h := newHarness(t)
	h.setupTenant("acme", "web")
	if _, err := h.sqlDB().Exec(`CREATE SEQUENCE conflicts;
		CREATE FUNCTION conflict_once() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			-- nextval outlives the rollback the exception causes.
			IF nextval('conflicts') = 1 THEN
				RAISE EXCEPTION 'conflict' USING ERRCODE = 'serialization_failure';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER conflict_once BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION conflict_once();`); err != nil {
		t.Fatal(err)
	}
	intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, nil), "User-Agent", chromeUA))
	if got := metricValue(t, h, "service_storage_write_retries_total"); got != "1" {
		t.Fatalf("got service_storage_write_retries_total %s, want 1", got)
	}
	if n := h.count(`SELECT count(*) FROM events`); n != 1 {
		t.Fatalf("got %d events stored, want 1", n)
	}
}
