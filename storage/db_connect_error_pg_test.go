package storage

import (
	"context"
	"strings"
	"testing"

	"github.com/tally-analytics/tally/fault"

	"github.com/tally-analytics/tally/storage/internal/engine"
)

// TestPostgresConnectErrorsNameNoUser: a failed connection's error names
// neither the user nor the password, stays one line, and is still the
// "cannot be reached" class that intake answers 503 for.
func TestPostgresConnectErrorsNameNoUser(t *testing.T) {
	t.Parallel()
	const user, password = "owner-q7x", "pw-s3cret"
	for _, tt := range []struct {
		url   string
		class engine.ErrClass
	}{
		{"postgres://" + user + ":" + password + "@127.0.0.1:1/analytics?connect_timeout=5", engine.ClassUnavailable},
		{"postgres://" + user + ":" + password + "@127.0.0.1:1/analytics?connect_timeout=later", engine.ClassOther},
	} {
		_, err := Open(context.Background(), Options{DatabaseURL: tt.url})
		if err == nil {
			t.Fatalf("%s: got no error, want a failed connection", tt.url)
		}
		msg := err.Error()
		if strings.Contains(msg, user) || strings.Contains(msg, password) || strings.Contains(msg, "\n") {
			t.Errorf("got %q, want one line without the user or password", msg)
		}
		if got := (pgDialect{}).Classify(err); got != tt.class {
			t.Errorf("%q: got class %v, want %v", msg, got, tt.class)
		}
		// A request that meets it answers 503 unavailable, not 500.
		if f := fault.As(err); (f != nil && f.Code == fault.Unavailable) != (tt.class == engine.ClassUnavailable) {
			t.Errorf("%q: got fault %v, want unavailable only for an unreachable server", msg, f)
		}
	}
}
