package privacy

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/oschwald/maxminddb-golang/v2"
)

// Location is what the service keeps of a client's address.
type Location struct {
	Country string // ISO 3166-1 alpha-2, "" when unknown
	// Region is the ISO 3166-2 code of the first-level subdivision
	// ("DE-BE"), from a City database only, "" when unknown.
	Region string
	City   string // English name, "" when unknown
	// CityID is the city's GeoNames id ("2950159"), from a City database
	// only, "" when unknown or when the city's name came from a header.
	CityID string
}

// Locator turns a request into a Location. The IP address is read, looked
// up and dropped: it is never returned, stored or logged.
type Locator struct {
	db *maxminddb.Reader
	// trustProxy makes the locator believe proxy headers: the client
	// address from X-Forwarded-For / X-Real-IP, and a country or city a
	// CDN already resolved.
	trustProxy bool
}

// NewLocator opens the MaxMind-format database at path (none when path is
// empty). trustProxy enables the proxy headers; turn it on only behind a
// proxy that sets them, or clients can claim any location.
func NewLocator(path string, trustProxy bool) (*Locator, error) {
	l := &Locator{trustProxy: trustProxy}
	if path == "" {
		return l, nil
	}
	db, err := maxminddb.Open(path)
	if err != nil {
		return nil, fmt.Errorf("GeoIP database %s: %w", path, err)
	}
	l.db = db
	return l, nil
}

// Close releases the database.
func (l *Locator) Close() error {
	if l == nil || l.db == nil {
		return nil
	}
	return l.db.Close()
}

var (
	countryHeaders = []string{"CF-IPCountry", "CloudFront-Viewer-Country", "X-Vercel-IP-Country", "X-Country-Code"}
	cityHeaders    = []string{"CF-IPCity", "CloudFront-Viewer-City", "X-Vercel-IP-City", "X-City"}
	// The subdivision part of an ISO 3166-2 code ("BE" of DE-BE), as
	// Cloudflare (visitor location headers), CloudFront and Vercel send it.
	regionHeaders = []string{"CF-Region-Code", "CloudFront-Viewer-Country-Region", "X-Vercel-IP-Country-Region"}
)

// headerRegion is the ISO 3166-2 code of a CDN's region header for
// country: "" unless it is one to three letters or digits, as the
// standard's subdivision codes are.
func headerRegion(r *http.Request, country string) string {
	v := strings.ToUpper(firstHeader(r, regionHeaders))
	if country == "" || len(v) == 0 || len(v) > 3 {
		return ""
	}
	for _, c := range v {
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return ""
		}
	}
	return country + "-" + v
}

// cityRecord is what a lookup reads: MaxMind's City and Country layout
// (country.iso_code, city.names), or the flat country_code of the
// ip-location-db files, the built-in one among them (geo_builtin.go).
type cityRecord struct {
	CountryCode string `maxminddb:"country_code"`
	Country     struct {
		ISOCode string `maxminddb:"iso_code"`
	} `maxminddb:"country"`
	Subdivisions []struct {
		ISOCode string `maxminddb:"iso_code"`
	} `maxminddb:"subdivisions"`
	City struct {
		GeoNameID uint              `maxminddb:"geoname_id"`
		Names     map[string]string `maxminddb:"names"`
	} `maxminddb:"city"`
}

// Locate resolves r's client to a Location. With useAddress false (server-
// to-server intake, whose peer is the sender's server, not a visitor) only
// trusted proxy headers count.
func (l *Locator) Locate(r *http.Request, useAddress bool) Location {
	var loc Location
	if l == nil {
		return loc
	}
	if l.trustProxy {
		loc.Country = firstHeader(r, countryHeaders)
		loc.City = firstHeader(r, cityHeaders)
		if len(loc.Country) != 2 || loc.Country == "XX" || loc.Country == "T1" {
			loc.Country = "" // CDNs send XX (unknown) and T1 (Tor)
		} else {
			loc.Country = strings.ToUpper(loc.Country)
		}
		loc.Region = headerRegion(r, loc.Country)
	}
	if l.db == nil || !useAddress || (loc.Country != "" && loc.City != "") {
		return loc
	}
	addr, ok := l.clientAddr(r)
	if !ok {
		return loc
	}
	return l.lookup(loc, addr)
}

// LocateAddr is Locate for a visitor address the request carries in its
// body (Segment's context.ip) rather than in its connection: the proxy
// headers still count, then addr is looked up and dropped. An address that
// does not parse locates nothing.
func (l *Locator) LocateAddr(r *http.Request, addr string) Location {
	var loc Location
	if l == nil {
		return loc
	}
	if l.trustProxy {
		loc = l.Locate(r, false)
	}
	a, err := netip.ParseAddr(strings.TrimSpace(addr))
	if l.db == nil || err != nil || (loc.Country != "" && loc.City != "") {
		return loc
	}
	return l.lookup(loc, a.Unmap())
}

// lookup fills what loc (from headers) lacks from the database's record
// of addr. The region and the city's id are taken only when they belong to
// loc's country and city: a CDN's country or city beside the database's
// subdivision could name a place that does not exist.
func (l *Locator) lookup(loc Location, addr netip.Addr) Location {
	var rec cityRecord
	if err := l.db.Lookup(addr).Decode(&rec); err != nil {
		return loc
	}
	country := rec.country()
	if loc.Country == "" {
		loc.Country = country
	}
	if loc.Country != country || country == "" {
		return loc
	}
	if loc.Region == "" && len(rec.Subdivisions) > 0 && rec.Subdivisions[0].ISOCode != "" {
		loc.Region = country + "-" + rec.Subdivisions[0].ISOCode
	}
	name := rec.City.Names["en"]
	if loc.City == "" {
		loc.City = name
	}
	if loc.City == name && name != "" && rec.City.GeoNameID != 0 {
		loc.CityID = strconv.FormatUint(uint64(rec.City.GeoNameID), 10)
	}
	return loc
}

// country is the record's ISO 3166-1 alpha-2 code, in either layout.
func (rec *cityRecord) country() string {
	if rec.Country.ISOCode != "" {
		return rec.Country.ISOCode
	}
	return rec.CountryCode
}

func firstHeader(r *http.Request, names []string) string {
	for _, n := range names {
		if v := strings.TrimSpace(r.Header.Get(n)); v != "" {
			return v
		}
	}
	return ""
}

// ClientAddr is the address of r's client, as Locate reads it: the first
// X-Forwarded-For hop or X-Real-IP behind a trusted proxy, else the TCP
// peer (a nil Locator trusts no proxy). The caller must not keep it.
func (l *Locator) ClientAddr(r *http.Request) (netip.Addr, bool) {
	return l.clientAddr(r)
}

// clientAddr is the visitor's address: the first X-Forwarded-For hop or
// X-Real-IP behind a trusted proxy, else the TCP peer.
func (l *Locator) clientAddr(r *http.Request) (netip.Addr, bool) {
	if l != nil && l.trustProxy {
		if xff := r.Header.Get("X-Forwarded-For"); xff != "" {
			first, _, _ := strings.Cut(xff, ",")
			if a, err := netip.ParseAddr(strings.TrimSpace(first)); err == nil {
				return a.Unmap(), true
			}
		}
		if a, err := netip.ParseAddr(strings.TrimSpace(r.Header.Get("X-Real-IP"))); err == nil {
			return a.Unmap(), true
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	return a.Unmap(), err == nil
}
