package storage

import (
	"context"
	"strings"
	"testing"

	"github.com/tally-analytics/tally/fault"
)

// TestPostgresConnectErrorsNameNoUser: a failed connection's error names
// neither the user nor the password, stays one line, and is still the
// "cannot be reached" class that intake answers 503 for.
func TestPostgresConnectErrorsNameNoUser(t *testing.T) {
	t.Parallel()
	const user, password = "owner-q7x", "pw-s3cret"
	for _, tt := range []struct {
		url   string
		class errClass
	}{
		{"postgres://" + user + ":" + password + "@127.0.0.1:1/analytics?connect_timeout=5", errUnavailable},
		{"postgres://" + user + ":" + password + "@127.0.0.1:1/analytics?connect_timeout=later", errOther},
	} {
		_, err := Open(context.Background(), Options{DatabaseURL: tt.url})
		if err == nil {
			t.Fatalf("%s: got no error, want a failed connection", tt.url)
		}
		msg := err.Error()
		if strings.Contains(msg, user) || strings.Contains(msg, password) || strings.Contains(msg, "\n") {
			t.Errorf("got %q, want one line without the user or password", msg)
		}
		if got := (pgDialect{}).classify(err); got != tt.class {
			t.Errorf("%q: got class %v, want %v", msg, got, tt.class)
		}
		// A request that meets it answers 503 unavailable, not 500.
		if f := fault.As(err); (f != nil && f.Code == fault.Unavailable) != (tt.class == errUnavailable) {
			t.Errorf("%q: got fault %v, want unavailable only for an unreachable server", msg, f)
		}
	}
}
