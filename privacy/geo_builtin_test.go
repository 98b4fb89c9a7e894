package privacy

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestBuiltinLocator: the embedded database locates Segment's context.ip
// too (its addresses by peer and header are in TestLocate).
func TestBuiltinLocator(t *testing.T) {
	l, err := NewBuiltinLocator(false)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r := httptest.NewRequest("POST", "/v1/batch", nil)
	if got, want := l.LocateAddr(r, "8.8.4.4"), (Location{Country: "US"}); got != want {
		t.Fatalf("LocateAddr: got %+v, want %+v", got, want)
	}
}

// TestBuiltinGeoIPCredit: the credit names DB-IP with its link and
// licence, as CC BY 4.0 and DB-IP's terms require, and the build time is
// the database's, not zero.
func TestBuiltinGeoIPCredit(t *testing.T) {
	for _, want := range []string{"DB-IP", "https://db-ip.com", "CC BY 4.0"} {
		if !strings.Contains(BuiltinGeoIPCredit, want) {
			t.Errorf("got credit %q, want it to contain %q", BuiltinGeoIPCredit, want)
		}
	}
	if built := BuiltinGeoIPBuilt(); built.Before(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("got build time %v, want the database's (2026 or later)", built)
	}
}
