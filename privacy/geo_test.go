package privacy

import (
	"bytes"
	"flag"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

var updateGeoIP = flag.Bool("update-geoip", false, "rewrite testdata/geoip-test.mmdb")

// TestGeoIPPath is the committed test database.
const TestGeoIPPath = "../testdata/geoip-test.mmdb"

// buildTestGeoIP makes a small City database: documentation ranges and
// loopback (so tests over 127.0.0.1 resolve), with a fixed build time so
// the bytes are reproducible.
func buildTestGeoIP(t *testing.T) []byte {
	t.Helper()
	tree, err := mmdbwriter.New(mmdbwriter.Options{
		DatabaseType: "GeoIP2-City", RecordSize: 24, BuildEpoch: 1767225600,
		IncludeReservedNetworks: true, Description: map[string]string{"en": "Tally test database"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for cidr, loc := range map[string][2]string{
		"127.0.0.0/8":     {"NL", "Amsterdam"},
		"203.0.113.0/24":  {"DE", "Berlin"},
		"198.51.100.0/24": {"FR", "Paris"},
		"2001:db8::/32":   {"JP", "Tokyo"},
		"192.0.2.0/24":    {"US", ""},
	} {
		_, network, err := net.ParseCIDR(cidr)
		if err != nil {
			t.Fatal(err)
		}
		rec := mmdbtype.Map{"country": mmdbtype.Map{"iso_code": mmdbtype.String(loc[0])}}
		if loc[1] != "" {
			rec["city"] = mmdbtype.Map{"names": mmdbtype.Map{"en": mmdbtype.String(loc[1])}}
		}
		if err := tree.Insert(network, rec); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := tree.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestTestdataGeoIPIsReproducible(t *testing.T) {
	built := buildTestGeoIP(t)
	if *updateGeoIP {
		if err := os.WriteFile(TestGeoIPPath, built, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	committed, err := os.ReadFile(TestGeoIPPath)
	if err != nil {
		t.Fatalf("%v (run go test ./privacy -run GeoIP -update-geoip)", err)
	}
	if !bytes.Equal(built, committed) {
		t.Fatal("testdata/geoip-test.mmdb differs from its generator: run go test ./privacy -run GeoIP -update-geoip")
	}
}

func TestLocate(t *testing.T) {
	l, err := NewLocator(TestGeoIPPath, false)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	trusting, err := NewLocator(TestGeoIPPath, true)
	if err != nil {
		t.Fatal(err)
	}
	defer trusting.Close()
	bare, _ := NewLocator("", true)
	builtin, err := NewBuiltinLocator(false)
	if err != nil {
		t.Fatal(err)
	}
	defer builtin.Close()
	builtinTrusting, err := NewBuiltinLocator(true)
	if err != nil {
		t.Fatal(err)
	}
	defer builtinTrusting.Close()
	tests := []struct {
		name       string
		l          *Locator
		remote     string
		headers    map[string]string
		useAddress bool
		want       Location
	}{
		{"peer address", l, "203.0.113.9:5000", nil, true, Location{"DE", "Berlin"}},
		{"ipv6 peer", l, "[2001:db8::1]:5000", nil, true, Location{"JP", "Tokyo"}},
		{"country without city", l, "192.0.2.1:1", nil, true, Location{"US", ""}},
		{"unknown address", l, "8.8.8.8:1", nil, true, Location{}},
		{"forwarded header ignored when untrusted", l, "203.0.113.9:1", map[string]string{"X-Forwarded-For": "198.51.100.7", "CF-IPCountry": "GB"}, true, Location{"DE", "Berlin"}},
		{"forwarded header trusted", trusting, "203.0.113.9:1", map[string]string{"X-Forwarded-For": "198.51.100.7, 10.0.0.1"}, true, Location{"FR", "Paris"}},
		{"real ip trusted", trusting, "203.0.113.9:1", map[string]string{"X-Real-IP": "198.51.100.7"}, true, Location{"FR", "Paris"}},
		{"cdn country wins, city from db", trusting, "203.0.113.9:1", map[string]string{"CF-IPCountry": "gb"}, true, Location{"GB", "Berlin"}},
		{"cdn unknown country ignored", trusting, "203.0.113.9:1", map[string]string{"CF-IPCountry": "XX"}, true, Location{"DE", "Berlin"}},
		{"server to server skips the address", l, "203.0.113.9:1", nil, false, Location{}},
		{"server to server keeps trusted headers", trusting, "203.0.113.9:1", map[string]string{"CloudFront-Viewer-Country": "IT", "CloudFront-Viewer-City": "Rome"}, false, Location{"IT", "Rome"}},
		{"headers without database", bare, "203.0.113.9:1", map[string]string{"X-Country-Code": "ES"}, true, Location{"ES", ""}},
		{"nil locator", nil, "203.0.113.9:1", nil, true, Location{}},
		// The built-in database (geo_builtin.go), on long-held allocations
		// (Google's resolver, RIPE NCC's own network, a Deutsche Telekom
		// IPv6 block), so that a refreshed one (scripts/update-geoip)
		// keeps them.
		{"built-in, ipv4", builtin, "8.8.8.8:1", nil, true, Location{Country: "US"}},
		{"built-in, another country", builtin, "193.0.6.139:1", nil, true, Location{Country: "NL"}},
		{"built-in, ipv6", builtin, "[2003::1]:1", nil, true, Location{Country: "DE"}},
		{"built-in, ipv4-mapped ipv6", builtin, "[::ffff:8.8.8.8]:1", nil, true, Location{Country: "US"}},
		{"built-in, loopback", builtin, "127.0.0.1:1", nil, true, Location{}},
		{"built-in, private range", builtin, "10.1.2.3:1", nil, true, Location{}},
		{"built-in, forwarded behind a trusted proxy", builtinTrusting, "10.0.0.1:1", map[string]string{"X-Forwarded-For": "193.0.6.139"}, true, Location{Country: "NL"}},
		{"built-in, cdn country wins", builtinTrusting, "8.8.8.8:1", map[string]string{"CF-IPCountry": "FR"}, true, Location{Country: "FR"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/events", nil)
			r.RemoteAddr = tt.remote
			for k, v := range tt.headers {
				r.Header.Set(k, v)
			}
			if got := tt.l.Locate(r, tt.useAddress); got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if _, err := NewLocator(filepath.Join(t.TempDir(), "missing.mmdb"), false); err == nil {
		t.Fatal("got no error for a missing database")
	}
}
