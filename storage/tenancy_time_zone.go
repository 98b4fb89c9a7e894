package storage

import (
	"strings"
	"sync"
	"time"
	// The zone database is embedded so that a site's time zone works on a
	// host without /usr/share/zoneinfo (a scratch container, say).
	_ "time/tzdata"

	"github.com/tally-analytics/tally/fault"
)

// zones caches loaded locations: LoadLocation reads and parses a file.
var zones sync.Map // name -> *time.Location

// LoadTimeZone returns the location of an IANA time zone name, or 400
// invalid_time_zone. "Local" (the server's own zone) and paths are refused:
// a site's zone must mean the same on every server.
func LoadTimeZone(name string) (*time.Location, error) {
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), nil
	}
	bad := fault.Errorf(fault.InvalidTimeZone, "time_zone must be an IANA time zone name such as \"Europe/Berlin\" or \"UTC\", not %q", name)
	if name == "" || name == "Local" || len(name) > 64 || strings.HasPrefix(name, "/") || strings.Contains(name, "..") {
		return nil, bad
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, bad
	}
	zones.Store(name, loc)
	return loc, nil
}
