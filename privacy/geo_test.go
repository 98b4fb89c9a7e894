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
	// Country, subdivision (MaxMind's iso_code, without the country),
	// city and its GeoNames id, as GeoLite2-City has them.
	for cidr, loc := range map[string]struct {
		country, subdivision, city string
		geonameID                  uint32
	}{
		"127.0.0.0/8":     {"NL", "NH", "Amsterdam", 2759794},
		"203.0.113.0/24":  {"DE", "BE", "Berlin", 2950159},
		"198.51.100.0/24": {"FR", "IDF", "Paris", 2988507},
		"2001:db8::/32":   {"JP", "13", "Tokyo", 1850147},
		"192.0.2.0/24":    {"US", "", "", 0},
	} {
		_, network, err := net.ParseCIDR(cidr)
		if err != nil {
			t.Fatal(err)
		}
		rec := mmdbtype.Map{"country": mmdbtype.Map{"iso_code": mmdbtype.String(loc.country)}}
		if loc.subdivision != "" {
			rec["subdivisions"] = mmdbtype.Slice{mmdbtype.Map{"iso_code": mmdbtype.String(loc.subdivision)}}
		}
		if loc.city != "" {
			rec["city"] = mmdbtype.Map{"geoname_id": mmdbtype.Uint32(loc.geonameID), "names": mmdbtype.Map{"en": mmdbtype.String(loc.city)}}
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
		{"peer address", l, "203.0.113.9:5000", nil, true, Location{"DE", "DE-BE", "Berlin", "2950159"}},
		{"ipv6 peer", l, "[2001:db8::1]:5000", nil, true, Location{"JP", "JP-13", "Tokyo", "1850147"}},
		{"country without city", l, "192.0.2.1:1", nil, true, Location{Country: "US"}},
		{"unknown address", l, "8.8.8.8:1", nil, true, Location{}},
		{"forwarded header ignored when untrusted", l, "203.0.113.9:1", map[string]string{"X-Forwarded-For": "198.51.100.7", "CF-IPCountry": "GB"}, true, Location{"DE", "DE-BE", "Berlin", "2950159"}},
		{"forwarded header trusted", trusting, "203.0.113.9:1", map[string]string{"X-Forwarded-For": "198.51.100.7, 10.0.0.1"}, true, Location{"FR", "FR-IDF", "Paris", "2988507"}},
		{"real ip trusted", trusting, "203.0.113.9:1", map[string]string{"X-Real-IP": "198.51.100.7"}, true, Location{"FR", "FR-IDF", "Paris", "2988507"}},
		// The database's region and city lie in DE: beside a CDN's GB they
		// would name a place that does not exist.
		{"cdn country wins, no region or city of another country", trusting, "203.0.113.9:1", map[string]string{"CF-IPCountry": "gb"}, true, Location{Country: "GB"}},
		{"cdn country of the same country", trusting, "203.0.113.9:1", map[string]string{"CF-IPCountry": "de"}, true, Location{"DE", "DE-BE", "Berlin", "2950159"}},
		{"cdn city of its own: no id", trusting, "203.0.113.9:1", map[string]string{"CF-IPCity": "Potsdam"}, true, Location{"DE", "DE-BE", "Potsdam", ""}},
		{"cdn unknown country ignored", trusting, "203.0.113.9:1", map[string]string{"CF-IPCountry": "XX"}, true, Location{"DE", "DE-BE", "Berlin", "2950159"}},
		{"server to server skips the address", l, "203.0.113.9:1", nil, false, Location{}},
		{"server to server keeps trusted headers", trusting, "203.0.113.9:1", map[string]string{"CloudFront-Viewer-Country": "IT", "CloudFront-Viewer-City": "Rome"}, false, Location{Country: "IT", City: "Rome"}},
		{"cdn region", bare, "203.0.113.9:1", map[string]string{"CF-IPCountry": "US", "CF-Region-Code": "ca"}, true, Location{Country: "US", Region: "US-CA"}},
		{"cloudfront region", bare, "203.0.113.9:1", map[string]string{"CloudFront-Viewer-Country": "GB", "CloudFront-Viewer-Country-Region": "ENG"}, true, Location{Country: "GB", Region: "GB-ENG"}},
		{"cdn region without a country", bare, "203.0.113.9:1", map[string]string{"X-Vercel-IP-Country-Region": "CA"}, true, Location{}},
		{"cdn region not a code", bare, "203.0.113.9:1", map[string]string{"CF-IPCountry": "US", "CF-Region-Code": "California"}, true, Location{Country: "US"}},
		{"cdn region wins over the database's", trusting, "203.0.113.9:1", map[string]string{"CF-IPCountry": "DE", "CF-Region-Code": "BB"}, true, Location{"DE", "DE-BB", "Berlin", "2950159"}},
		{"headers without database", bare, "203.0.113.9:1", map[string]string{"X-Country-Code": "ES"}, true, Location{Country: "ES"}},
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
