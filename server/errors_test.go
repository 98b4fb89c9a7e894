package server

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tally-analytics/tally/storage"
)

func TestWriteError(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		status     int
		code       string
		retryAfter string
	}{
		{"full write queue", storage.ErrQueueFull, 503, "unavailable", "1"},
		{"shutting down", storage.ErrClosed, 503, "unavailable", "1"},
		{"internal errors are generic", errors.New("disk I/O error at /secret/path"), 500, "internal", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			writeError(discardLogger(), rec, httptest.NewRequest("GET", "/", nil), "/", tt.err)
			r := response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
			mustStatus(t, r, tt.status, tt.code)
			if got := rec.Header().Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("got Retry-After %q, want %q", got, tt.retryAfter)
			}
			if strings.Contains(rec.Body.String(), "/secret/path") {
				t.Errorf("internal detail leaked: %s", rec.Body)
			}
		})
	}
}
